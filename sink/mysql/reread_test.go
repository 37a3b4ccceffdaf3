package mysql_test

import (
	"database/sql"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	mysqlsink "github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
)

// TestChunkReadAgainToCheckpoint: a snapshot chunk read again (a new
// owner emitting it once more: MayExist) is applied whole again on a
// worker that had applied its part of it to the last row, so the claim
// moves the worker's checkpoint to where it is already. MariaDB counts
// that UPDATE as changing no row; taken for another runner's claim, it
// failed the sink with sink.ErrBehind at every retry, for good.
func TestChunkReadAgainToCheckpoint(t *testing.T) {
	db, name := targetDB(t)
	ctx := t.Context()
	target, tbl := oneWorkerOrders(t, db, name)
	if _, err := target.Checkpoints(ctx, 1); err != nil {
		t.Fatal(err)
	}
	chunk := func(again bool, rows ...[]change.Value) []sink.Change {
		rcs := change.NewValueRows(tbl, 0, rows)
		var cs []sink.Change
		for i := range rcs {
			cs = append(cs, sink.Change{Seq: 7, Source: "a", Origin: "shop_0.orders", Logical: "shop.orders", Row: &rcs[i], After: rcs[i].After(), MayExist: again})
		}
		return cs
	}
	if err := target.Apply(ctx, 0, chunk(false, []change.Value{int64(1), "a"}, []change.Value{int64(2), "b"})); err != nil {
		t.Fatal(err)
	}
	// Read again: row 2 changed since, and the chunk ends at row index 1,
	// the worker's checkpoint.
	if err := target.Apply(ctx, 0, chunk(true, []change.Value{int64(1), "a"}, []change.Value{int64(2), "b2"})); err != nil {
		t.Fatalf("the chunk read again: %v", err)
	}
	if got := sinktest.Query(db, "SELECT id, v FROM "+name+".orders"); len(got) != 2 || got[1] != "2 b2" {
		t.Errorf("target rows %v, want [1 a] [2 b2]", got)
	}
	ps, err := target.Checkpoints(ctx, 1)
	if err != nil || ps[0] != (sink.Point{Seq: 7, Idx: 1}) {
		t.Errorf("checkpoint %v (%v), want seq 7, row 1", ps, err)
	}
}

// oneWorkerOrders makes database name with a table orders (id INT key, v
// VARCHAR) and opens a sink of one worker into it from shop.orders, whose
// source table it returns.
func oneWorkerOrders(t *testing.T, db *sql.DB, name string) (*mysqlsink.Target, *change.Table) {
	t.Helper()
	for _, q := range []string{"CREATE DATABASE " + name, "CREATE TABLE " + name + ".orders (id INT PRIMARY KEY, v VARCHAR(20))"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	target, err := mysqlsink.Open(t.Context(), spec.Sink{Name: "copy", Type: "mysql", Address: targetAddr, User: "root", Workers: 1, Batch: 10, MetaDatabase: name + "_meta",
		Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".orders"}}}, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	return target, &change.Table{Schema: "shop", Name: "orders", Columns: []change.Column{{Name: "id", Type: "int", Key: true}, {Name: "v", Type: "varchar"}}}
}
