package binlog_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestSnapshotSettlesProvisionalTables: reading from the binlog's start,
// braid first takes every table's live schema provisionally (it may not
// hold that early). A schema snapshot saved with a cursor is restored as
// fact, so before taking one braid settles those tables: a reader resumed
// from the snapshot of a.x's CREATE TABLE must still see b.y created later
// (its DDL event and its row), not take b.y as existing from the start.
func TestSnapshotSettlesProvisionalTables(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE a", "CREATE TABLE a.x (id INT PRIMARY KEY)",
		"CREATE DATABASE b", "CREATE TABLE b.y (id INT PRIMARY KEY, v INT)", "INSERT INTO b.y VALUES (1, 2)")
	isDDL := func(table string) func(*change.Event) bool {
		return func(ev *change.Event) bool {
			return ev.Type == change.EventDDL && slices.Contains(ev.DDL.Tables, table)
		}
	}
	first := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	evs := first.waitFor(30*time.Second, "b.y's row", rowsAtLeast(1))
	at := slices.IndexFunc(evs, isDDL("a.x"))
	if at < 0 || evs[at].Schema == nil {
		t.Fatalf("no CREATE TABLE a.x event with a schema snapshot in %d events", len(evs))
	}
	first.stop()

	resumed := startReader(t, binlog.Config{Source: source(srv, earliest),
		Resume: &binlog.Resume{Pos: evs[at].EndPos, Schema: evs[at].Schema}}, nil)
	evs = resumed.waitFor(30*time.Second, "b.y's row after the resume", rowsAtLeast(1))
	if !slices.ContainsFunc(evs, isDDL("b.y")) {
		t.Errorf("the resumed reader emitted no CREATE TABLE b.y: it took b.y as existing from the start")
	}
	if rc := rows(evs)[0]; rc.Table.FullName() != "b.y" || len(rc.Table.Columns) != 2 {
		t.Errorf("row of %s with %d columns, want b.y's two", rc.Table.FullName(), len(rc.Table.Columns))
	}
}

// TestFullMetadataDDLBeforeSchemaLoad: with binlog_row_metadata=FULL,
// a reader started before an ALTER that the server's live schema already
// shows still applies that ALTER where the binlog has it (it emits it as
// a DDL of the table, the shard-DDL merge's input), instead of failing
// to apply it to a schema that has the column already.
func TestFullMetadataDDLBeforeSchemaLoad(t *testing.T) {
	srv := mysqltest.Start(t, mysqltest.WithArgs("--binlog-row-metadata=FULL"))
	srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)")
	file, pos := srv.MasterStatus(t)
	srv.Exec(t, "ALTER TABLE d.t ADD COLUMN x INT", "INSERT INTO d.t VALUES (1, 2)")
	src := source(srv, spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}})
	p := startReader(t, binlog.Config{Source: src}, nil)
	evs := p.waitFor(30*time.Second, "the row after the ALTER", rowsAtLeast(1))
	if !slices.ContainsFunc(evs, func(ev *change.Event) bool {
		return ev.Type == change.EventDDL && slices.Contains(ev.DDL.Tables, "d.t") && ev.Schema != nil
	}) {
		t.Errorf("no ALTER TABLE d.t event with its schema: the ALTER was lost")
	}
	if rc := rows(evs)[0]; len(rc.Table.Columns) != 2 {
		t.Errorf("row with %d columns, want 2", len(rc.Table.Columns))
	}
}

// TestLatestStartDuringDDL: a reader started at the latest position reads
// the position, then the live schema; an ALTER between the two would give
// the rows before it the altered columns. Readers started again and again
// while ALTERs and INSERTs run decode every row they see with the columns
// it was written with.
func TestLatestStartDuringDDL(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY AUTO_INCREMENT, n INT)")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := srv.Conn(t)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Each row says how many columns it was written with.
			for _, q := range []string{fmt.Sprintf("INSERT INTO d.t (n) VALUES (%d)", i+1), fmt.Sprintf("ALTER TABLE d.t ADD COLUMN c%d INT", i)} {
				if _, err := c.Execute(q); err != nil {
					t.Errorf("%s: %v", q, err)
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()
	for range 15 {
		p := startReader(t, binlog.Config{Source: source(srv, spec.Start{})}, nil)
		evs := p.waitFor(30*time.Second, "three rows", rowsAtLeast(3))
		for _, rc := range rows(evs) {
			if n := named(rc, rc.After())["n"]; n != int64(len(rc.Table.Columns)) {
				t.Fatalf("a row written with %v columns came with %d", n, len(rc.Table.Columns))
			}
		}
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStartBeforeSchemaCreatedScansNothing: a reader started before the
// CREATE DATABASE of its table's schema knows at that statement that the
// table did not exist yet, so the schema snapshot saved there needs no
// scan of the binlog for DDL, which delayed the first rows of every
// capture from the start of a binlog (issue 44: capture's first second);
// the rows carry their own columns.
func TestStartBeforeSchemaCreatedScansNothing(t *testing.T) {
	srv := mysqltest.Start(t)
	file, pos := srv.MasterStatus(t)
	srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, n INT)",
		"INSERT INTO d.t VALUES (1, 2)", "ALTER TABLE d.t ADD COLUMN c INT", "INSERT INTO d.t VALUES (2, 3, 4)")
	var logs logline.Buffer
	p := startReader(t, binlog.Config{
		Source: source(srv, spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}),
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil)),
	}, nil)
	evs := p.waitFor(30*time.Second, "two rows", rowsAtLeast(2))
	for _, rc := range rows(evs) {
		if n := named(rc, rc.After())["n"]; n != int64(len(rc.Table.Columns)) {
			t.Errorf("a row written with %v columns came with %d", n, len(rc.Table.Columns))
		}
	}
	if strings.Contains(logs.String(), "scanned binlog for DDL") {
		t.Errorf("the reader scanned the binlog for DDL; log:\n%s", logs.String())
	}
}

// TestStartWhileTableDropped: a table listed among the live tables and
// gone before its SHOW CREATE TABLE (dropped, or renamed by a pt-osc swap
// at that moment) does not stop the start with error 1146: it is left out
// of the live schema, and the rows of the others read on.
func TestStartWhileTableDropped(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.a (id INT PRIMARY KEY)", "CREATE TABLE d.b (id INT PRIMARY KEY)",
		"INSERT INTO d.b VALUES (1)")
	var once sync.Once
	binlog.SetAfterListingTables(t, func() { once.Do(func() { srv.Exec(t, "DROP TABLE d.a") }) })
	p := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	evs := p.waitFor(30*time.Second, "the row of d.b", rowsAtLeast(1))
	if rc := rows(evs)[0]; rc.Table.Name != "b" {
		t.Fatalf("first row of %s.%s, want d.b", rc.Table.Schema, rc.Table.Name)
	}
}
