package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestPipelineIsOneTransaction: what Apply rests on. A pgx batch sent
// without BEGIN is one pipeline ending in one Sync, which PostgreSQL runs
// as one implicit transaction: a statement that fails takes the ones
// before it back (and the statements new to the connection, prepared
// first, change nothing of that).
func TestPipelineIsOneTransaction(t *testing.T) {
	db, _ := targetDB(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, "CREATE TABLE one (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	for _, id := range []int{1, 2, 1, 3} {
		b.Queue("INSERT INTO one VALUES ($1)", id)
	}
	err := db.SendBatch(ctx, b).Close()
	var n int
	db.QueryRow(ctx, "SELECT count(*) FROM one").Scan(&n)
	if err == nil || n != 0 {
		t.Fatalf("a batch whose third INSERT failed (%v) left %d rows, want 0", err, n)
	}
}

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
	ds := shopSpec(t, []*mysqltest.Server{srv}, spec.Sink{Name: "k", Type: "postgres", Address: targetAddr, Database: name, Workers: 2})
	want := sourceRows(t, []*mysqltest.Server{srv}, func(int) string { return "SELECT a, IFNULL(b, '<nil>') FROM shop_0.orders" })
	r, target := applyOnce(t, ds)
	waitRows(t, 20*time.Second, r, want, func() []string {
		return query(db, "SELECT a, coalesce(b, '<nil>') FROM shop.orders")
	})
	if st := target.Stats(); st.Missing != 0 || st.Upserts != 0 {
		t.Fatalf("stats %+v", st)
	}
}
