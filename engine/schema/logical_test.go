package schema_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/engine/schema"
)

// shopRoute is the route of the tests: shop_N.T → shop.T.
func shopRoute(s, t string) (string, string) {
	if regexp.MustCompile(`^shop_\d+$`).MatchString(s) {
		return "shop", t
	}
	return s, t
}

func shardDDL(t *testing.T, db, sql string) schema.LogicalDDL {
	t.Helper()
	out, err := schema.ShardDDL(db, sql, 0, shopRoute)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("%q: %d statements, want 1", sql, len(out))
	}
	return out[0]
}

// TestShardDDLEquivalent: the same change written differently on two
// shard tables (qualified or not, spacing, case, quoting) has one key and
// becomes a statement of the logical table.
func TestShardDDLEquivalent(t *testing.T) {
	a := shardDDL(t, "shop_0", "ALTER TABLE shop_0.orders ADD COLUMN note VARCHAR(20) NULL")
	b := shardDDL(t, "shop_3", "alter   table `orders`\n  add column `NOTE` varchar(20) null")
	if a.Key != b.Key {
		t.Errorf("keys differ:\n%s\n%s", a.Key, b.Key)
	}
	if want := "ALTER TABLE `shop`.`orders` ADD COLUMN note VARCHAR(20) NULL"; a.Text != want {
		t.Errorf("text %q, want %q", a.Text, want)
	}
	if !strings.Contains(b.Text, "`shop`.`orders`") || strings.Contains(b.Text, "shop_3") {
		t.Errorf("text %q does not name the logical table", b.Text)
	}
	c := shardDDL(t, "shop_1", "ALTER TABLE orders ADD COLUMN note VARCHAR(40) NULL")
	if c.Key == a.Key {
		t.Errorf("VARCHAR(20) and VARCHAR(40) have one key: %s", a.Key)
	}
}

// TestShardDDLKeepsText: only table names change; a column named like its
// table, and syntax the parser reads through a rewrite (MariaDB's INET6),
// stay as written.
func TestShardDDLKeepsText(t *testing.T) {
	d := shardDDL(t, "shop_2", "CREATE TABLE orders (id INT PRIMARY KEY, orders INT, addr INET6)")
	if want := "CREATE TABLE `shop`.`orders` (id INT PRIMARY KEY, orders INT, addr INET6)"; d.Text != want {
		t.Errorf("text %q, want %q", d.Text, want)
	}
	drop, err := schema.ShardDDL("shop_1", "DROP TABLE IF EXISTS orders, shop_1.items, other.t", 0, shopRoute)
	if err != nil || len(drop) != 1 {
		t.Fatalf("%v %v", drop, err)
	}
	if want := "DROP TABLE IF EXISTS `shop`.`orders`, `shop`.`items`, `other`.`t`"; drop[0].Text != want {
		t.Errorf("text %q, want %q", drop[0].Text, want)
	}
	if out, err := schema.ShardDDL("shop_1", "INSERT INTO orders VALUES (1)", 0, shopRoute); err != nil || len(out) != 0 {
		t.Errorf("DML: %v %v, want nothing", out, err)
	}
}

// TestShardDDLKinds: the kind of each statement, integer widths left out
// of the key, and which ALTERs only add readable columns or only drop.
func TestShardDDLKinds(t *testing.T) {
	a := shardDDL(t, "shop_0", "ALTER TABLE orders ADD COLUMN n INT(11) NULL")
	b := shardDDL(t, "shop_1", "ALTER TABLE orders ADD COLUMN n int")
	if a.Key != b.Key {
		t.Errorf("INT(11) and INT have different keys:\n%s\n%s", a.Key, b.Key)
	}
	if !a.AddsColumns || a.DropsColumns || a.Kind != schema.DDLAlter {
		t.Errorf("ADD COLUMN n INT NULL: %+v", a)
	}
	for sql, want := range map[string]schema.DDLKind{
		"CREATE TABLE orders (id INT PRIMARY KEY)": schema.DDLCreate,
		"DROP TABLE orders":                        schema.DDLDrop,
		"RENAME TABLE orders TO orders_old":        schema.DDLRename,
		"CREATE UNIQUE INDEX ix ON orders (note)":  schema.DDLAlter,
	} {
		if d := shardDDL(t, "shop_0", sql); d.Kind != want {
			t.Errorf("%s: kind %d, want %d", sql, d.Kind, want)
		}
	}
	for sql, adds := range map[string]bool{
		"ALTER TABLE orders ADD COLUMN c INT NOT NULL":           false,
		"ALTER TABLE orders ADD COLUMN c INT NOT NULL DEFAULT 0": false, // old rows read 0, not NULL
		"ALTER TABLE orders ADD COLUMN c INT DEFAULT 7":          false,
		"ALTER TABLE orders ADD c INT, ADD d TEXT":               true,
		"ALTER TABLE orders ADD c INT, DROP note":                false,
	} {
		if d := shardDDL(t, "shop_0", sql); d.AddsColumns != adds {
			t.Errorf("%s: AddsColumns %v, want %v", sql, d.AddsColumns, adds)
		}
	}
	if d := shardDDL(t, "shop_0", "ALTER TABLE orders DROP COLUMN note, DROP c"); !d.DropsColumns || d.AddsColumns || !slices.Equal(d.Columns, []string{"note", "c"}) {
		t.Errorf("DROP COLUMN: %+v", d)
	}
	if d := shardDDL(t, "shop_0", "ALTER TABLE orders CHANGE Note memo TEXT, ADD `X` INT"); !slices.Equal(d.Columns, []string{"memo", "note", "x"}) {
		t.Errorf("columns of CHANGE and ADD: %q", d.Columns)
	}
}

// TestShardDDLKeyAcrossServers: one change spelled as MariaDB and as
// MySQL 8 print it (a schema tool writing each server's SHOW CREATE TABLE
// spelling) has one key: MariaDB's JSON (LONGTEXT CHECK (json_valid)),
// default collations of one family, utf8 as utf8mb3, display widths.
func TestShardDDLKeyAcrossServers(t *testing.T) {
	for _, pair := range [][2]string{
		{"ALTER TABLE orders ADD COLUMN doc longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`doc`))",
			"ALTER TABLE orders ADD COLUMN doc json DEFAULT NULL"},
		{"ALTER TABLE orders ADD COLUMN note varchar(16) COLLATE utf8mb4_general_ci DEFAULT NULL, ADD COLUMN n int(11) NOT NULL",
			"ALTER TABLE orders ADD COLUMN note varchar(16) COLLATE utf8mb4_0900_ai_ci DEFAULT NULL, ADD COLUMN n int NOT NULL"},
		{"ALTER TABLE orders ADD COLUMN c char(2) CHARACTER SET utf8 COLLATE utf8_unicode_ci",
			"ALTER TABLE orders ADD COLUMN c char(2) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci"},
		{"CREATE TABLE orders (id int(11) NOT NULL, doc longtext CHECK (json_valid(doc)), PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
			"CREATE TABLE orders (id int NOT NULL, doc json, PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"},
		{"ALTER TABLE orders CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
			"ALTER TABLE orders CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci"},
	} {
		maria, mysql := shardDDL(t, "shop_0", pair[0]), shardDDL(t, "shop_1", pair[1])
		if maria.Key != mysql.Key {
			t.Errorf("one change, two keys:\n%s\n%s", maria.Key, mysql.Key)
		}
	}
	// What does change the table still tells them apart.
	for _, pair := range [][2]string{
		{"ALTER TABLE orders ADD COLUMN doc longtext", "ALTER TABLE orders ADD COLUMN doc json"},
		{"ALTER TABLE orders ADD COLUMN doc longblob CHECK (json_valid(doc))", "ALTER TABLE orders ADD COLUMN doc json"},
		{"ALTER TABLE orders ADD COLUMN note varchar(16) COLLATE utf8mb4_bin", "ALTER TABLE orders ADD COLUMN note varchar(16) COLLATE utf8mb4_general_ci"},
		{"ALTER TABLE orders ADD COLUMN note varchar(16) COLLATE latin1_swedish_ci", "ALTER TABLE orders ADD COLUMN note varchar(16) COLLATE utf8mb4_general_ci"},
	} {
		a, b := shardDDL(t, "shop_0", pair[0]), shardDDL(t, "shop_1", pair[1])
		if a.Key == b.Key {
			t.Errorf("%q and %q have one key: %s", pair[0], pair[1], a.Key)
		}
	}
}
