package mysql_test

import (
	"context"
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
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink"
	mysqlsink "github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// targetAddr is the machine's MariaDB, the target of the tests; each test
// has a database of its own, dropped after.
const targetAddr = "127.0.0.1:3306"

func targetDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
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
	srvs := mysqltest.StartN(t, 3)
	for i, s := range srvs {
		for _, n := range []int{i, i + 3} {
			s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", n),
				fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, amount INT NOT NULL, note VARCHAR(40))", n))
		}
	}
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sinks: []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, Workers: 4, Batch: 50, MetaDatabase: name + "_meta",
			Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".orders"}}}}}
	for i, s := range srvs {
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
	target, err := mysqlsink.Open(ctx, ds.Sinks[0])
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	start := func() (stop func(), r *sink.Runner) {
		r = &sink.Runner{Name: "copy", Dest: "shop", Client: client, Store: p.Store, Target: target, Workers: 4, Batch: 50, Cursors: cursors, Logger: log}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); r.Run(rctx) }()
		return func() { cancel(); <-done }, r
	}
	stop, r := start()

	// The workload: per shard, inserts, then updates, key changes and
	// deletes of what it inserted; the ALTER in the middle.
	conns := make([]*mysqltest.Server, 6)
	for n := range conns {
		conns[n] = srvs[n%3]
	}
	for round := range 6 {
		for n := range 6 {
			base := int64(n)*1_000_000 + int64(round)*100
			var vals []string
			for k := range 20 {
				vals = append(vals, fmt.Sprintf("(%d, 'c%d', %d, 'r%d')", base+int64(k), base+int64(k), k, round))
			}
			stmts := []string{"INSERT INTO shop_%[1]d.orders (id, code, amount, note) VALUES " + strings.Join(vals, ", "),
				// A unique value moves from one row to another: the two
				// changes keep their order whatever workers their rows are on.
				fmt.Sprintf("UPDATE shop_%%[1]d.orders SET code = 'moved%d' WHERE id = %d", base+5, base+5),
				fmt.Sprintf("UPDATE shop_%%[1]d.orders SET code = 'c%d' WHERE id = %d", base+5, base+6),
				"UPDATE shop_%[1]d.orders SET amount = amount + 1 WHERE id %% 3 = 0",
				fmt.Sprintf("UPDATE shop_%%[1]d.orders SET id = id + 50 WHERE id = %d", base+1),
				fmt.Sprintf("DELETE FROM shop_%%[1]d.orders WHERE id IN (%d, %d)", base+2, base+3)}
			if round == 3 {
				stmts = append(stmts, "ALTER TABLE shop_%[1]d.orders ADD COLUMN c INT NULL")
			}
			if round >= 3 {
				stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET c = amount * 2 WHERE id = %d", base+4))
			}
			for _, q := range stmts {
				conns[n].Exec(t, fmt.Sprintf(q, n))
			}
		}
		if round == 1 || round == 4 {
			stop() // stopped in the middle of applying; a new one goes on
			stop, r = start()
		}
	}
	defer func() { stop() }()

	want := func() []string {
		var all [][]string
		for n := range 6 {
			all = append(all, conns[n].Query(t, fmt.Sprintf("SELECT id, CONCAT(code, ' ', amount), IFNULL(note, 'NULL'), IFNULL(c, 'NULL') FROM shop_%d.orders", n))...)
		}
		return rows(t, all)
	}()
	query := func() [][]string {
		q, err := db.Query(fmt.Sprintf("SELECT id, CONCAT(code, ' ', amount), IFNULL(note, 'NULL'), IFNULL(c, 'NULL') FROM %s.orders", name))
		if err != nil {
			return nil
		}
		defer q.Close()
		var out [][]string
		for q.Next() {
			r := make([]string, 4)
			q.Scan(&r[0], &r[1], &r[2], &r[3])
			out = append(out, r)
		}
		return out
	}
	var got []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if got = rows(t, query()); slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			applied, lastErr := r.Applied()
			t.Fatalf("target has %d rows, sources %d (applied seq %d of %d, last error %q)", len(got), len(want), applied, p.Dest.Stats().Seq, lastErr)
		}
	}
	if st := target.Stats(); st.Upserts != 0 || st.Missing != 0 {
		t.Fatalf("stats %+v: something was applied twice or missed", st)
	}
	t.Logf("%d rows equal; %+v", len(got), target.Stats())

	// The whole stream again, from the start, to a target opened anew:
	// the checkpoints say it is all applied, and nothing is.
	stop()
	again, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	target2, err := mysqlsink.Open(ctx, ds.Sinks[0])
	if err != nil {
		t.Fatal(err)
	}
	defer target2.Close()
	r2 := &sink.Runner{Name: "copy", Dest: "shop", Client: client, Store: again.Store, Target: target2, Workers: 4, Batch: 50, Logger: log}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r2.Run(rctx) }()
	defer func() { cancel(); <-done }()
	last := p.Dest.Stats().Seq
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if applied, _ := r2.Applied(); applied >= last {
			break
		}
		if time.Now().After(deadline) {
			applied, lastErr := r2.Applied()
			t.Fatalf("the replay reached seq %d of %d (last error %q)", applied, last, lastErr)
		}
	}
	if st := target2.Stats(); st.Applied != 0 {
		t.Fatalf("the stream read again applied %d row changes, want 0", st.Applied)
	}
	if got := rows(t, query()); !slices.Equal(got, want) {
		t.Fatal("the target changed when the stream was read again")
	}
	stop = func() {}
}

// applyOnce runs ds's first sink over ds's stream until the test ends.
func applyOnce(t *testing.T, ds *spec.Spec) *sink.Runner {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	client := sink.ClientID(ds.Sinks[0].Name)
	p, err := stream.StartPipeline(t.Context(), stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	target, err := mysqlsink.Open(t.Context(), ds.Sinks[0])
	if err != nil {
		t.Fatal(err)
	}
	r := &sink.Runner{Name: ds.Sinks[0].Name, Dest: ds.Name, Client: client, Store: p.Store, Target: target, Workers: 4, Batch: 10,
		ByOrigin: ds.Sinks[0].OriginColumn != "", Logger: log}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; target.Close() })
	return r
}

// TestCollision: two shard tables write key 1. Without an origin column
// the sink stops at the second with an error naming the shard table and
// the key; with one, both rows are kept, and a shard table's TRUNCATE
// deletes its rows only.
func TestCollision(t *testing.T) {
	_, name := targetDB(t)
	db, _ := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	defer db.Close()
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))", "CREATE TABLE shop_1.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES (1, 'zero')", "INSERT INTO shop_1.orders VALUES (1, 'one'), (2, 'two')")
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
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, lastErr := plain.Applied(); strings.Contains(lastErr, "a/shop_1.orders writes key id=1") && strings.Contains(lastErr, "origin_column") {
			break
		}
		if time.Now().After(deadline) {
			_, lastErr := plain.Applied()
			t.Fatalf("no collision error; last error %q", lastErr)
		}
	}
	// shop_1's row of key 1 is not there (shop_0's, and shop_1's of key
	// 2, are unless they were in the transaction the collision rolled
	// back).
	var other int
	db.QueryRow("SELECT COUNT(*) FROM " + name + ".plain WHERE note = 'one'").Scan(&other)
	if n := count("plain"); n > 2 || other != 0 {
		t.Fatalf("after the collision the target has %d rows, %d of them shop_1's of key 1; want none of those, and at most 2 rows", n, other)
	}

	kept := applyOnce(t, specOf("kept", "kept", "_shard"))
	wait := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); count("kept") != want; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				_, lastErr := kept.Applied()
				t.Fatalf("target has %d rows, want %d (last error %q)", count("kept"), want, lastErr)
			}
		}
	}
	wait(3)
	srv.Exec(t, "TRUNCATE TABLE shop_1.orders")
	wait(1)
	var shard, note string
	db.QueryRow("SELECT _shard, note FROM "+name+".kept").Scan(&shard, &note)
	if shard != "a/shop_0.orders" || note != "zero" {
		t.Fatalf("after shop_1's TRUNCATE the row left is %s %s, want shop_0's", shard, note)
	}
}
