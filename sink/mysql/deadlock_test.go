package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// TestDeadlockRetried: when InnoDB picks a worker's transaction as the
// victim of a deadlock, the worker applies it again once the other
// transaction has gone, instead of failing the sink (which rolled back
// every worker, and their retries could deadlock the same way again and
// again). Here another session holds the row the worker inserts and then
// asks for the worker's checkpoint row; heavier, it wins the deadlock.
func TestDeadlockRetried(t *testing.T) {
	db, name := targetDB(t)
	ctx := context.Background()
	target, tbl := oneWorkerOrders(t, db, name)
	if _, err := db.Exec("CREATE TABLE " + name + ".weight (n INT)"); err != nil {
		t.Fatal(err)
	}
	insert := func(seq uint64, id int64, v string) sink.Change {
		rc := change.NewValueRows(tbl, 0, [][]change.Value{{id, v}})[0]
		return sink.Change{Seq: seq, Source: "a", Origin: "shop_0.orders", Logical: "shop.orders", Row: &rc, After: rc.After(), PK: v}
	}
	// The worker's checkpoint row exists from its first transaction.
	if err := target.Apply(ctx, 0, []sink.Change{insert(1, 100, "first")}); err != nil {
		t.Fatal(err)
	}

	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, q := range []string{"BEGIN", "INSERT INTO " + name + ".weight SELECT seq FROM " + name + ".seq_1_to_500", "INSERT INTO " + name + ".orders VALUES (1, 'other')"} {
		if _, err := other.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	applied := make(chan error, 1)
	go func() { applied <- target.Apply(ctx, 0, []sink.Change{insert(2, 1, "braid")}) }()
	// Once the worker waits for row 1, take its checkpoint row: a deadlock.
	waitLocked(t, db, name, applied)
	if _, err := other.ExecContext(ctx, "UPDATE "+name+"_meta.sink_checkpoint SET seq = seq WHERE dest = 'shop' AND sink = 'copy' AND worker = 0"); err != nil {
		t.Fatalf("the other session lost the deadlock (%v): the test needs the worker to", err)
	}
	if _, err := other.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-applied:
		if err != nil {
			t.Fatalf("the worker's transaction failed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker's transaction did not end")
	}
	var v string
	if err := db.QueryRow("SELECT v FROM " + name + ".orders WHERE id = 1").Scan(&v); err != nil || v != "braid" {
		t.Errorf("row 1 holds %q (%v), want the worker's", v, err)
	}
	var seq uint64
	if err := db.QueryRow("SELECT seq FROM " + name + "_meta.sink_checkpoint WHERE dest = 'shop' AND sink = 'copy' AND worker = 0").Scan(&seq); err != nil || seq != 2 {
		t.Errorf("checkpoint at seq %d (%v), want 2", seq, err)
	}
}

// waitLocked waits until the worker's INSERT waits for the other
// session's row, failing if the worker's transaction ends first.
func waitLocked(t *testing.T, db *sql.DB, name string, applied chan error) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE state = 'Update' AND info LIKE ?", "INSERT INTO `"+name+"`.`orders`%").Scan(&n); err == nil && n > 0 {
			return
		}
		select {
		case err := <-applied:
			t.Fatalf("the worker's transaction ended before it waited for the other session's row: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			r, _ := db.Query("SELECT CONCAT_WS(' | ', id, command, state, info) FROM information_schema.PROCESSLIST")
			for r != nil && r.Next() {
				var s string
				r.Scan(&s)
				t.Log(s)
			}
			t.Fatal("the worker never waited for the other session's row")
		}
	}
}
