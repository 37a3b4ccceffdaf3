package postgres_test

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/spec"
)

// TestKeyless: a table without a primary key (nor a unique key) matches
// rows by every column: two equal rows, one of them updated, one deleted,
// end as at the source.
func TestKeyless(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (a INT, b VARCHAR(10))",
		"INSERT INTO shop_0.orders VALUES (1, 'x'), (1, 'x'), (2, 'y'), (3, NULL), (3, NULL)",
		"UPDATE shop_0.orders SET b = 'z' WHERE a = 1 LIMIT 1",
		"DELETE FROM shop_0.orders WHERE a = 3 LIMIT 1",
		"UPDATE shop_0.orders SET a = 4 WHERE a = 2",
		"DELETE FROM shop_0.orders WHERE a = 9")
	ds := conformance.ShopSpec(t, []*mysqltest.Server{srv}, spec.Sink{Name: "k", Type: "postgres", Address: targetAddr, Database: name, Workers: 2})
	want := sourceRows(t, []*mysqltest.Server{srv}, func(int) string { return "SELECT a, IFNULL(b, '<nil>') FROM shop_0.orders" })
	r, target := applyOnce(t, ds)
	waitRows(t, 20*time.Second, r, want, func() []string {
		return query(db, "SELECT a, coalesce(b, '<nil>') FROM shop.orders")
	})
	if st := target.Stats(); st.Missing != 0 || st.Upserts != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestOneRowUpdatedOften: one row updated in five transactions, handed
// to one worker in one store batch, is one run of sink.Plan; it is
// applied as five statements (ON CONFLICT DO UPDATE affects a row once a
// statement), and ends as at the source.
func TestOneRowUpdatedOften(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO shop_0.orders VALUES (1, 0), (2, 0)")
	for range 5 {
		srv.Exec(t, "UPDATE shop_0.orders SET v = v + 1")
	}
	sk := spec.Sink{Name: "often", Type: "postgres", Address: targetAddr, Database: name, Workers: 1}
	ds := conformance.ShopSpec(t, []*mysqltest.Server{srv}, sk)
	ds.Sinks[0].Batch = 0 // the runner hands the worker its whole share
	r, target := applyOnce(t, ds)
	waitRows(t, 20*time.Second, r, []string{"1 5", "2 5"}, func() []string {
		return query(db, "SELECT id, v FROM shop.orders")
	})
	// The counts move once the transaction's batch has returned, a moment
	// after its rows are visible.
	for deadline := time.Now().Add(5 * time.Second); target.Stats().Applied < 12 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if st := target.Stats(); st.Applied != 12 || st.Missing != 0 || st.Upserts != 0 {
		t.Fatalf("stats %+v, want 12 applied", st)
	}
}
