package group_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/schema"
)

func logicalDDL(t *testing.T, db, sql string) schema.LogicalDDL {
	t.Helper()
	out, err := schema.ShardDDL(db, sql, func(s, tbl string) (string, string) { return "shop", tbl })
	if err != nil || len(out) != 1 {
		t.Fatalf("%q: %v %v", sql, out, err)
	}
	return out[0]
}

// TestShardLocks: six shard tables of shop.orders. The first CREATE goes
// out and the five equivalent ones are skipped; an ALTER holds each shard
// that ran it until the sixth releases it, once; a different ALTER is a
// conflict that names its shard; dropping the shard a lock waits for
// releases it; the last DROP goes out.
func TestShardLocks(t *testing.T) {
	s := group.NewShardLocks()
	const logical = "shop.orders"
	shard := func(i int) string { return fmt.Sprintf("shop_%d.orders", i) }
	for i := range 6 {
		want := group.DDLSkip
		if i == 0 {
			want = group.DDLEmit
		}
		d := logicalDDL(t, fmt.Sprintf("shop_%d", i), "CREATE TABLE orders (id INT PRIMARY KEY)")
		if v := s.Create(logical, shard(i), d); v != want {
			t.Fatalf("CREATE on %s: verdict %d, want %d", shard(i), v, want)
		}
	}
	alter := func(i int, sql string) (group.DDLVerdict, *group.DDLLock) {
		return s.Alter(logical, shard(i), logicalDDL(t, fmt.Sprintf("shop_%d", i), sql))
	}
	v, l := alter(0, "ALTER TABLE orders ADD COLUMN c INT NULL")
	if v != group.DDLHold || !s.Held(logical, shard(0)) || s.Held(logical, shard(1)) || len(l.Waiting) != 5 {
		t.Fatalf("first ALTER: verdict %d, lock %+v", v, l)
	}
	if v, l := alter(2, "alter table `orders` add column C int null"); v != group.DDLHold || !slices.Equal(l.Done, []string{shard(0), shard(2)}) {
		t.Fatalf("an equivalent ALTER: verdict %d, lock %+v", v, l)
	}
	if v, l := alter(3, "ALTER TABLE orders ADD COLUMN c BIGINT NULL"); v != group.DDLConflict || l.Conflicts[shard(3)] == "" || s.Held(logical, shard(3)) {
		t.Fatalf("a different ALTER: verdict %d, lock %+v", v, l)
	}
	for _, i := range []int{1, 3, 4} {
		if v, _ := alter(i, "ALTER TABLE orders ADD COLUMN c INT NULL"); v != group.DDLHold {
			t.Fatalf("ALTER on %s: verdict %d, want hold", shard(i), v)
		}
	}
	if got := s.Locks(); len(got) != 1 || !slices.Equal(got[0].Waiting, []string{shard(5)}) || len(got[0].Conflicts) != 1 {
		t.Fatalf("locks %+v, want one waiting for %s", got, shard(5))
	}
	// The shard it waits for is dropped: the lock releases, once.
	if v, l := s.Drop(logical, shard(5)); v != group.DDLRelease || l.DDL.Text != "ALTER TABLE `shop`.`orders` ADD COLUMN c INT NULL" {
		t.Fatalf("dropping the last shard waited for: verdict %d, lock %+v", v, l)
	}
	if len(s.Locks()) != 0 || s.Held(logical, shard(0)) {
		t.Fatalf("a lock remains after its release: %+v", s.Locks())
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

// TestShardLocksDeterministic: two states fed the same DDL in the same
// order have the same locks.
func TestShardLocksDeterministic(t *testing.T) {
	feed := func() []*group.DDLLock {
		s := group.NewShardLocks()
		for i := range 3 {
			s.Create("shop.orders", fmt.Sprintf("shop_%d.orders", i), logicalDDL(t, "shop_0", "CREATE TABLE orders (id INT)"))
		}
		s.Alter("shop.orders", "shop_1.orders", logicalDDL(t, "shop_1", "ALTER TABLE orders DROP COLUMN x"))
		return s.Locks()
	}
	a, b := feed(), feed()
	if len(a) != 1 || len(b) != 1 || !slices.Equal(a[0].Done, b[0].Done) || !slices.Equal(a[0].Waiting, b[0].Waiting) || a[0].DDL != b[0].DDL {
		t.Fatalf("two feeds differ: %+v %+v", a, b)
	}
}
