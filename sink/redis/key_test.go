package redis

import "testing"

// TestKeyFor: the key template's placeholders, text in braces that is
// none of them kept as it is, and SCAN patterns with the glob's
// characters escaped.
func TestKeyFor(t *testing.T) {
	for _, tc := range []struct {
		tmpl, db, table string
		pk              []string
		want, pattern   string
	}{
		{"{table}:{pk}", "shop", "orders", []string{"42"}, "orders:42", "orders:*"},
		{"cache:{database}.{table}:{pk}", "shop", "orders", []string{"1", "a b"}, "cache:shop.orders:1:a b", "cache:shop.orders:*"},
		{"x{y}:{table}/{pk}{", "s", "t*", []string{"7"}, "x{y}:t*/7{", `x{y}:t\*/*{`},
		{"{pk}", "s", "t", []string{"2026-01-02 03:04:05"}, "2026-01-02 03:04:05", "*"},
	} {
		if got := KeyFor(tc.tmpl, tc.db, tc.table, tc.pk); got != tc.want {
			t.Errorf("KeyFor(%q, %q, %q, %q) = %q, want %q", tc.tmpl, tc.db, tc.table, tc.pk, got, tc.want)
		}
		if got := compileKey(tc.tmpl).pattern(tc.db, tc.table); got != tc.pattern {
			t.Errorf("pattern of %q = %q, want %q", tc.tmpl, got, tc.pattern)
		}
	}
	if p := prefix("braidtest:1:{table}:{pk}"); p != "braidtest:1:" {
		t.Errorf("prefix = %q", p)
	}
	for _, s := range []string{"0:0", "18446744073709551615:2147483647", "d5:3"} {
		p, ok := parsePoint(s)
		if !ok || string(appendPoint(nil, p)) != s[len(s)-len(string(appendPoint(nil, p))):] {
			t.Errorf("parsePoint(%q) = %v, %v", s, p, ok)
		}
	}
	if _, ok := parsePoint("x"); ok {
		t.Error("parsePoint(x) ok")
	}
}
