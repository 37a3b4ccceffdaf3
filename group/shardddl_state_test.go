package group_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/group"
)

func logicalDDL(t *testing.T, db, sql string) schema.LogicalDDL {
	t.Helper()
	out, err := schema.ShardDDL(db, sql, 0, func(s, tbl string) (string, string) { return "shop", tbl })
	if err != nil || len(out) != 1 {
		t.Fatalf("%q: %v %v", sql, out, err)
	}
	return out[0]
}

// TestShardLocks: six shard tables of shop.orders. The first CREATE goes
// out and the five equivalent ones are skipped; an ALTER holds each shard
// that ran it until the sixth releases it, once; dropping the shard a
// lock waits for releases it; the last DROP goes out.
func TestShardLocks(t *testing.T) {
	s := group.NewShardDDLState(3)
	const logical = "shop.orders"
	shard := func(i int) string { return fmt.Sprintf("s%d/shop_%d.orders", i%3, i) }
	for i := range 6 {
		want := group.DDLSkip
		if i == 0 {
			want = group.DDLEmit
		}
		d := logicalDDL(t, fmt.Sprintf("shop_%d", i), "CREATE TABLE orders (id INT PRIMARY KEY)")
		if v, _ := s.Create(logical, shard(i), d, d.Key, time.Time{}); v != want {
			t.Fatalf("CREATE on %s: verdict %d, want %d", shard(i), v, want)
		}
	}
	alter := func(i int, sql string) (group.DDLVerdict, *group.DDLLock) {
		return s.Alter(logical, shard(i), logicalDDL(t, fmt.Sprintf("shop_%d", i), sql), time.Time{})
	}
	v, l := alter(0, "ALTER TABLE orders ADD COLUMN c INT NULL")
	if v != group.DDLHold || !s.Held(logical, shard(0)) || s.Held(logical, shard(1)) || len(l.Waiting) != 5 || l.ID != 1 {
		t.Fatalf("first ALTER: verdict %d, lock %+v", v, l)
	}
	if v, l := alter(2, "alter table `orders` add column C int(11)"); v != group.DDLHold || !slices.Equal(l.Done, []string{shard(0), shard(2)}) {
		t.Fatalf("an equivalent ALTER: verdict %d, lock %+v", v, l)
	}
	for _, i := range []int{1, 3, 4} {
		if v, _ := alter(i, "ALTER TABLE orders ADD COLUMN c INT NULL"); v != group.DDLHold {
			t.Fatalf("ALTER on %s: verdict %d, want hold", shard(i), v)
		}
	}
	if len(s.Locks) != 1 || !slices.Equal(s.Locks[0].Waiting, []string{shard(5)}) {
		t.Fatalf("locks %+v, want one waiting for %s", s.Locks, shard(5))
	}
	// The shard it waits for is dropped: the lock releases, once.
	if v, l := s.Drop(logical, shard(5)); v != group.DDLRelease || l.SQL != "ALTER TABLE `shop`.`orders` ADD COLUMN c INT NULL" {
		t.Fatalf("dropping the last shard waited for: verdict %d, lock %+v", v, l)
	}
	if len(s.Locks) != 0 || s.Held(logical, shard(0)) {
		t.Fatalf("a lock remains after its release: %+v", s.Locks)
	}
	for i := range 5 {
		want := group.DDLSkip
		if i == 4 {
			want = group.DDLEmit // the last shard table's DROP
		}
		if v, _ := s.Drop(logical, shard(i)); v != want {
			t.Fatalf("DROP of %s: verdict %d, want %d", shard(i), v, want)
		}
	}
}

// TestShardLocksConflict: a shard that runs a different DDL is held and
// named, and the lock no longer releases by itself.
func TestShardLocksConflict(t *testing.T) {
	s := group.NewShardDDLState(1)
	for i := range 3 {
		s.Join("shop.orders", fmt.Sprintf("s0/shop_%d.orders", i))
	}
	s.Alter("shop.orders", "s0/shop_0.orders", logicalDDL(t, "shop_0", "ALTER TABLE orders ADD COLUMN c INT"), time.Time{})
	v, l := s.Alter("shop.orders", "s0/shop_1.orders", logicalDDL(t, "shop_1", "ALTER TABLE orders ADD COLUMN c BIGINT"), time.Time{})
	if v != group.DDLConflict || l.Conflicts["s0/shop_1.orders"] == "" || !s.Held("shop.orders", "s0/shop_1.orders") {
		t.Fatalf("a different ALTER: verdict %d, lock %+v", v, l)
	}
	if v, _ := s.Alter("shop.orders", "s0/shop_2.orders", logicalDDL(t, "shop_2", "ALTER TABLE orders ADD COLUMN c INT"), time.Time{}); v != group.DDLHold {
		t.Fatalf("the last equivalent ALTER with a conflict open: verdict %d, want hold", v)
	}
}

// TestShardLocksDeterministic: two states fed the same DDL in the same
// order are equal.
func TestShardLocksDeterministic(t *testing.T) {
	feed := func() string {
		s := group.NewShardDDLState(1)
		for i := range 3 {
			d := logicalDDL(t, "shop_0", "CREATE TABLE orders (id INT)")
			s.Create("shop.orders", fmt.Sprintf("s0/shop_%d.orders", i), d, d.Key, time.Time{})
		}
		s.Alter("shop.orders", "s0/shop_1.orders", logicalDDL(t, "shop_1", "ALTER TABLE orders DROP COLUMN x"), time.Time{})
		b, _ := json.Marshal(s)
		return string(b)
	}
	if a, b := feed(), feed(); a != b {
		t.Fatalf("two feeds differ:\n%s\n%s", a, b)
	}
}

// TestLockKeepsSQLMode: a lock's text means what it says only under the
// sql_mode the shard ran it with (here `'a\'` is the string a\ under
// NO_BACKSLASH_ESCAPES); the lock keeps the mode, through the JSON a
// cursor is saved as, so that the DDL a new owner or a replay releases
// reads the same.
func TestLockKeepsSQLMode(t *testing.T) {
	s := group.NewShardDDLState(2)
	s.Join("shop.orders", "s0/shop_0.orders")
	s.Join("shop.orders", "s1/shop_1.orders")
	d, err := schema.ShardDDL("shop_0", `ALTER TABLE orders ADD COLUMN n VARCHAR(5) DEFAULT 'a\'`, schema.ModeNoBackslashEscapes,
		func(s, tbl string) (string, string) { return "shop", tbl })
	if err != nil || len(d) != 1 || d[0].SQLMode != schema.ModeNoBackslashEscapes {
		t.Fatalf("ShardDDL: %v %+v", err, d)
	}
	_, l := s.Alter("shop.orders", "s0/shop_0.orders", d[0], time.Time{})
	if l == nil || l.SQLMode != uint64(schema.ModeNoBackslashEscapes) {
		t.Fatalf("lock %+v, want the shard's sql_mode", l)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back group.ShardDDLState
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Locks) != 1 || back.Locks[0].SQLMode != l.SQLMode || back.Locks[0].SQL != l.SQL {
		t.Fatalf("lock after JSON %+v, want %+v", back.Locks, l)
	}
	// The lock's text, under its mode, is the ALTER the shard ran.
	if _, err := schema.ShardDDL("shop", back.Locks[0].SQL, schema.SQLMode(back.Locks[0].SQLMode), func(s, t string) (string, string) { return s, t }); err != nil {
		t.Errorf("the lock's text does not parse under its mode: %v", err)
	}
	if _, err := schema.ShardDDL("shop", back.Locks[0].SQL, 0, func(s, t string) (string, string) { return s, t }); err == nil {
		t.Errorf("the lock's text parses in the default mode too: the test shows nothing")
	}
}

// TestTableSignatureAcrossServers: a shard table on MariaDB (integer
// display widths) and one on MySQL 8.0.19+ (none) with the same columns
// have one signature, which a CREATE of the second shard table is
// compared by; what changes values (a ZEROFILL width, a length, a type)
// still tells them apart.
func TestTableSignatureAcrossServers(t *testing.T) {
	sig := func(cols ...change.Column) string {
		snap := &change.SchemaSnapshot{Tables: []change.SchemaTableHistory{{Schema: "shop_0", Name: "orders",
			Versions: []change.SchemaVersion{{Table: &change.Table{Schema: "shop_0", Name: "orders", Columns: cols}}}}}}
		return group.TableSignature(snap, "shop_0.orders")
	}
	col := func(name, typ, raw string) change.Column {
		return change.Column{Name: name, Type: typ, RawType: raw, Nullable: true}
	}
	maria := sig(col("id", "int", "int(11)"), col("b", "tinyint", "tinyint(4)"), col("u", "bigint", "bigint(20) unsigned"),
		col("y", "year", "year(4)"), col("doc", "json", "json"))
	mysql := sig(col("id", "int", "int"), col("b", "tinyint", "tinyint"), col("u", "bigint", "bigint unsigned"),
		col("y", "year", "year"), col("doc", "json", "json"))
	if maria == "" || maria != mysql {
		t.Errorf("one table, two signatures:\n%s\n%s", maria, mysql)
	}
	for _, pair := range [][2]change.Column{
		{col("z", "int", "int(5) unsigned zerofill"), col("z", "int", "int(8) unsigned zerofill")},
		{col("v", "varchar", "varchar(32)"), col("v", "varchar", "varchar(40)")},
		{col("doc", "json", "json"), col("doc", "longtext", "longtext")},
	} {
		if sig(pair[0]) == sig(pair[1]) {
			t.Errorf("%s and %s have one signature", pair[0].RawType, pair[1].RawType)
		}
	}
}
