package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestCaptureSameFromReplicas reads three shards' history once from their
// primaries and once from their replicas (GTID replication with
// log_slave_updates, each shard a topology of its own) and compares the
// two merged streams message by message: seq, transaction, rows, the
// shard-DDL merge's logical DDL and the held rows after it must be the
// same. Only the fields that name a server's own coordinates may differ:
// "position" (file:pos, which is the server's) and "ts" (when braid
// printed the message).
//
// The history has what makes a merge order hard: transactions of
// different shards committed in the same second (ties, broken by the
// source's index), several in one second within a shard, a clock that
// steps back (keys made monotone), UPDATEs with before images, DELETEs,
// statements on a table not selected, an ALTER on every shard at a
// different time (held rows under the pessimistic shard-DDL lock), and a
// second phase written while the primaries' capture runs, so that run
// merges live transactions between heartbeats while the replicas' run
// reads them all as history.
func TestCaptureSameFromReplicas(t *testing.T) {
	const shards = 3
	tps := make([]*mysqltest.Topology, shards)
	for i := range tps {
		tps[i] = mysqltest.StartTopology(t, 1)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second).Unix()
	at := func(sec int64) string { return fmt.Sprintf("SET timestamp = %d", base+sec) }
	for i, tp := range tps {
		db := fmt.Sprintf("shop_%d", i)
		p := tp.Primary()
		p.Exec(t, at(0),
			"CREATE DATABASE "+db,
			"CREATE TABLE "+db+".orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(32))",
			"CREATE TABLE "+db+".items (id INT PRIMARY KEY, order_id INT, sku VARCHAR(16))",
			"CREATE TABLE "+db+".audit (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(32))",
			"CREATE TABLE "+db+".done (id INT PRIMARY KEY)")
		for k := range 12 {
			id := i*100 + k
			// Transactions k and k+1 share a second on every shard: ties
			// within a shard and, at the same second, across shards.
			commit := []string{"COMMIT"}
			if i == 0 && k == 7 {
				// Its statements in one second, its commit in the next:
				// the primary stamps its GTID event with the commit's
				// second, a replica with its last statement's. The other
				// shards' transactions of the first second go before it
				// read from either.
				commit = []string{at(10 + int64(k/2) + 1), "COMMIT"}
			}
			p.Exec(t, append([]string{at(10 + int64(k/2)), "BEGIN",
				fmt.Sprintf("INSERT INTO %s.orders VALUES (%d, %d.50, 'new')", db, id, k),
				fmt.Sprintf("INSERT INTO %s.items VALUES (%d, %d, 'sku-%d'), (%d, %d, 'sku-%d')", db, 2*id, id, k, 2*id+1, id, k),
				fmt.Sprintf("UPDATE %s.orders SET note = 'seen' WHERE id = %d", db, id)},
				commit...)...)
			if k%4 == i%4 {
				p.Exec(t, at(10+int64(k/2)), fmt.Sprintf("INSERT INTO %s.audit (what) VALUES ('k=%d')", db, k))
			}
			if k%3 == 1 {
				// The replica writes a transaction of its own (its own
				// domain, a table not selected) between two of the
				// primary's, stamped by its own clock a second past the
				// next of them: a replica behind by less than a second
				// across a second's boundary. It is in the replica's
				// binlog only, and moves its positions.
				tp.WaitCaughtUp(t)
				r := tp.Replicas()[0]
				r.Exec(t, at(10+int64(k/2)+1), "CREATE DATABASE IF NOT EXISTS local_"+db,
					"CREATE TABLE IF NOT EXISTS local_"+db+".t (id INT AUTO_INCREMENT PRIMARY KEY, k INT)",
					fmt.Sprintf("INSERT INTO local_%s.t (k) VALUES (%d)", db, k))
				if k == 4 {
					r.FlushLogs(t) // the replica's files no longer line up with the primary's
				}
				if k == 4 && i == 0 {
					// A large transaction of a table not selected: the
					// first shard's reader is busy with it while the
					// others' transactions of the same second are ready.
					p.Exec(t, at(10+int64(k/2)), fmt.Sprintf("INSERT INTO %s.audit (what) SELECT CONCAT('bulk-', seq) FROM %s.seq_1_to_50000", db, db))
				}
			}
		}
		// The clock steps back: these keys are raised to the shard's last.
		p.Exec(t, at(5), fmt.Sprintf("UPDATE %s.orders SET amount = amount + 1 WHERE id %% 3 = 0", db))
		// Each shard alters at its own time; rows after it wait for the
		// others (pessimistic shard DDL), then go out after the one
		// logical ALTER.
		p.Exec(t, at(20+int64(i)), "ALTER TABLE "+db+".orders ADD COLUMN region VARCHAR(8) DEFAULT 'eu'")
		p.Exec(t, at(20+int64(i)), "BEGIN",
			fmt.Sprintf("INSERT INTO %s.orders VALUES (%d, 1.00, 'after', 'us')", db, i*100+50),
			fmt.Sprintf("DELETE FROM %s.items WHERE id = %d", db, 2*(i*100)),
			"COMMIT")
		p.Exec(t, at(22), fmt.Sprintf("UPDATE %s.orders SET region = 'ap', amount = amount * 2 WHERE id < %d", db, i*100+4))
		p.Exec(t, at(22), "ALTER TABLE "+db+".audit ADD COLUMN note VARCHAR(8)") // a table not selected
	}

	specFor := func(servers func(*mysqltest.Topology) *mysqltest.Server) *spec.Spec {
		t.Helper()
		var b strings.Builder
		b.WriteString(`
name: shop
heartbeat: 100ms
# The first run merges live writes: a skew allowance far above a slow
# commit on a loaded machine, so none goes out late there.
max_clock_skew: 5s
tables: ['shop_\d+\.(orders|items|done)']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
sources:
`)
		for i, tp := range tps {
			fmt.Fprintf(&b, "  - {name: shard%d, address: '%s', start: earliest}\n", i, servers(tp).Addr())
		}
		ds, err := spec.Parse([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}

	// The primaries' run: the history, then a second phase written live.
	primaries := newMarkerWriter(shards)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	runDone := make(chan error, 1)
	go func() {
		runDone <- capture(primaries.watch(ctx), specFor((*mysqltest.Topology).Primary), primaries, captureOptions{}, testLogger(t))
	}()
	for round := range 3 {
		for i, tp := range tps {
			db := fmt.Sprintf("shop_%d", i)
			id := i*100 + 60 + round
			tp.Primary().Exec(t, "BEGIN",
				fmt.Sprintf("INSERT INTO %s.orders VALUES (%d, 3.00, 'live', 'eu')", db, id),
				fmt.Sprintf("UPDATE %s.orders SET note = 'live-seen' WHERE id = %d", db, i*100+round),
				"COMMIT")
		}
		time.Sleep(300 * time.Millisecond) // heartbeats in between
	}
	for i, tp := range tps {
		tp.Primary().Exec(t, fmt.Sprintf("INSERT INTO shop_%d.done VALUES (%d)", i, i))
	}
	if err := <-runDone; err != nil {
		t.Fatalf("capture from the primaries: %v", err)
	}
	if !primaries.complete() {
		t.Fatalf("capture from the primaries ended before every shard's last transaction:\n%s", primaries.text())
	}

	for _, tp := range tps {
		tp.WaitCaughtUp(t)
	}
	replicas := newMarkerWriter(shards)
	err := capture(replicas.watch(ctx), specFor(func(tp *mysqltest.Topology) *mysqltest.Server { return tp.Replicas()[0] }),
		replicas, captureOptions{}, testLogger(t))
	if err != nil {
		t.Fatalf("capture from the replicas: %v", err)
	}
	if !replicas.complete() {
		t.Fatalf("capture from the replicas ended before every shard's last transaction:\n%s", replicas.text())
	}

	a, b := primaries.messages(t), replicas.messages(t)
	checkRichStream(t, a)
	samePositions := 0
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) {
			t.Fatalf("the primaries gave %d messages, the replicas %d; first extra:\n%s", len(a), len(b), extra(a, b, i))
		}
		if a[i]["position"] == b[i]["position"] {
			samePositions++
		}
		x, y := withoutServerFields(a[i]), withoutServerFields(b[i])
		if x != y {
			t.Fatalf("message %d differs:\nprimaries: %s\nreplicas:  %s", i, x, y)
		}
	}
	t.Logf("%d messages identical but for position and ts; %d positions equal by chance", len(a), samePositions)
}

// checkRichStream checks that the stream holds what the test means to
// compare: every shard, updates with before images, a logical DDL,
// deletes, and ties across shards.
func checkRichStream(t *testing.T, msgs []map[string]any) {
	t.Helper()
	sources := map[any]bool{}
	var updates, ddls, deletes, ties int
	for i, m := range msgs {
		sources[m["source"]] = true
		switch m["type"] {
		case "UPDATE":
			if m["old"] != nil {
				updates++
			}
		case "DELETE":
			deletes++
		case "ALTER":
			ddls++
		}
		if i > 0 && m["es"] == msgs[i-1]["es"] && m["source"] != msgs[i-1]["source"] {
			ties++
		}
	}
	if len(sources) != 3 || updates == 0 || ddls == 0 || deletes == 0 || ties == 0 {
		t.Fatalf("the stream lacks what the test compares: %d sources, %d updates with old, %d ALTERs, %d deletes, %d cross-shard ties",
			len(sources), updates, ddls, deletes, ties)
	}
}

// withoutServerFields renders a message without the fields that are the
// server's own coordinates or braid's clock.
func withoutServerFields(m map[string]any) string {
	c := make(map[string]any, len(m))
	for k, v := range m {
		if k != "position" && k != "ts" {
			c[k] = v
		}
	}
	b, _ := json.Marshal(c) // sorted keys
	return string(b)
}

func extra(a, b []map[string]any, i int) string {
	if i < len(a) {
		return fmt.Sprint(a[i])
	}
	return fmt.Sprint(b[i])
}

// markerWriter collects capture's lines and ends the capture (watch's
// context) once each shard's row in the done table has been printed:
// the last transaction of every shard.
type markerWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	parsed int // bytes of buf whose lines were looked at
	seen   map[string]bool
	want   int
	cancel context.CancelFunc
}

func newMarkerWriter(shards int) *markerWriter {
	return &markerWriter{seen: map[string]bool{}, want: shards}
}

func (w *markerWriter) watch(ctx context.Context) context.Context {
	ctx, w.cancel = context.WithCancel(ctx)
	return ctx
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	whole := w.buf.Bytes()[:bytes.LastIndexByte(w.buf.Bytes(), '\n')+1]
	for _, l := range bytes.Split(whole[w.parsed:], []byte("\n")) {
		var m struct{ Table, Source string }
		if json.Unmarshal(l, &m) == nil && m.Table == "done" {
			w.seen[m.Source] = true
		}
	}
	w.parsed = len(whole)
	if len(w.seen) == w.want {
		w.cancel()
	}
	return len(p), nil
}

func (w *markerWriter) complete() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen) == w.want
}

func (w *markerWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *markerWriter) messages(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(w.text()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		out = append(out, m)
	}
	return out
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// TestCaptureSameFromMySQLReplicas is TestCaptureSameFromReplicas with
// MySQL 8.4 sources (the MySQL test source): each of two shards is
// served once as its primary wrote its binlog and once as a replica
// (log_replica_updates) wrote the same history: another server_uuid and
// server_id, files of another name rotated elsewhere, every transaction
// under its origin's GTID and original_commit_timestamp but the
// replica's own immediate commit time, and transactions of the replica's
// own (a table not selected, its own GTIDs) between them, one stamped
// past the next replicated one. The two merged streams must be the same
// but for position and ts.
func TestCaptureSameFromMySQLReplicas(t *testing.T) {
	const shards = 2
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	orders := func(db string, region bool) *mysqlbinlog.TableDef {
		d := &mysqlbinlog.TableDef{Schema: db, Name: "orders", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
			{Name: "id", Type: "int", NotNull: true}, {Name: "note", Type: "varchar(32)"}}}
		if region {
			d.Columns = append(d.Columns, mysqlbinlog.ColumnDef{Name: "region", Type: "varchar(8)"})
		}
		return d
	}
	serve := func(i int, replica bool) *mysqlsource.Server {
		db := fmt.Sprintf("shop_%d", i)
		primary := mysqlbinlog.Server{Version: mysqlsource.Version84, ServerID: uint32(10 + i),
			UUID: mysqlbinlog.MustUUID(fmt.Sprintf("1000000%d-0000-0000-0000-000000000000", i)), Start: base.Add(-time.Minute)}
		var txns []mysqlbinlog.Txn
		region := false
		rows := map[int][]any{} // the table as the transactions so far leave it
		txns = append(txns,
			mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: db, CreatesDatabase: true, SQL: "CREATE DATABASE " + db}, CommitTime: base},
			mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: db, Table: orders(db, false)}, CommitTime: base.Add(ms(1))},
			mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: db, Table: &mysqlbinlog.TableDef{Schema: db, Name: "done", PrimaryKey: []string{"id"},
				Columns: []mysqlbinlog.ColumnDef{{Name: "id", Type: "int", NotNull: true}}}}, CommitTime: base.Add(ms(2))})
		for k := range 10 {
			// Even transactions commit at the same µs on both shards.
			at := base.Add(time.Second + ms(100*k))
			if k%2 == 1 {
				at = at.Add(time.Duration(i*37) * time.Microsecond)
			}
			if k == 5 {
				region = true
				for id, r := range rows {
					rows[id] = append(r, nil)
				}
				txns = append(txns, mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: db, SQL: "ALTER TABLE orders ADD COLUMN region varchar(8)",
					Table: orders(db, true)}, CommitTime: at.Add(time.Duration(i) * ms(30))})
				at = at.Add(ms(40))
			}
			id := i*100 + k
			rows[id] = []any{id, "new"}
			if region {
				rows[id] = append(rows[id], "eu")
			}
			stmts := []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: db + ".orders", Rows: []mysqlbinlog.Row{{After: rows[id]}}}}
			if k > 0 {
				before := rows[id-1]
				after := append([]any{id - 1, "seen"}, before[2:]...)
				rows[id-1] = after
				stmts = append(stmts, mysqlbinlog.Statement{Kind: mysqlbinlog.Update, Table: db + ".orders",
					Rows: []mysqlbinlog.Row{{Before: before, After: after}}})
			}
			if k == 8 {
				stmts = append(stmts, mysqlbinlog.Statement{Kind: mysqlbinlog.Delete, Table: db + ".orders",
					Rows: []mysqlbinlog.Row{{Before: rows[i*100]}}})
				delete(rows, i*100)
			}
			txns = append(txns, mysqlbinlog.Txn{Statements: stmts, CommitTime: at, Compressed: k%3 == 0})
		}
		txns = append(txns, mysqlbinlog.Txn{CommitTime: base.Add(2 * time.Second),
			Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: db + ".done", Rows: []mysqlbinlog.Row{{After: []any{i}}}}}})
		w := mysqlbinlog.Workload{Server: primary, Txns: txns}
		cfg := mysqlsource.Config{Version: mysqlsource.Version84, ServerID: primary.ServerID, ServerUUID: primary.UUID.String()}
		if replica {
			own := mysqlbinlog.Server{Version: mysqlsource.Version84, ServerID: uint32(20 + i),
				UUID: mysqlbinlog.MustUUID(fmt.Sprintf("2000000%d-0000-0000-0000-000000000000", i)), BaseName: "replica-bin", Start: base.Add(-30 * time.Second)}
			local := "local_" + db
			w = mysqlbinlog.Workload{Server: own, Txns: []mysqlbinlog.Txn{
				{DDL: &mysqlbinlog.DDL{Schema: local, CreatesDatabase: true, SQL: "CREATE DATABASE " + local}, CommitTime: base.Add(-20 * time.Second)},
				{DDL: &mysqlbinlog.DDL{Schema: local, Table: &mysqlbinlog.TableDef{Schema: local, Name: "t", PrimaryKey: []string{"id"},
					Columns: []mysqlbinlog.ColumnDef{{Name: "id", Type: "int", NotNull: true}}}}, CommitTime: base.Add(-20 * time.Second)},
			}}
			for n, x := range txns {
				applied := x.CommitTime.Add(700 * time.Microsecond) // the replica's own commit, a little later
				x.Origin, x.OriginalCommitTime, x.CommitTime = mysqlbinlog.Origin{UUID: primary.UUID, ServerID: primary.ServerID}, x.CommitTime, applied
				x.RotateAfter = n == 7
				w.Txns = append(w.Txns, x)
				if n == 5 || n == 9 {
					// A write of the replica's own, stamped by its
					// clock 200 ms after it applied this one: past the
					// next replicated transaction's original time.
					w.Txns = append(w.Txns, mysqlbinlog.Txn{CommitTime: applied.Add(ms(200)), Statements: []mysqlbinlog.Statement{{
						Kind: mysqlbinlog.Insert, Table: local + ".t", Rows: []mysqlbinlog.Row{{After: []any{n}}}}}})
				}
			}
			cfg.ServerID, cfg.ServerUUID = own.ServerID, own.UUID.String()
		}
		s := mysqlsource.Start(t, cfg)
		if _, err := s.Serve(w); err != nil {
			t.Fatal(err)
		}
		return s
	}
	read := func(replica bool) []map[string]any {
		var b strings.Builder
		b.WriteString(`
name: shop
heartbeat: 100ms
tables: ['shop_\d+\.(orders|done)']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
sources:
`)
		for i := range shards {
			fmt.Fprintf(&b, "  - {name: shard%d, address: '%s', start: earliest}\n", i, serve(i, replica).Addr())
		}
		ds, err := spec.Parse([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		w := newMarkerWriter(shards)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		if err := capture(w.watch(ctx), ds, w, captureOptions{}, testLogger(t)); err != nil {
			t.Fatalf("capture (replicas: %v): %v", replica, err)
		}
		if !w.complete() {
			t.Fatalf("capture (replicas: %v) ended before every shard's last transaction:\n%s", replica, w.text())
		}
		return w.messages(t)
	}
	a, b := read(false), read(true)
	if len(a) != len(b) {
		t.Fatalf("the primaries gave %d messages, the replicas %d", len(a), len(b))
	}
	var ties, updates, ddls, samePositions int
	for i := range a {
		x, y := withoutServerFields(a[i]), withoutServerFields(b[i])
		if x != y {
			t.Fatalf("message %d differs:\nprimaries: %s\nreplicas:  %s", i, x, y)
		}
		if a[i]["position"] == b[i]["position"] {
			samePositions++
		}
		if i > 0 && a[i]["es"] == a[i-1]["es"] && a[i]["source"] != a[i-1]["source"] {
			ties++
		}
		if a[i]["old"] != nil {
			updates++
		}
		if a[i]["type"] == "ALTER" {
			ddls++
		}
	}
	if ties == 0 || updates == 0 || ddls == 0 {
		t.Fatalf("the stream lacks what the test compares: %d cross-shard ties, %d updates with old, %d ALTERs", ties, updates, ddls)
	}
	t.Logf("%d messages identical but for position and ts; %d positions equal by chance", len(a), samePositions)
}
