package mysql_test

import (
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	mysqlsink "github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// targetAddr is the machine's MariaDB, the target of the tests; each test
// has a database of its own, dropped after.
const targetAddr = "127.0.0.1:3306"

func targetDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses MariaDB on " + targetAddr)
	}
	db, err := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err != nil {
		t.Skipf("no MariaDB on %s to apply to: %v", targetAddr, err)
	}
	name := fmt.Sprintf("braid_sink_%d_%d", os.Getpid(), rand.IntN(1e6))
	t.Cleanup(func() {
		db.Exec("DROP DATABASE IF EXISTS " + name)
		db.Exec("DROP DATABASE IF EXISTS " + name + "_meta")
		db.Close()
	})
	return db, name
}

// rows reads "id amount note c" of every row of query's result, sorted.
func rows(t *testing.T, got [][]string) []string {
	var out []string
	for _, r := range got {
		out = append(out, strings.Join(r, " "))
	}
	slices.Sort(out)
	return out
}

// TestApplyEqualsSources: six shard tables on three servers, merged to
// shop.orders and applied to one table of the machine's MariaDB, under
// inserts, updates (amounts incremented, keys changed), deletes and an
// ALTER every shard runs (merged into one). The sink is stopped twice
// in the middle and restarted from its checkpoints. Once it has caught up
// the target equals the union of the shards row for row, and nothing was
// applied twice: no INSERT found its key (an upsert) and no UPDATE or
// DELETE missed its row.
func TestApplyEqualsSources(t *testing.T) {
	db, name := targetDB(t)
	shards := sinktest.StartShop(t)
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sinks: []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, Workers: 4, Batch: 50, MetaDatabase: name + "_meta",
			Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".orders"}}}}}
	for i, s := range shards[:3] {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	client := sink.ClientID("copy")
	cursors := &group.FileStore{Dir: t.TempDir()}
	ctx := t.Context()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	target, err := sinkrun.Open(ctx, ds.Sinks[0], "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	start := func() (stop func(), r *sink.Runner) {
		r = sinkrun.NewRunner(&ds, ds.Sinks[0], target, p.Store, cursors, log)
		return sinkrun.Go(ctx, r), r
	}
	stop, r := start()
	sinktest.WriteShop(t, shards, func(round int) {
		if round == 1 || round == 4 {
			stop() // stopped in the middle of applying; a new one goes on
			stop, r = start()
		}
	})
	defer func() { stop() }()

	want := sinktest.ShopRows(t, shards)
	got := func() []string {
		return sinktest.Query(db, fmt.Sprintf("SELECT id, code, amount, IFNULL(note, 'NULL'), IFNULL(c, 'NULL') FROM %s.orders", name))
	}
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		g := got()
		applied, lastErr := r.Applied()
		var diff []string
		for _, r := range want {
			if !slices.Contains(g, r) && len(diff) < 8 {
				diff = append(diff, "missing "+r)
			}
		}
		for _, r := range g {
			if !slices.Contains(want, r) && len(diff) < 16 {
				diff = append(diff, "extra "+r)
			}
		}
		return slices.Equal(g, want), fmt.Sprintf("target has %d rows, sources %d (applied seq %d of %d, last error %q) %q", len(g), len(want), applied, p.Dest.Stats().Seq, lastErr, diff)
	})
	if st := target.Stats(); st.Upserts != 0 || st.Missing != 0 {
		t.Fatalf("stats %+v: something was applied twice or missed", st)
	}
	if st := target.Stats(); st.Replayed == 0 {
		t.Fatalf("stats %+v: no change was replayed as binlog row events", st)
	}
	t.Logf("%d rows equal; %+v", len(want), target.Stats())

	// The whole stream again, from the start, to a target opened anew:
	// the checkpoints say it is all applied, and nothing is.
	stop()
	again, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	target2, err := sinkrun.Open(ctx, ds.Sinks[0], "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer target2.Close()
	r2 := sinkrun.NewRunner(&ds, ds.Sinks[0], target2, again.Store, nil, log)
	defer sinkrun.Go(ctx, r2)()
	last := p.Dest.Stats().Seq
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		applied, lastErr := r2.Applied()
		return applied >= last, fmt.Sprintf("the replay reached seq %d of %d (last error %q)", applied, last, lastErr)
	})
	if st := target2.Stats(); st.Applied != 0 {
		t.Fatalf("the stream read again applied %d row changes, want 0", st.Applied)
	}
	if g := got(); !slices.Equal(g, want) {
		t.Fatal("the target changed when the stream was read again")
	}
	stop = func() {}
}

// applyOnce runs ds's first sink over ds's stream until the test ends.
func applyOnce(t *testing.T, ds *spec.Spec) *sink.Runner {
	t.Helper()
	r, _ := applyWith(t, ds, false)
	return r
}

// applyWith is applyOnce, returning the target too; sqlOnly keeps the
// target from replaying binlog events.
func applyWith(t *testing.T, ds *spec.Spec, sqlOnly bool) (*sink.Runner, *mysqlsink.Target) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	client := sink.ClientID(ds.Sinks[0].Name)
	p, err := stream.StartPipeline(t.Context(), stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s, err := sinkrun.Open(t.Context(), ds.Sinks[0], "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	target := sinkrun.Client[*mysqlsink.Target](s)
	if sqlOnly {
		mysqlsink.NoReplay(target)
	}
	r := sinkrun.NewRunner(ds, ds.Sinks[0], s, p.Store, nil, log)
	stop := sinkrun.Go(t.Context(), r)
	t.Cleanup(func() { stop(); s.Close() })
	return r, target
}

// TestCollision: two shard tables write key 1. Without an origin column
// the sink stops at the second with an error naming the shard table and
// the key; with one, both rows are kept, and a shard table's TRUNCATE
// deletes its rows only.
func TestCollision(t *testing.T) {
	_, name := targetDB(t)
	db, _ := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	defer db.Close()
	srv := sinktest.StartCollision(t)
	specOf := func(sinkName, to, origin string) *spec.Spec {
		ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
			Heartbeat: spec.Duration(100 * time.Millisecond),
			Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
			Sinks: []spec.Sink{{Name: sinkName, Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", OriginColumn: origin,
				Tables: []spec.SinkTable{{From: "shop.orders", To: name + "." + to}}}}}
		ds = ds.WithDefaults()
		return &ds
	}
	count := func(table string) int {
		var n int
		db.QueryRow("SELECT COUNT(*) FROM " + name + "." + table).Scan(&n)
		return n
	}

	plain := applyOnce(t, specOf("plain", "plain", ""))
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		_, lastErr := plain.Applied()
		return strings.Contains(lastErr, "a/shop_1.orders writes key id=1") && strings.Contains(lastErr, "origin_column"), fmt.Sprintf("no collision error; last error %q", lastErr)
	})
	// shop_1's row of key 1 is not there.
	var other int
	db.QueryRow("SELECT COUNT(*) FROM " + name + ".plain WHERE note = 'one'").Scan(&other)
	sinktest.CheckCollided(t, count("plain"), other)

	kept, keptTarget := applyWith(t, specOf("kept", "kept", "_shard"), false)
	sinktest.WaitTruncated(t, srv, func() int { return count("kept") }, func() string { _, e := kept.Applied(); return e })
	if st := keptTarget.Stats(); st.Replayed == 0 {
		t.Fatalf("kept: %+v: no row replayed with its origin column", st)
	}
	var shard, note string
	db.QueryRow("SELECT _shard, note FROM "+name+".kept").Scan(&shard, &note)
	if shard != "a/shop_0.orders" || note != "zero" {
		t.Fatalf("after shop_1's TRUNCATE the row left is %s %s, want shop_0's", shard, note)
	}
}
