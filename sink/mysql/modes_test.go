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
	"github.com/braid-cdc/braid/sink"
	mysqlsink "github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
)

// TestCreateTables: with ddl: ignore the stream's CREATE TABLE is not run
// on the target, so the target table is missing. Without create_tables
// that stops the sink with an error naming the table and the fix; with
// it, the sink creates the table from the logical table's columns (types,
// NOT NULL, primary and unique keys, the origin column leading the key)
// and fills it.
func TestCreateTables(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, amount DECIMAL(10,2) NOT NULL, at TIMESTAMP NULL, flags SET('a','b'))",
		"CREATE TABLE shop_1.orders LIKE shop_0.orders",
		"INSERT INTO shop_0.orders VALUES (1, 'x', 1.50, '2026-01-01 00:00:00', 'a,b'), (2, 'y', 2.50, NULL, '')",
		"INSERT INTO shop_1.orders VALUES (1, 'x', 3.50, NULL, 'b')")
	specOf := func(sinkName string, create bool) *spec.Spec {
		ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
			Heartbeat: spec.Duration(100 * time.Millisecond),
			Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
			Sinks: []spec.Sink{{Name: sinkName, Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", DDL: "ignore", CreateTables: create,
				OriginColumn: "_shard", Tables: []spec.SinkTable{{From: "shop.orders", To: name + "." + sinkName}}}}}
		ds = ds.WithDefaults()
		return &ds
	}
	missing := applyOnce(t, specOf("missing", false))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, lastErr := missing.Applied(); strings.Contains(lastErr, "target table "+name+".missing of shop.orders does not exist") && strings.Contains(lastErr, "create_tables: true") {
			break
		}
		if time.Now().After(deadline) {
			_, lastErr := missing.Applied()
			t.Fatalf("no error for the missing table; last error %q", lastErr)
		}
	}

	created := applyOnce(t, specOf("created", true))
	want := []string{"a/shop_0.orders 1 x 1.50 a,b", "a/shop_0.orders 2 y 2.50 ", "a/shop_1.orders 1 x 3.50 b"}
	var got []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got = got[:0]
		if q, err := db.Query("SELECT _shard, id, code, amount, flags FROM " + name + ".created"); err == nil {
			for q.Next() {
				var a, b, c, d, e string
				q.Scan(&a, &b, &c, &d, &e)
				got = append(got, strings.Join([]string{a, b, c, d, e}, " "))
			}
			q.Close()
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			_, lastErr := created.Applied()
			t.Fatalf("created table holds %q, want %q (last error %q)", got, want, lastErr)
		}
	}
	var table, ddl string
	if err := db.QueryRow("SHOW CREATE TABLE "+name+".created").Scan(&table, &ddl); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"`code` varchar(20) NOT NULL", "`amount` decimal(10,2) NOT NULL", "`at` timestamp NULL", "set('a','b')",
		"PRIMARY KEY (`_shard`,`id`)", "UNIQUE KEY `_shard` (`_shard`,`code`)"} {
		if !strings.Contains(ddl, part) {
			t.Errorf("the created table has no %q:\n%s", part, ddl)
		}
	}
}

// TestOlderCheckpointsByKey: a new sink routes by key range; one whose
// checkpoints an older braid wrote, without the worker count and the
// routing, adopts them and goes on by key hash, as they were written.
// (That another worker count is refused is the conformance suite's case
// workers.)
func TestOlderCheckpointsByKey(t *testing.T) {
	db, name := targetDB(t)
	tg, err := mysqlsink.Open(t.Context(), spec.Sink{Name: "w", Type: "mysql", Address: targetAddr, User: "root", Workers: 4, MetaDatabase: name + "_meta"}, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if _, err := tg.Checkpoints(t.Context(), 4); err != nil {
		t.Fatal(err)
	}
	if r := tg.Routing(); r != sink.RouteByWideRange {
		t.Errorf("a new sink routes %d, want by wide range", r)
	}
	// Its count row, which holds the routing above the count, reads back.
	again, err := mysqlsink.Open(t.Context(), spec.Sink{Name: "w", Type: "mysql", Address: targetAddr, User: "root", Workers: 4, MetaDatabase: name + "_meta"}, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Checkpoints(t.Context(), 4); err != nil || again.Routing() != sink.RouteByWideRange {
		t.Errorf("the new sink opened again: %v, routing %d; want by wide range", err, again.Routing())
	}
	// An older braid's checkpoints: worker rows, no count, no
	// destination (Open migrates the table; Checkpoints adopts them).
	for _, q := range []string{
		"DROP TABLE " + name + "_meta.sink_checkpoint",
		"CREATE TABLE " + name + "_meta.sink_checkpoint (sink VARCHAR(128) NOT NULL, worker INT NOT NULL, seq BIGINT UNSIGNED NOT NULL, idx INT NOT NULL, PRIMARY KEY (sink, worker))",
		"INSERT INTO " + name + "_meta.sink_checkpoint VALUES ('old', 0, 5, 1), ('old', 2, 7, 0)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	old, err := mysqlsink.Open(t.Context(), spec.Sink{Name: "old", Type: "mysql", Address: targetAddr, User: "root", Workers: 4, MetaDatabase: name + "_meta"}, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for range 2 {
		if pts, err := old.Checkpoints(t.Context(), 4); err != nil || pts[2].Seq != 7 || old.Routing() != sink.RouteByKey {
			t.Errorf("older checkpoints: %v, %v, routing %d: want worker 2 at seq 7, by key", pts, err, old.Routing())
		}
	}
}

// TestIgnoredDDLReadsItsTableAgain: with ddl: ignore the target's tables
// are the user's. An ALTER at the source, matched by the user's ALTER of
// the target table, has the sink read that table's columns again, so its
// rows go on being replayed; the other table's go on as they were.
func TestIgnoredDDLReadsItsTableAgain(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	tables := []string{
		"CREATE TABLE %s.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"CREATE TABLE %s.items (id INT PRIMARY KEY, qty INT NOT NULL)",
	}
	srv.Exec(t, "CREATE DATABASE shop_0", fmt.Sprintf(tables[0], "shop_0"), fmt.Sprintf(tables[1], "shop_0"),
		"INSERT INTO shop_0.orders VALUES (1, 'a'), (2, 'b')", "INSERT INTO shop_0.items VALUES (1, 5)")
	for _, q := range append([]string{"CREATE DATABASE %s"}, tables...) {
		if _, err := db.Exec(fmt.Sprintf(q, name)); err != nil {
			t.Fatal(err)
		}
	}
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_0\.(orders|items)`}, Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources: []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", DDL: "ignore",
			Tables: []spec.SinkTable{{From: "shop_0.orders", To: name + ".orders"}, {From: "shop_0.items", To: name + ".items"}}}}}
	ds = ds.WithDefaults()
	r, target := applyWith(t, &ds, false)
	source, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer source.Close()
	same := func(what string) {
		t.Helper()
		for _, table := range []string{"orders", "items"} {
			q := "SELECT * FROM %s." + table + " ORDER BY id"
			sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
				got, want := sinktest.Query(db, fmt.Sprintf(q, name)), sinktest.Query(source, fmt.Sprintf(q, "shop_0"))
				_, lastErr := r.Applied()
				return slices.Equal(got, want), fmt.Sprintf("%s: target %s holds %q, the source %q (last error %q)", what, table, got, want, lastErr)
			})
		}
	}
	same("before the ALTER")
	if _, err := db.Exec("ALTER TABLE " + name + ".orders ADD COLUMN placed DATE NULL"); err != nil {
		t.Fatal(err)
	}
	srv.Exec(t, "ALTER TABLE shop_0.orders ADD COLUMN placed DATE NULL",
		"INSERT INTO shop_0.orders VALUES (3, 'c', '2026-12-07')", "UPDATE shop_0.orders SET placed = '2026-01-02' WHERE id = 1",
		"INSERT INTO shop_0.items VALUES (2, 7)", "UPDATE shop_0.items SET qty = 6 WHERE id = 1")
	same("after the ALTER")
	if st := target.Stats(); st.Replayed != st.Applied {
		t.Errorf("%+v: want every change replayed, those after the ALTER too", st)
	}
}

// TestReplayConnectionsOpenAtStart: Open opens the replay transactions'
// connections, as many as may run at once, while the stream starts, so
// that the first transactions do not each wait for one.
func TestReplayConnectionsOpenAtStart(t *testing.T) {
	_, name := targetDB(t)
	s := spec.Sink{Name: "w", Type: "mysql", Address: targetAddr, User: "root", Workers: 8, Connections: 3, MetaDatabase: name + "_meta"}
	tg, err := mysqlsink.Open(t.Context(), s, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	sinktest.WaitFor(t, 10*time.Second, func() (bool, string) {
		n := mysqlsink.ReplayConns(tg)
		return n == 3, fmt.Sprintf("the replay pool holds %d connections, want 3", n)
	})
}
