package group_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
	"github.com/braid-cdc/braid/spec"
)

// TestShardDDLLockAcrossFailover: a pessimistic lock holds shop_0's rows
// when shop_0's source fails over to its replica, whose binlog files are
// numbered below the old primary's; rows are held on both servers; then
// the other shard runs the ALTER. The lock releases and its re-read finds
// where the held rows began on the promoted replica by GTID: every row
// comes once, shop_0's held ones after the one logical ALTER and with its
// column. The old code re-read the replica at the dead primary's file:pos
// (a file the replica does not have), and the destination stopped.
func TestShardDDLLockAcrossFailover(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	other := mysqltest.Start(t)
	for range 3 {
		primary.FlushLogs(t) // not replicated: the replica stays on its first file
	}
	create := "CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(20))"
	primary.Exec(t, "CREATE DATABASE shop_0", fmt.Sprintf(create, 0), "INSERT INTO shop_0.orders VALUES (1, 'a'), (2, 'a')")
	other.Exec(t, "CREATE DATABASE shop_1", fmt.Sprintf(create, 1), "INSERT INTO shop_1.orders VALUES (1, 'b'), (2, 'b')")
	tp.WaitCaughtUp(t)
	vip := tcpproxy.Start(t, primary.Addr())

	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Ordering: "strict", ShardDDL: spec.ShardDDLPessimistic,
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources: []spec.Source{
			{Name: "a", Address: vip.Addr(), Start: earliest},
			{Name: "b", Address: other.Addr(), Start: earliest},
		}}
	ds = ds.WithDefaults()
	c := collect(t, group.Config{Spec: &ds})
	waitRows(t, c, 4, 30*time.Second)

	primary.Exec(t, "ALTER TABLE shop_0.orders ADD COLUMN c INT NULL", "INSERT INTO shop_0.orders VALUES (3, 'held', 3), (4, 'held', 4)")
	other.Exec(t, "INSERT INTO shop_1.orders VALUES (3, 'b')")
	heldAtLeast := func(n int64) {
		t.Helper()
		retry.Until(t, 60*time.Second, func() error {
			st := c.dest.ShardDDL()
			if st == nil || len(st.Locks) != 1 || st.Locks[0].HeldRows < n {
				return fmt.Errorf("no lock holding %d rows: %+v", n, st)
			}
			return nil
		})
	}
	heldAtLeast(2)

	tp.FailOver(t, vip, replica)
	replica.Exec(t, "INSERT INTO shop_0.orders VALUES (5, 'held after', 5)")
	other.Exec(t, "INSERT INTO shop_1.orders VALUES (4, 'b')")
	heldAtLeast(3)

	other.Exec(t, "ALTER TABLE shop_1.orders ADD COLUMN c INT NULL", "INSERT INTO shop_1.orders VALUES (5, 'b', 5)")
	waitRows(t, c, 10, 60*time.Second)
	ddl, rows, order := streamOf(c)
	var alters []string
	for _, ev := range ddl {
		if strings.HasPrefix(ev.DDL.SQL, "ALTER") {
			alters = append(alters, ev.DDL.SQL)
		}
	}
	if !slices.Equal(alters, []string{"ALTER TABLE `shop`.`orders` ADD COLUMN c INT NULL"}) {
		t.Fatalf("ALTERs in the stream: %q; want the one logical ALTER", alters)
	}
	checkRows(t, rows, 10)
	altered := false
	for _, x := range order {
		switch x := x.(type) {
		case *change.Event:
			altered = altered || strings.HasPrefix(x.DDL.SQL, "ALTER")
		case shardRow:
			if x.shard == "shop_0" && x.id >= 3 && (!altered || x.ncols != 3) {
				t.Fatalf("held row shop_0/%d (seq %d): %d columns, after the ALTER: %v; want 3, true", x.id, x.seq, x.ncols, altered)
			}
		}
	}
	checkSeqDense(t, c)
}
