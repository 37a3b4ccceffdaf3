package redis

import (
	"math/rand/v2"
	"strings"
	"testing"
)

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
		// Row keys that would reach the sink's own keys are escaped.
		{"{table}:{pk}", "app", "braid", []string{"sink:shop.cache", "0"}, "~braid:sink:shop.cache:0", "braid:* ~braid:*"},
		{"p:{table}:{pk}", "app", "braid", []string{"sink:shop.cache", "workers"}, "p:~braid:sink:shop.cache:workers", "p:braid:* p:~braid:*"},
		{"{database}:{pk}", "braid", "t", []string{"sink:x"}, "~braid:sink:x", "braid:* ~braid:*"},
		{"braid:sink:{table}:{pk}", "s", "braid", []string{"sink:1"}, "braid:sink:~braid:sink:1", "braid:sink:braid:* braid:sink:~braid:*"},
		{"{table}:{pk}", "s", "~t", []string{"1"}, "~~t:1", "~~t:*"},
		{"{table}:{pk}", "s", "t", []string{"5:seq"}, "t:5:seq~", "t:*"},
		{"{table}:{pk}", "s", "t", []string{"a~"}, "t:a~~", "t:*"},
		{"{pk}:{table}", "s", "x:seq", []string{"1"}, "1:x:seq~", "*:x:seq~"},
	} {
		if got := KeyFor(tc.tmpl, tc.db, tc.table, tc.pk); got != tc.want {
			t.Errorf("KeyFor(%q, %q, %q, %q) = %q, want %q", tc.tmpl, tc.db, tc.table, tc.pk, got, tc.want)
		}
		if got := strings.Join(compileKey(tc.tmpl).patterns(tc.db, tc.table), " "); got != tc.pattern {
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

// TestRowKeysNeverReachOwnKeys: row keys from names and values made of
// the characters that matter (those of braid:sink:, :seq and the escape
// mark) never start, after the prefix, with the sink's own prefix, never
// end as a version key does, and two rows never share a key.
func TestRowKeysNeverReachOwnKeys(t *testing.T) {
	const alphabet = "braid:sinkeq~x"
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, r.IntN(14))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for _, tmpl := range []string{"{table}:{pk}", "{pk}", "c:{database}{table}{pk}", "{pk}:seq", "~{table}"} {
		p := prefix(tmpl)
		seen := map[string]string{}
		for range 50000 {
			db, table, pk := word(), word(), word()
			key := KeyFor(tmpl, db, table, []string{pk})
			if strings.HasPrefix(key[len(p):], ownPrefix) || strings.HasSuffix(key, versionSuffix) {
				t.Fatalf("%s: %q %q %q is key %q, in the sink's own keys", tmpl, db, table, pk, key)
			}
			raw := strings.NewReplacer("{database}", db, "{table}", table, "{pk}", pk).Replace(tmpl)
			if other, ok := seen[key]; ok && other != raw {
				t.Fatalf("%s: %q and %q share key %q", tmpl, other, raw, key)
			}
			seen[key] = raw
		}
	}
}
