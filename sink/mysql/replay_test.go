package mysql_test

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

// TestReplayTablesTogether: two shards' orders and items, whose keys
// overlap, merged into two tables with an origin column (which the sink
// puts first), by transactions that interleave the two tables and carry
// rows big enough that a worker's batch takes more than one BINLOG
// statement. Every change is replayed, and the targets equal the shards
// row for row: a rows event whose table was mapped after the server had
// locked its statement's tables would be skipped without an error.
func TestReplayTablesTogether(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	for n := range 2 {
		srv.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", n),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(20), body MEDIUMTEXT)", n),
			fmt.Sprintf("CREATE TABLE shop_%d.items (id INT PRIMARY KEY, order_id INT NOT NULL, qty INT NOT NULL)", n))
	}
	for round := range 4 {
		for n := range 2 {
			stmts := []string{"BEGIN"}
			for k := range 10 {
				id := round*100 + k
				body := "NULL"
				if round%2 == 1 {
					body = fmt.Sprintf("REPEAT('%d', 150000)", k) // ten of them are 1.5 MB
				}
				stmts = append(stmts,
					fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'r%d', %s)", n, id, round, body),
					fmt.Sprintf("INSERT INTO shop_%d.items VALUES (%d, %d, 1), (%d, %d, 2)", n, 2*id, id, 2*id+1, id))
			}
			stmts = append(stmts,
				fmt.Sprintf("UPDATE shop_%d.items SET qty = qty + 1 WHERE id %% 3 = 0", n),
				fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u%d' WHERE id %% 4 = 1", n, round),
				fmt.Sprintf("DELETE FROM shop_%d.items WHERE id = %d", n, round*200+5),
				fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id = %d", n, round*100+7),
				"COMMIT")
			srv.Exec(t, stmts...)
		}
	}
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.(orders|items)`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "both", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", OriginColumn: "_shard", CreateTables: true,
			Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".orders"}, {From: "shop.items", To: name + ".items"}}}}}
	ds = ds.WithDefaults()
	r, target := applyWith(t, &ds, false)

	queries := map[string]string{
		"orders": "SELECT %s, id, IFNULL(note, 'NULL'), IFNULL(MD5(body), 'NULL') FROM %s.orders",
		"items":  "SELECT %s, id, order_id, qty FROM %s.items",
	}
	for _, table := range []string{"orders", "items"} {
		want := sinktest.SourceRows(t, []*mysqltest.Server{srv, srv}, func(n int) string {
			return fmt.Sprintf(queries[table], fmt.Sprintf("'a/shop_%d.%s'", n, table), fmt.Sprintf("shop_%d", n))
		})
		sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
			got := sinktest.Query(db, fmt.Sprintf(queries[table], "_shard", name))
			applied, lastErr := r.Applied()
			return slices.Equal(got, want), fmt.Sprintf("%s: the target has %d rows, the shards %d (applied seq %d, last error %q); first rows %q of %q",
				table, len(got), len(want), applied, lastErr, strings.Join(got[:min(4, len(got))], "; "), strings.Join(want[:4], "; "))
		})
	}
	// The counters move just after the commit the target's rows show.
	st := target.Stats()
	sinktest.WaitFor(t, 10*time.Second, func() (bool, string) {
		st = target.Stats()
		return st.Replayed == st.Applied, fmt.Sprintf("%+v: want every change replayed", st)
	})
	if st.Upserts != 0 || st.Missing != 0 {
		t.Fatalf("%+v: want every change replayed, none upserted or missed", st)
	}
}

// TestReplayNeedsGrant: a sink whose user may not run BINLOG statements
// (it lacks BINLOG REPLAY) applies SQL statements instead, and the target
// equals the source all the same.
func TestReplayNeedsGrant(t *testing.T) {
	db, name := targetDB(t)
	user := name + "_u"
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY 'pw'",
		"GRANT ALL ON `" + name + "`.* TO '" + user + "'@'%'",
		"GRANT ALL ON `" + name + "_meta`.* TO '" + user + "'@'%'",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { db.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES (1, 'a'), (2, 'b'), (3, 'c')",
		"UPDATE shop_0.orders SET note = 'B' WHERE id = 2", "DELETE FROM shop_0.orders WHERE id = 3")
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_0\.orders`},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "plain", Type: "mysql", Address: targetAddr, User: user, Password: "pw", MetaDatabase: name + "_meta", CreateTables: true,
			Tables: []spec.SinkTable{{From: "shop_0.orders", To: name + ".orders"}}}}}
	ds = ds.WithDefaults()
	r, target := applyWith(t, &ds, false)
	want := []string{"1 a", "2 B"}
	// The target counts a transaction once it has committed it, a moment
	// after its rows show: wait for both.
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id, note FROM "+name+".orders")
		_, lastErr := r.Applied()
		st := target.Stats()
		return slices.Equal(got, want) && st.Applied+st.Replayed >= 5,
			fmt.Sprintf("the target holds %q, want %q; stats %+v (last error %q)", got, want, st, lastErr)
	})
	if st := target.Stats(); st.Replayed != 0 || st.Applied != 5 {
		t.Fatalf("%+v: want 5 changes applied as SQL statements, none replayed", st)
	}
}

// TestReplayKeepsText: the replay transactions run in sessions that read
// text as binary (replayPool), the SQL statements a transaction falls
// back to in the sink's utf8mb4 ones. Rows with 4-byte characters are
// replayed, one UPDATE whose row the target lacks falls back to SQL and
// writes its 4-byte text, and every value at the target is the source's,
// byte for byte; the checkpoint rows carry the destination's and the
// sink's names as given.
func TestReplayKeepsText(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0",
		"CREATE TABLE shop_0.notes (id INT PRIMARY KEY, note VARCHAR(40) CHARACTER SET utf8mb4)",
		"INSERT INTO shop_0.notes VALUES (1, 'a😀'), (2, 'ü名前😀'), (3, NULL)")
	src, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_0\.notes`},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "text-sink", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", CreateTables: true,
			Tables: []spec.SinkTable{{From: "shop_0.notes", To: name + ".notes"}}}}}
	ds = ds.WithDefaults()
	r, target := applyWith(t, &ds, false)
	const q = "SELECT id, IFNULL(HEX(note), 'NULL') FROM %s.notes ORDER BY id"
	same := func() {
		t.Helper()
		want := sinktest.Query(src, fmt.Sprintf(q, "shop_0"))
		sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
			got := sinktest.Query(db, fmt.Sprintf(q, name))
			_, lastErr := r.Applied()
			return slices.Equal(got, want), fmt.Sprintf("the target holds %q, the source %q (last error %q)", got, want, lastErr)
		})
	}
	same()
	if _, err := db.Exec("DELETE FROM " + name + ".notes WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	srv.Exec(t, "UPDATE shop_0.notes SET note = '𝄞 ok 😀' WHERE id = 2", "INSERT INTO shop_0.notes VALUES (4, '🎉x')")
	same()
	// The counters move just after the commit the target's rows show.
	st := target.Stats()
	sinktest.WaitFor(t, 10*time.Second, func() (bool, string) {
		st = target.Stats()
		return st.Applied >= 5, fmt.Sprintf("%+v: want 5 changes applied", st)
	})
	if st.Missing != 1 || st.Replayed < 3 || st.Applied != 5 {
		t.Fatalf("%+v: want 5 changes applied, the first 3 and the last replayed, 1 missing row upserted as SQL", st)
	}
	var dest, sinkName string
	if err := db.QueryRow("SELECT dest, sink FROM "+name+"_meta.sink_checkpoint WHERE seq > 0 LIMIT 1").Scan(&dest, &sinkName); err != nil {
		t.Fatal(err)
	}
	if dest != "shop" || sinkName != "text-sink" {
		t.Fatalf("checkpoint row of dest %q, sink %q: want shop, text-sink", dest, sinkName)
	}
}

// TestReplayNotIntoTriggers: a target table with a trigger gets SQL
// statements, whose rows fire it (a replayed row would not), however its
// transaction's rows are batched with another table's; a table without
// one is replayed.
func TestReplayNotIntoTriggers(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	tables := []string{
		"CREATE TABLE %s.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"CREATE TABLE %s.items (id INT PRIMARY KEY, qty INT NOT NULL)",
		"CREATE TABLE %s.notes (id INT PRIMARY KEY, body VARCHAR(20))",
	}
	srv.Exec(t, "CREATE DATABASE shop_0", fmt.Sprintf(tables[0], "shop_0"), fmt.Sprintf(tables[1], "shop_0"), fmt.Sprintf(tables[2], "shop_0"))
	for _, q := range append([]string{"CREATE DATABASE %s"}, append(tables,
		"CREATE TABLE %s.audit (item INT NOT NULL)",
		"CREATE TRIGGER %[1]s.items_audit AFTER INSERT ON %[1]s.items FOR EACH ROW INSERT INTO %[1]s.audit VALUES (NEW.id)")...) {
		if _, err := db.Exec(fmt.Sprintf(q, name)); err != nil {
			t.Fatal(err)
		}
	}
	srv.Exec(t, "BEGIN", "INSERT INTO shop_0.orders VALUES (1, 'a'), (2, 'b')", "INSERT INTO shop_0.items VALUES (1, 5), (2, 6), (3, 7)", "COMMIT")
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_0\.(orders|items|notes)`}, Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources: []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", DDL: "ignore", Workers: 1,
			Tables: []spec.SinkTable{{From: "shop_0.orders", To: name + ".orders"}, {From: "shop_0.items", To: name + ".items"}, {From: "shop_0.notes", To: name + ".notes"}}}}}
	ds = ds.WithDefaults()
	r, target := applyWith(t, &ds, false)
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT item FROM "+name+".audit")
		st := target.Stats()
		_, lastErr := r.Applied()
		return slices.Equal(got, []string{"1", "2", "3"}) && st.Applied == 5,
			fmt.Sprintf("the trigger wrote %q, want items 1, 2, 3; %+v (last error %q)", got, st, lastErr)
	})
	// The orders went as SQL beside the items, or replayed alone when a
	// store batch split the transaction between workers' turns.
	before := target.Stats()
	srv.Exec(t, "INSERT INTO shop_0.notes VALUES (1, 'x'), (2, 'y')")
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		st := target.Stats()
		return st.Applied == 7, fmt.Sprintf("%+v: want 7 changes applied", st)
	})
	if st := target.Stats(); st.Replayed-before.Replayed != 2 {
		t.Errorf("%+v after %+v: want the 2 notes replayed", st, before)
	}
}
