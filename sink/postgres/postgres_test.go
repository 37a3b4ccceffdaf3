package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/sink/verify"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// targetAddr is the machine's PostgreSQL, the target of the tests; each
// test has a database of its own, dropped after.
const targetAddr = "127.0.0.1:5432"

// targetDB creates a database of its own for the test and returns a
// connection to it and its name.
func targetDB(t testing.TB) (*pgx.Conn, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses PostgreSQL on " + targetAddr)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@"+targetAddr+"/postgres")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL on %s to apply to: %v", targetAddr, err)
		}
		t.Skipf("no PostgreSQL on %s to apply to: %v", targetAddr, err)
	}
	name := fmt.Sprintf("braid_sink_%d_%d", os.Getpid(), rand.IntN(1e6))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, "postgres://postgres@"+targetAddr+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close(ctx)
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	return db, name
}

// query returns the rows of q, their columns joined by spaces, sorted
// (nil on an error: the table is not there yet).
func query(db *pgx.Conn, q string) []string {
	return sinktest.Values(db.Query(context.Background(), q))
}

// sourceRows returns the rows q(n) returns on shards[n], their columns
// joined by spaces, sorted.
func sourceRows(t *testing.T, shards []*mysqltest.Server, q func(n int) string) []string {
	t.Helper()
	return sinktest.SourceRows(t, shards, q)
}

// runner runs a sink over a pipeline until stopped.
type runner struct {
	r    *sink.Runner
	stop func()
}

// startRunner runs sink sk of ds, open as s (sinkrun.Open), over p's
// store as braid runs it.
func startRunner(ctx context.Context, p *stream.Pipeline, s sink.Sink, ds *spec.Spec, sk spec.Sink, cursors group.CursorStore, log *slog.Logger) *runner {
	r := sinkrun.NewRunner(ds, sk, s, p.Store, cursors, log)
	return &runner{r: r, stop: sinkrun.Go(ctx, r)}
}

// pgTarget is s's PostgreSQL target.
func pgTarget(s sink.Sink) *postgres.Target { return sinkrun.Client[*postgres.Target](s) }

// waitRows waits until got() equals want, failing after d.
func waitRows(t *testing.T, d time.Duration, r *sink.Runner, want []string, got func() []string) {
	t.Helper()
	sinktest.WaitFor(t, d, func() (bool, string) {
		g := got()
		applied, lastErr := r.Applied()
		return slices.Equal(g, want), fmt.Sprintf("target has %d rows, sources %d (applied seq %d, last error %q)\nfirst differences: %v",
			len(g), len(want), applied, lastErr, firstDiff(g, want))
	})
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("target %q, sources %q", g, w)
		}
	}
	return "none"
}

func testLogger(t *testing.T, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// TestVerifyAndBlindRunner: the shop workload applied to PostgreSQL
// (that it ends equal to the sources, restarted or replayed, is the
// conformance suite's). braid sink verify's comparison finds the target
// equal, and then names the one row changed by hand. A runner that does
// not know the checkpoints (a former owner, say) applies from the start:
// each worker's transaction finds its checkpoint past its batch and
// applies nothing (ErrBehind).
func TestVerifyAndBlindRunner(t *testing.T) {
	db, name := targetDB(t)
	shards := sinktest.StartShop(t)
	ds := conformance.ShopSpec(t, shards[:3], spec.Sink{Name: "copy", Type: "postgres", Address: targetAddr, Database: name, Workers: 4})
	sk := ds.Sinks[0]
	log := testLogger(t, slog.LevelWarn)
	ctx := t.Context()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{sink.ClientID("copy"): nil, sink.ClientID("fence"): nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	target, err := sinkrun.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	r := startRunner(ctx, p, target, ds, sk, nil, log)
	defer func() { r.stop() }()
	sinktest.WriteShop(t, shards, nil)
	want := sinktest.ShopRows(t, shards)
	got := func() []string {
		return query(db, "SELECT id, code, amount, coalesce(note, 'NULL'), coalesce(c::text, 'NULL') FROM shop.orders")
	}
	waitRows(t, 60*time.Second, r.r, want, got)

	// braid sink verify's comparison finds them equal, and then the one
	// row changed by hand (both samples hold every row).
	vcfg := verify.Config{Spec: ds, Sink: sk, Target: pgTarget(target), Sample: 1000, Settle: time.Second,
		Progress: func() (uint64, uint64) { a, _ := r.r.Applied(); return p.Dest.Stats().Seq, a }}
	res, err := verify.Run(ctx, vcfg)
	if err != nil || len(res.Differences) != 0 || res.Compared != len(want) {
		t.Fatalf("verify: %v, %d compared of %d, differences %+v", err, res.Compared, len(want), res.Differences)
	}
	if _, err := db.Exec(ctx, "UPDATE shop.orders SET amount = amount + 1000 WHERE id = 4000007"); err != nil {
		t.Fatal(err)
	}
	res, err = verify.Run(ctx, vcfg)
	if err != nil || len(res.Differences) != 1 || *res.Differences[0].Key[0].Value != "4000007" || res.Differences[0].Columns[0].Column != "amount" {
		t.Fatalf("verify after a change by hand: %v, differences %+v", err, res.Differences)
	}
	db.Exec(ctx, "UPDATE shop.orders SET amount = amount - 1000 WHERE id = 4000007")

	target3, err := sinkrun.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer target3.Close()
	// A second runner of the sink, on a store client of its own.
	r3 := sinkrun.NewRunner(ds, sk, sink.NewKeyed(sk, blind{pgTarget(target3)}), p.Store, nil, testLogger(t, slog.LevelError))
	r3.Client = sink.ClientID("fence")
	defer sinkrun.Go(ctx, r3)()
	waitErr(t, r3, sink.ErrBehind.Error())
	if st := target3.Stats(); st.Applied != 0 {
		t.Fatalf("a runner blind to the checkpoints applied %d row changes", st.Applied)
	}
	if g := got(); !slices.Equal(g, want) {
		t.Fatal("the target changed under a runner blind to the checkpoints")
	}
}

// blind is a target whose checkpoints read as none.
type blind struct{ *postgres.Target }

func (b blind) Checkpoints(ctx context.Context, n int) ([]sink.Point, error) {
	return make([]sink.Point, n), nil
}

// applyOnce runs ds's first sink over ds's stream until the test ends.
func applyOnce(t *testing.T, ds *spec.Spec, configure ...func(*postgres.Target)) (*sink.Runner, sink.Sink) {
	t.Helper()
	log := testLogger(t, slog.LevelError)
	sk := ds.Sinks[0]
	p, err := stream.StartPipeline(t.Context(), stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{sink.ClientID(sk.Name): nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	target, err := sinkrun.Open(t.Context(), sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range configure {
		f(pgTarget(target))
	}
	r := startRunner(t.Context(), p, target, ds, sk, nil, log)
	t.Cleanup(func() { r.stop(); target.Close() })
	return r.r, target
}

// waitErr waits until r's last error contains each of want.
func waitErr(t *testing.T, r *sink.Runner, want ...string) {
	t.Helper()
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		_, lastErr := r.Applied()
		ok := lastErr != ""
		for _, w := range want {
			ok = ok && strings.Contains(lastErr, w)
		}
		return ok, fmt.Sprintf("last error %q, want one saying %q", lastErr, want)
	})
}

// TestUniqueKeyCollision: two shard tables share unique codes. Without
// an origin column the sink stops on the first shared code with an error
// that names that key, code=c1 (it named the row's id, whose lookup at
// the sources finds only the writer); with one, the table the sink makes
// has the column in its unique key too, and keeps all five rows; so
// does one at least once, whose upserts first delete the rows holding
// their unique values under another key of their own shard table only.
func TestUniqueKeyCollision(t *testing.T) {
	db, name := targetDB(t)
	srv := sinktest.StartUniqueCollision(t)
	specOf := func(sinkName, origin string) *spec.Spec {
		return conformance.ShopSpec(t, []*mysqltest.Server{srv}, spec.Sink{Name: sinkName, Type: "postgres", Address: targetAddr, Database: name, Workers: 4, Batch: 10,
			OriginColumn: origin, Tables: []spec.SinkTable{{From: "shop.orders", To: sinkName + ".orders"}}})
	}
	plain, _ := applyOnce(t, specOf("plain", ""))
	waitErr(t, plain, "s0/shop_1.orders writes key code=c1", "origin_column")

	kept, _ := applyOnce(t, specOf("kept", "_shard"))
	want := sinktest.UniqueCollisionRows("s0")
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		got := query(db, "SELECT _shard, id, code, note FROM kept.orders")
		_, lastErr := kept.Applied()
		return slices.Equal(got, want), fmt.Sprintf("kept.orders holds %q, want %q (last error %q)", got, want, lastErr)
	})

	ds := specOf("keptalo", "_shard")
	ds.Sinks[0].Mode = spec.SinkAtLeastOnce
	alo, _ := applyOnce(t, ds)
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		got := query(db, "SELECT _shard, id, code, note FROM keptalo.orders")
		_, lastErr := alo.Applied()
		return slices.Equal(got, want), fmt.Sprintf("at least once, keptalo.orders holds %q, want %q (last error %q)", got, want, lastErr)
	})
}

// TestAtLeastOnce: mode at-least-once writes no checkpoint table; the
// stream (with an ADD COLUMN and a MODIFY that widens a column) read
// twice from the start ends in the same target (the second reading finds
// every row it inserts: upserts, not collisions). A shard
// table's TRUNCATE, with no origin column to delete its rows by, stops
// the sink.
func TestAtLeastOnce(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, amount INT NOT NULL, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, 'c'), (4, 4, 'd')",
		"UPDATE shop_0.orders SET amount = amount + 10",
		"UPDATE shop_0.orders SET id = 5 WHERE id = 1",
		"DELETE FROM shop_0.orders WHERE id = 2",
		"ALTER TABLE shop_0.orders ADD COLUMN c INT NULL DEFAULT 7",
		"UPDATE shop_0.orders SET c = 8 WHERE id = 3",
		// A column's type changes: the statement prepared for the old
		// type (the same text) must not be used with the new one's values.
		"UPDATE shop_0.orders SET amount = amount + 1 WHERE id = 4",
		"ALTER TABLE shop_0.orders MODIFY amount BIGINT NOT NULL",
		"UPDATE shop_0.orders SET amount = 5000000000 WHERE id = 4")
	sk := spec.Sink{Name: "alo", Type: "postgres", Address: targetAddr, Database: name, Workers: 2, Batch: 10, Mode: spec.SinkAtLeastOnce, MetaDatabase: "alo_meta"}
	ds := conformance.ShopSpec(t, []*mysqltest.Server{srv}, sk)
	want := sourceRows(t, []*mysqltest.Server{srv}, func(int) string {
		return "SELECT id, amount, note, IFNULL(c, 'NULL') FROM shop_0.orders"
	})
	got := func() []string {
		return query(db, "SELECT id, amount, note, coalesce(c::text, 'NULL') FROM shop.orders")
	}
	r, first := applyOnce(t, ds)
	waitRows(t, 20*time.Second, r, want, got)
	// The stream again from the start: every change applied again.
	r, second := applyOnce(t, ds)
	for deadline := time.Now().Add(20 * time.Second); second.Stats().Applied < first.Stats().Applied; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			_, lastErr := r.Applied()
			t.Fatalf("the second reading applied %d changes of %d (last error %q)", second.Stats().Applied, first.Stats().Applied, lastErr)
		}
	}
	waitRows(t, 20*time.Second, r, want, got)
	if _, lastErr := r.Applied(); lastErr != "" {
		t.Fatalf("last error %q", lastErr)
	}
	if st := second.Stats(); st.Upserts == 0 {
		t.Fatalf("the second reading found none of its INSERTs' rows: %+v", st)
	}
	t.Logf("first reading %+v, second %+v", first.Stats(), second.Stats())
	if n := query(db, "SELECT count(*) FROM pg_namespace WHERE nspname = 'alo_meta'"); !slices.Equal(n, []string{"0"}) {
		t.Fatalf("at-least-once made its meta schema: %v", n)
	}
	srv.Exec(t, "TRUNCATE TABLE shop_0.orders")
	waitErr(t, r, "TRUNCATE of shard table s0/shop_0.orders", "set origin_column")
}
