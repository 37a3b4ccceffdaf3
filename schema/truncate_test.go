package schema

import "testing"

// TestTruncatedTable: the table a TRUNCATE empties, qualified with the
// default database when it is not; no table for other statements.
func TestTruncatedTable(t *testing.T) {
	cases := []struct {
		db, sql, want string
	}{
		{"shop", "TRUNCATE TABLE orders", "shop.orders"},
		{"shop", "truncate orders", "shop.orders"},
		{"", "TRUNCATE TABLE `sh op`.`or``ders`", "sh op.or`ders"},
		{"x", "/* lead */ TRUNCATE /* mid */ TABLE shop_1.orders", "shop_1.orders"},
		{"", "TRUNCATE TABLE orders", ""}, // no database to qualify it with
		{"shop", "TRUNCATED", ""},
		{"shop", "DROP TABLE orders", ""},
		{"shop", "INSERT INTO orders VALUES (1)", ""},
	}
	for _, c := range cases {
		got, ok := TruncatedTable(c.db, c.sql)
		if ok != (c.want != "") || got != c.want && ok {
			t.Errorf("truncatedTable(%q, %q) = %q, %v; want %q", c.db, c.sql, got, ok, c.want)
		}
	}
}
