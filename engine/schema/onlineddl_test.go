package schema_test

import (
	"reflect"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/spec"
)

func at(n uint32) change.Position { return change.Position{File: "binlog.000001", Pos: n} }

func onlineTracker(t *testing.T) *schema.Tracker {
	t.Helper()
	r, err := schema.NewOnlineRules([]string{`^_(.+)_gho$`, `^_+(.+)_new$`}, []string{`^_(.+)_(?:ghc|del)$`, `^_+(.+)_old$`})
	if err != nil {
		t.Fatal(err)
	}
	tr := schema.NewTracker()
	tr.SetOnlineRules(r)
	if _, err := tr.ApplyDDL(at(100), "db", "CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))", 0); err != nil {
		t.Fatal(err)
	}
	return tr
}

func apply(t *testing.T, tr *schema.Tracker, pos uint32, sql string) {
	t.Helper()
	if _, err := tr.ApplyDDL(at(pos), "db", sql, 0); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestOnlineSwapPtOSC: pt-online-schema-change's steps. The DDL run on
// _orders_new is kept until the swap, survives a snapshot and restore,
// and at the swap becomes the ALTER of orders, which then has the
// copy's columns.
func TestOnlineSwapPtOSC(t *testing.T) {
	tr := onlineTracker(t)
	apply(t, tr, 200, "CREATE TABLE `db`.`_orders_new` (id INT PRIMARY KEY, note VARCHAR(20))")
	apply(t, tr, 300, "ALTER TABLE `db`.`_orders_new` ADD COLUMN gift varchar(20) NULL")
	if !tr.OnlineChanged(at(300)) {
		t.Fatal("the shadow's ALTER did not change the migrations: a cursor would not save it")
	}
	// A restart between the ALTER and the swap: the cursor's snapshot.
	tr, err := schema.Restore(tr.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if ms := tr.Migrations(); len(ms) != 1 || ms[0].Table != "orders" || ms[0].Shadow != "_orders_new" || len(ms[0].DDL) != 1 {
		t.Fatalf("migrations after restore: %+v", ms)
	}
	r, _ := schema.NewOnlineRules([]string{`^_+(.+)_new$`}, []string{`^_+(.+)_old$`})
	tr.SetOnlineRules(r)
	apply(t, tr, 400, "RENAME TABLE `db`.`orders` TO `db`.`_orders_old`, `db`.`_orders_new` TO `db`.`orders`")
	swaps := tr.OnlineSwaps(at(400))
	if len(swaps) != 1 {
		t.Fatalf("swaps at the RENAME: %+v", swaps)
	}
	db, sql, _, ok := swaps[0].ALTER()
	if !ok || db != "db" || sql != "ALTER TABLE `db`.`orders` ADD COLUMN gift varchar(20) NULL" {
		t.Fatalf("swap's DDL: %q %q %v", db, sql, ok)
	}
	if tb, _ := tr.Table("db", "orders"); len(tb.Columns) != 3 {
		t.Fatalf("orders after the swap has %d columns, want 3", len(tb.Columns))
	}
	if len(tr.Migrations()) != 0 {
		t.Fatal("a swapped migration is still under way")
	}
	// A reader restored from before the swap (a catch-up) has it again.
	again, err := schema.Restore(schema.SnapshotAt(tr.Snapshot(), at(350)))
	if err != nil {
		t.Fatal(err)
	}
	if ms := again.Migrations(); len(ms) != 1 || len(ms[0].DDL) != 1 {
		t.Fatalf("migrations at 350: %+v", ms)
	}
	if ms := mustRestore(t, schema.SnapshotAt(tr.Snapshot(), at(250))).Migrations(); len(ms) != 1 || len(ms[0].DDL) != 0 {
		t.Fatalf("migrations at 250 (before the shadow's ALTER): %+v", ms)
	}
}

func mustRestore(t *testing.T, snap change.SchemaSnapshot) *schema.Tracker {
	t.Helper()
	tr, err := schema.Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestOnlineSwapGhostTwoStep: gh-ost's shadow created LIKE the table, its
// ALTER, and a two-step cut-over (the table renamed away, then the
// shadow renamed in).
func TestOnlineSwapGhostTwoStep(t *testing.T) {
	tr := onlineTracker(t)
	apply(t, tr, 200, "create /* gh-ost */ table `db`.`_orders_ghc` (id bigint auto_increment, last_update timestamp not null default current_timestamp on update current_timestamp, hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256")
	apply(t, tr, 300, "create /* gh-ost */ table `db`.`_orders_gho` like `db`.`orders`")
	apply(t, tr, 400, "alter /* gh-ost */ table `db`.`_orders_gho` modify column note varchar(60)")
	apply(t, tr, 500, "rename /* gh-ost */ table `db`.`orders` to `db`.`_orders_del`")
	if len(tr.OnlineSwaps(at(500))) != 0 {
		t.Fatal("the table renamed away is not yet the swap")
	}
	apply(t, tr, 600, "rename /* gh-ost */ table `db`.`_orders_gho` to `db`.`orders`")
	swaps := tr.OnlineSwaps(at(600))
	if len(swaps) != 1 {
		t.Fatalf("swaps: %+v", swaps)
	}
	if _, sql, _, _ := swaps[0].ALTER(); sql != "alter /* gh-ost */ table `db`.`orders` modify column note varchar(60)" {
		t.Fatalf("swap's DDL: %q", sql)
	}
}

// TestOnlineAbandoned: a shadow dropped without a swap leaves no
// migration, and a later RENAME of the table is no swap.
func TestOnlineAbandoned(t *testing.T) {
	tr := onlineTracker(t)
	apply(t, tr, 200, "CREATE TABLE `db`.`_orders_new` LIKE `db`.`orders`")
	apply(t, tr, 300, "ALTER TABLE `db`.`_orders_new` ADD COLUMN gift int")
	apply(t, tr, 400, "DROP TABLE IF EXISTS `db`.`_orders_new`")
	if len(tr.Migrations()) != 0 || !tr.OnlineChanged(at(400)) {
		t.Fatalf("after the shadow's drop: %+v", tr.Migrations())
	}
	apply(t, tr, 500, "RENAME TABLE orders TO orders_archive")
	if len(tr.OnlineSwaps(at(500))) != 0 {
		t.Fatal("a plain RENAME was taken for a swap")
	}
}

// TestOnlineSwapSeveralStatements: several statements run on one copy
// come out at the swap as one ALTER TABLE with their specifications in
// order, which gives the table the copy's shape; statements one ALTER
// could not hold (a column named by two of them, a CREATE INDEX) stay
// statements of their own, joined by "; ".
func TestOnlineSwapSeveralStatements(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stmts []string
		want  string
	}{{
		name: "combined",
		stmts: []string{
			"alter /* gh-ost */ table `db`.`_orders_gho` add column gift varchar(20) null -- the gift\n",
			"ALTER TABLE _orders_gho ADD INDEX note_idx (note), MODIFY COLUMN note varchar(60) NOT NULL;",
			"alter table `db`.`_orders_gho` drop column `old`, add column `made` datetime after id",
		},
		want: "alter /* gh-ost */ table `db`.`orders` add column gift varchar(20) null, ADD INDEX note_idx (note), MODIFY COLUMN note varchar(60) NOT NULL, drop column `old`, add column `made` datetime after id",
	}, {
		name:  "one column twice",
		stmts: []string{"ALTER TABLE _orders_gho ADD COLUMN c INT NULL", "ALTER TABLE _orders_gho MODIFY COLUMN c BIGINT NULL"},
		want:  "ALTER TABLE `db`.`orders` ADD COLUMN c INT NULL; ALTER TABLE `db`.`orders` MODIFY COLUMN c BIGINT NULL",
	}, {
		name:  "a CREATE INDEX",
		stmts: []string{"ALTER TABLE _orders_gho ADD COLUMN c INT NULL", "CREATE UNIQUE INDEX n ON _orders_gho (note)"},
		want:  "ALTER TABLE `db`.`orders` ADD COLUMN c INT NULL; CREATE UNIQUE INDEX n ON `db`.`orders` (note)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := onlineTracker(t)
			apply(t, tr, 150, "ALTER TABLE orders ADD COLUMN old INT NULL")
			apply(t, tr, 200, "CREATE TABLE `db`.`_orders_gho` LIKE `db`.`orders`")
			for i, st := range tc.stmts {
				apply(t, tr, uint32(300+i), st)
			}
			apply(t, tr, 400, "RENAME TABLE `db`.`orders` TO `db`.`_orders_del`, `db`.`_orders_gho` TO `db`.`orders`")
			swaps := tr.OnlineSwaps(at(400))
			if len(swaps) != 1 {
				t.Fatalf("swaps: %+v", swaps)
			}
			db, sql, _, ok := swaps[0].ALTER()
			if !ok || db != "db" || sql != tc.want {
				t.Fatalf("swap's DDL: %q %v\nwant %q", sql, ok, tc.want)
			}
			// The ALTER gives the table the shape the copy had.
			again := onlineTracker(t)
			apply(t, again, 150, "ALTER TABLE orders ADD COLUMN old INT NULL")
			apply(t, again, 400, sql)
			got, _ := again.Table("db", "orders")
			want, _ := tr.Table("db", "orders")
			if !reflect.DeepEqual(got.Columns, want.Columns) {
				t.Fatalf("the ALTER gives orders\n%+v\nthe copy swapped in has\n%+v", got.Columns, want.Columns)
			}
		})
	}
}

// TestDiffALTER: the ALTER derived from a table's columns before and
// after a swap whose own DDL was not seen gives the table the columns it
// has after; a drop beside an add (maybe a rename) derives none.
func TestDiffALTER(t *testing.T) {
	const before = "CREATE TABLE orders (id INT UNSIGNED NOT NULL PRIMARY KEY, note VARCHAR(20), state ENUM('a','b') NOT NULL)"
	for _, tc := range []struct {
		after string
		want  string
	}{
		{"CREATE TABLE orders (id INT UNSIGNED NOT NULL PRIMARY KEY, note VARCHAR(20), state ENUM('a','b') NOT NULL, gift VARCHAR(20) NULL)",
			"ALTER TABLE `db`.`orders` ADD COLUMN `gift` varchar(20) NULL AFTER `state`"},
		{"CREATE TABLE orders (made DATETIME NOT NULL, id INT UNSIGNED NOT NULL PRIMARY KEY, note VARCHAR(60) NOT NULL, state ENUM('a','b') NOT NULL)",
			"ALTER TABLE `db`.`orders` MODIFY COLUMN `note` varchar(60) NOT NULL, ADD COLUMN `made` datetime NOT NULL FIRST"},
		{"CREATE TABLE orders (id INT UNSIGNED NOT NULL PRIMARY KEY, state ENUM('a','b','c') NOT NULL)",
			"ALTER TABLE `db`.`orders` DROP COLUMN `note`, MODIFY COLUMN `state` enum('a','b','c') NOT NULL"},
		{"CREATE TABLE orders (id INT UNSIGNED NOT NULL PRIMARY KEY, remark VARCHAR(20), state ENUM('a','b') NOT NULL)", ""},
		{"CREATE TABLE orders (id INT UNSIGNED NOT NULL PRIMARY KEY, state ENUM('a','b') NOT NULL, note VARCHAR(20))", ""},
	} {
		table := func(sqls ...string) *schema.Tracker {
			tr := schema.NewTracker()
			for i, sql := range sqls {
				if _, err := tr.ApplyDDL(at(uint32(100+i)), "db", sql, 0); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			return tr
		}
		b, _ := table(before).Table("db", "orders")
		a, _ := table(tc.after).Table("db", "orders")
		sql, ok := schema.DiffALTER("db", "orders", b, a)
		if sql != tc.want || ok != (tc.want != "") {
			t.Fatalf("to %s:\nderived %q %v\nwant    %q", tc.after, sql, ok, tc.want)
		}
		if !ok {
			continue
		}
		got, _ := table(before, sql).Table("db", "orders")
		if !reflect.DeepEqual(got.Columns, a.Columns) {
			t.Fatalf("%s gives\n%+v\nwant\n%+v", sql, got.Columns, a.Columns)
		}
	}
}

// TestOnlineSwapUnknown: a copy made and altered before reading began
// (the tracker learnt it as a table, with no migration), renamed in for
// the table in the RENAME that renames the table away, is a swap without
// its DDL; renamed in after the table went in an earlier statement (a
// two-step cut-over), it is not (the RENAME goes out as one).
func TestOnlineSwapUnknown(t *testing.T) {
	for _, twoStep := range []bool{false, true} {
		tr := schema.NewTracker()
		apply(t, tr, 100, "CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))")
		apply(t, tr, 200, "CREATE TABLE _orders_gho (id INT PRIMARY KEY, note VARCHAR(20), gift VARCHAR(20))")
		r, _ := schema.NewOnlineRules([]string{`^_(.+)_gho$`}, []string{`^_(.+)_(?:ghc|del)$`})
		tr.SetOnlineRules(r)
		swap := "RENAME TABLE orders TO _orders_del, _orders_gho TO orders"
		if twoStep {
			apply(t, tr, 250, "RENAME TABLE orders TO _orders_del")
			swap = "RENAME TABLE _orders_gho TO orders"
		}
		apply(t, tr, 300, swap)
		swaps := tr.OnlineSwaps(at(300))
		if twoStep {
			if len(swaps) != 0 {
				t.Fatalf("two steps: swaps %+v, want none", swaps)
			}
			continue
		}
		if len(swaps) != 1 || swaps[0].Table != "orders" || swaps[0].Shadow != "_orders_gho" {
			t.Fatalf("swaps: %+v", swaps)
		}
		if _, _, _, ok := swaps[0].ALTER(); ok {
			t.Fatal("a swap whose DDL was not seen has an ALTER")
		}
		before, _ := tr.TableBefore("db", "orders", at(300))
		after, _ := tr.Table("db", "orders")
		if sql, _ := schema.DiffALTER("db", "orders", before, after); sql != "ALTER TABLE `db`.`orders` ADD COLUMN `gift` varchar(20) NULL AFTER `note`" {
			t.Fatalf("derived: %q", sql)
		}
	}
}

// TestOnlineRuleVariants: the spec's default rules (online_ddl: auto)
// know the tools' variant names: pt-online-schema-change's second try
// (__orders_new, __orders_old, when _orders_new is taken) and gh-ost's
// --timestamp-old-table (_orders_YYYYMMDDhhmmss_del); each swap hands out
// its migration's ALTER; so does pt-online-schema-change's swap of a
// table whose name begins with an underscore (_orders: __orders_new). A
// DM-style custom rule (shadow_table_rules) replaces the defaults.
func TestOnlineRuleVariants(t *testing.T) {
	s, err := spec.Parse([]byte("name: shop\nsources: [{name: a, address: '127.0.0.1:3306'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := schema.NewOnlineRules(s.OnlineDDLRules())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"__orders_new", "__orders_old", "_orders_20261206225959_del", "_orders_ghc", "_orders_gho"} {
		if got, ok := r.HelperOf(name); !ok || got != "orders" {
			t.Errorf("HelperOf(%q) = %q, %v; want orders", name, got, ok)
		}
	}
	if r.Helper("orders") || r.Helper("orders_new") {
		t.Error("a plain table was taken for a helper")
	}
	for _, tc := range []struct{ shadow, old string }{{"__orders_new", "__orders_old"}, {"_orders_gho", "_orders_20261206225959_del"}} {
		tr := schema.NewTracker()
		tr.SetOnlineRules(r)
		apply(t, tr, 100, "CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))")
		apply(t, tr, 200, "CREATE TABLE `db`.`"+tc.shadow+"` LIKE `db`.`orders`")
		apply(t, tr, 300, "ALTER TABLE `db`.`"+tc.shadow+"` ADD COLUMN gift int NULL")
		apply(t, tr, 400, "RENAME TABLE `db`.`orders` TO `db`.`"+tc.old+"`, `db`.`"+tc.shadow+"` TO `db`.`orders`")
		swaps := tr.OnlineSwaps(at(400))
		if len(swaps) != 1 {
			t.Fatalf("%s: swaps %+v", tc.shadow, swaps)
		}
		if _, sql, _, ok := swaps[0].ALTER(); !ok || sql != "ALTER TABLE `db`.`orders` ADD COLUMN gift int NULL" {
			t.Fatalf("%s: swap's DDL %q", tc.shadow, sql)
		}
	}

	// A table whose name begins with an underscore: pt-online-schema-change
	// names its copy __orders_new, which the rule alone reads as orders'.
	tr := schema.NewTracker()
	tr.SetOnlineRules(r)
	apply(t, tr, 100, "CREATE TABLE _orders (id INT PRIMARY KEY, note VARCHAR(20))")
	apply(t, tr, 200, "CREATE TABLE `db`.`__orders_new` (id INT PRIMARY KEY, note VARCHAR(20))")
	apply(t, tr, 300, "ALTER TABLE `db`.`__orders_new` ADD COLUMN gift int NULL")
	if ms := tr.Migrations(); len(ms) != 1 || ms[0].Table != "_orders" {
		t.Fatalf("migrations of _orders: %+v", ms)
	}
	apply(t, tr, 400, "RENAME TABLE `db`.`_orders` TO `db`.`__orders_old`, `db`.`__orders_new` TO `db`.`_orders`")
	if swaps := tr.OnlineSwaps(at(400)); len(swaps) != 1 {
		t.Fatalf("_orders: swaps %+v", swaps)
	} else if _, sql, _, _ := swaps[0].ALTER(); sql != "ALTER TABLE `db`.`_orders` ADD COLUMN gift int NULL" {
		t.Fatalf("_orders: swap's DDL %q", sql)
	}

	s.ShadowTableRules, s.TrashTableRules = []string{`^(.+)_shadow$`}, []string{`^(.+)_trash$`}
	if r, err = schema.NewOnlineRules(s.OnlineDDLRules()); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.ShadowOf("orders_shadow"); !ok || got != "orders" || r.Helper("_orders_gho") {
		t.Fatalf("custom rules: ShadowOf(orders_shadow) = %q, %v; _orders_gho a helper: %v", got, ok, r.Helper("_orders_gho"))
	}
}
