package binlog_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

func columnNames(rc *change.RowChange) []string {
	var n []string
	for _, c := range rc.Table.Columns {
		n = append(n, c.Name)
	}
	return n
}

// TestReplayAcrossAlter replays from earliest after ALTERs have run: each
// row must carry the columns of its own time, not the live schema (go-mysql
// canal's issue #905).
func TestReplayAcrossAlter(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t,
		"CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, amount INT, note VARCHAR(20))",
		"INSERT INTO shop.orders VALUES (1, 10, 'first')",
		"ALTER TABLE shop.orders ADD COLUMN status ENUM('new','paid') NOT NULL DEFAULT 'new' AFTER id, CHANGE note comment VARCHAR(20)",
		"INSERT INTO shop.orders VALUES (2, 'paid', 20, 'second')",
		"ALTER TABLE shop.orders DROP COLUMN amount",
		"INSERT INTO shop.orders VALUES (3, 'new', 'third')",
		"UPDATE shop.orders SET comment = 'x' WHERE id = 1",
	)
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	evs := r.waitFor(30*time.Second, "4 row changes", rowsAtLeast(4))
	rc := rows(evs)
	wantCols := [][]string{
		{"id", "amount", "note"},
		{"id", "status", "amount", "comment"},
		{"id", "status", "comment"},
		{"id", "status", "comment"},
	}
	for i, w := range wantCols {
		if got := columnNames(rc[i]); !reflect.DeepEqual(got, w) {
			t.Errorf("row %d columns %v, want %v", i, got, w)
		}
	}
	if got := named(rc[0], rc[0].After()); got["note"] != "first" || got["amount"] != int64(10) {
		t.Errorf("row 0 = %v", got)
	}
	if got := named(rc[1], rc[1].After()); got["status"] != "paid" || got["comment"] != "second" {
		t.Errorf("row 1 = %v", got)
	}
	if got := named(rc[3], rc[3].Before()); got["status"] != "new" || got["comment"] != "first" {
		t.Errorf("row 3 before = %v (row 1 after two ALTERs)", got)
	}
	if n := countType(evs, change.EventDDL); n != 3 {
		t.Errorf("%d DDL events, want 3 (CREATE TABLE and two ALTERs)", n)
	}
}

// TestUnknownSchemaBeforeDDL: when the table's CREATE is no longer in the
// binlog and an ALTER is, the columns of rows before the ALTER cannot be
// known; the reader must fail with the table and position, not guess.
func TestUnknownSchemaBeforeDDL(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY, a INT, b INT)")
	srv.FlushLogs(t)
	file, _ := srv.MasterStatus(t)
	srv.PurgeLogsTo(t, file)
	srv.Exec(t,
		"INSERT INTO shop.orders VALUES (1, 2, 3)",
		"ALTER TABLE shop.orders CHANGE a b2 INT, CHANGE b a2 INT", // same count: a guess would mislabel silently
		"INSERT INTO shop.orders VALUES (2, 3, 4)")
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	err := r.runErr(30 * time.Second)
	if !errors.Is(err, binlog.ErrSchemaUnknown) {
		t.Fatalf("error %v, want ErrSchemaUnknown", err)
	}
	t.Logf("error: %v", err)
	if len(rows(r.snapshot())) != 0 {
		t.Errorf("rows were emitted before the error")
	}

	// Starting after the ALTER works with the live schema.
	srv.Exec(t, "INSERT INTO shop.orders VALUES (3, 4, 5)")
	r2 := startReader(t, binlog.Config{Source: source(srv, spec.Start{Kind: spec.StartLatest})}, nil)
	time.Sleep(500 * time.Millisecond)
	srv.Exec(t, "INSERT INTO shop.orders VALUES (4, 5, 6)")
	evs := r2.waitFor(30*time.Second, "one row", rowsAtLeast(1))
	if got := named(rows(evs)[0], rows(evs)[0].After()); got["b2"] != int64(5) || got["a2"] != int64(6) {
		t.Errorf("row after ALTER = %v", got)
	}
}

// TestColumnCountMismatch: a table whose schema braid was given wrong (here,
// a DDL hidden from the binlog with sql_log_bin=0) fails on the column count.
func TestColumnCountMismatch(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY, a INT)")
	r := startReader(t, binlog.Config{Source: source(srv, spec.Start{Kind: spec.StartLatest})}, nil)
	time.Sleep(500 * time.Millisecond)
	srv.Exec(t, "SET sql_log_bin = 0", "ALTER TABLE shop.orders ADD COLUMN b INT", "SET sql_log_bin = 1",
		"INSERT INTO shop.orders VALUES (1, 2, 3)")
	err := r.runErr(30 * time.Second)
	if !errors.Is(err, binlog.ErrColumnCount) {
		t.Fatalf("error %v, want ErrColumnCount", err)
	}
	t.Logf("error: %v", err)
}

// TestReplayAcrossDropDatabase: a schema dropped and created again with a
// different table is replayed with each table's own columns.
func TestReplayAcrossDropDatabase(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t,
		"CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, a INT)",
		"INSERT INTO shop.orders VALUES (1, 2)",
		"DROP DATABASE shop",
		"CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, b VARCHAR(5), c INT)",
		"INSERT INTO shop.orders VALUES (2, 'x', 3)")
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	rc := rows(r.waitFor(30*time.Second, "2 rows", rowsAtLeast(2)))
	if got := columnNames(rc[0]); !reflect.DeepEqual(got, []string{"id", "a"}) {
		t.Errorf("row 0 columns %v", got)
	}
	if got := columnNames(rc[1]); !reflect.DeepEqual(got, []string{"id", "b", "c"}) {
		t.Errorf("row 1 columns %v", got)
	}
}

// TestPreexistingTables: tables whose CREATE was purged take the live schema
// where no DDL of theirs follows, and the schema after their last DDL once
// that DDL is read.
func TestPreexistingTables(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, a INT)",
		"CREATE TABLE shop.items (id INT PRIMARY KEY, sku VARCHAR(10))")
	srv.FlushLogs(t)
	file, _ := srv.MasterStatus(t)
	srv.PurgeLogsTo(t, file)
	srv.Exec(t,
		"ALTER TABLE shop.orders ADD COLUMN b INT", // orders' first event in the binlog is its last DDL
		"INSERT INTO shop.orders VALUES (1, 2, 3)",
		"INSERT INTO shop.items VALUES (1, 'x')") // items never changes
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	rc := rows(r.waitFor(30*time.Second, "2 rows", rowsAtLeast(2)))
	if got := columnNames(rc[0]); !reflect.DeepEqual(got, []string{"id", "a", "b"}) {
		t.Errorf("orders columns %v, want [id a b]", got)
	}
	if got := named(rc[1], rc[1].After()); got["sku"] != "x" {
		t.Errorf("items row %v", got)
	}
}
