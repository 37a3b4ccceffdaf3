package mysql_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	mysqlsink "github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
)

// TestDDLFenced: a runner that has not learnt another took over (its
// workers' checkpoints went past a DDL while it was away) reaches that
// DDL: a shard table's TRUNCATE, then an ALTER. Neither runs: the
// TRUNCATE's DELETE would remove the rows the other runner wrote since,
// and either would set the checkpoints back to the DDL, so that a restart
// applied the other's changes again. Both return sink.ErrBehind and leave
// the rows, the table and the checkpoints as they were; a TRUNCATE after
// the checkpoints still runs, and moves them on. A sink that ignores DDL
// leaves its checkpoints where they are.
func TestDDLFenced(t *testing.T) {
	db, name := targetDB(t)
	ctx := t.Context()
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE " + name + ".orders (id INT NOT NULL, note VARCHAR(20), _shard VARCHAR(255) NOT NULL, PRIMARY KEY (_shard, id))"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO " + name + ".orders VALUES (1, 'x', 'a/shop_1.orders'), (2, 'y', 'a/shop_1.orders')"); err != nil {
		t.Fatal(err)
	}
	const workers = 4
	open := func(ddl string) *mysqlsink.Target {
		s := (&spec.Spec{Name: "shop", Sinks: []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta",
			OriginColumn: "_shard", DDL: ddl, Workers: workers, Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".orders"}}}}}).WithDefaults().Sinks[0]
		tg, err := mysqlsink.Open(ctx, s, "shop", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tg.Close() })
		return tg
	}
	ddl := func(seq uint64, schema, sql string) *change.Event {
		return &change.Event{Type: change.EventDDL, Seq: seq, Source: "a",
			DDL: &change.DDL{Schema: schema, SQL: sql, Tables: []string{schema + ".orders"}, LogicalSchema: "shop", LogicalTable: "orders"}}
	}
	checkpoints := func(tg *mysqlsink.Target) []uint64 {
		ps, err := tg.Checkpoints(ctx, workers)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, p := range ps {
			seqs = append(seqs, p.Seq)
		}
		return seqs
	}
	rows := func() []string { return sinktest.Query(db, "SELECT id, note FROM "+name+".orders") }

	// A sink that ignores DDL runs none, and its checkpoints stay: only
	// what it applies moves them.
	ignoring := open("ignore")
	before := checkpoints(ignoring)
	if err := ignoring.ApplyDDL(ctx, ddl(20, "shop_0", "ALTER TABLE orders ADD COLUMN z INT"), workers); err != nil {
		t.Fatal(err)
	}
	if got := checkpoints(ignoring); !slices.Equal(got, before) {
		t.Fatalf("checkpoints %v after an ignored DDL, want them as they were, %v", got, before)
	}

	// The runner that took over applied a DDL at seq 20 (a TRUNCATE of a
	// shard table without rows here: only its checkpoints matter).
	taker, former := open(""), open("")
	if err := taker.ApplyDDL(ctx, ddl(20, "shop_9", "TRUNCATE TABLE orders"), workers); err != nil {
		t.Fatal(err)
	}
	at20 := []uint64{20, 20, 20, 20}
	if got := checkpoints(taker); !slices.Equal(got, at20) {
		t.Fatalf("checkpoints %v after the DDL at 20, want %v", got, at20)
	}

	for _, ev := range []*change.Event{ddl(10, "shop_1", "TRUNCATE TABLE orders"), ddl(12, "shop_0", "ALTER TABLE orders ADD COLUMN w INT")} {
		if err := former.ApplyDDL(ctx, ev, workers); !errors.Is(err, sink.ErrBehind) {
			t.Fatalf("the former runner's %q at seq %d: %v, want sink.ErrBehind", ev.DDL.SQL, ev.Seq, err)
		}
	}
	if got := rows(); !slices.Equal(got, []string{"1 x", "2 y"}) {
		t.Fatalf("after the former runner's TRUNCATE the target holds %q, want both rows", got)
	}
	var w int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'orders' AND COLUMN_NAME = 'w'", name).Scan(&w)
	if w != 0 {
		t.Fatal("the former runner's ALTER ran")
	}
	if got := checkpoints(former); !slices.Equal(got, at20) {
		t.Fatalf("checkpoints %v after the former runner's DDL, want %v", got, at20)
	}

	if err := former.ApplyDDL(ctx, ddl(30, "shop_1", "TRUNCATE TABLE orders"), workers); err != nil {
		t.Fatal(err)
	}
	if got := rows(); len(got) != 0 {
		t.Fatalf("after the TRUNCATE at seq 30 the target holds %q", got)
	}
	if got, want := checkpoints(former), []uint64{30, 30, 30, 30}; !slices.Equal(got, want) {
		t.Fatalf("checkpoints %v after the TRUNCATE at 30, want %v", got, want)
	}
}
