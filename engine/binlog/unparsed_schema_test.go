package binlog_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// unparsedTables are tables whose SHOW CREATE TABLE the schema model
// cannot read (MariaDB's PERIOD FOR, WITHOUT OVERLAPS, ROW START columns)
// or reads only when quoting is exact (ENUM and SET members with quotes
// and backslashes, one of them a SELECT that must never run anywhere).
var unparsedTables = []struct{ name, create string }{
	{"period", `CREATE TABLE d.period (id int primary key, e enum('a\\', ')) SELECT 1 AS id, NULL AS e, User AS stolen_user, Password AS stolen_pw FROM mysql.user #', 'it''s'), d date default '2000-01-01', d2 date default '2001-01-01', PERIOD FOR p(d, d2))`},
	{"overlaps", `CREATE TABLE d.overlaps (id int, v varchar(20) CHARACTER SET latin1, s date, e date, PERIOD FOR p(s, e), PRIMARY KEY (id, p WITHOUT OVERLAPS))`},
	{"enumq", `CREATE TABLE d.enumq (id int primary key, e enum('it''s', 'a\\', 'q"x', 'b\\''c'), s set('x''y', 'z\\'))`},
	{"versioned", `CREATE TABLE d.versioned (id int primary key, v varchar(10), rs TIMESTAMP(6) GENERATED ALWAYS AS ROW START INVISIBLE, re TIMESTAMP(6) GENERATED ALWAYS AS ROW END INVISIBLE, PERIOD FOR SYSTEM_TIME(rs, re)) WITH SYSTEM VERSIONING`},
}

// unparsedRows are the rows written to unparsedTables, before any reader
// starts.
var unparsedRows = []string{
	`INSERT INTO d.period (id, e) VALUES (1, 'a\\'), (2, ')) SELECT 1 AS id, NULL AS e, User AS stolen_user, Password AS stolen_pw FROM mysql.user #'), (3, 'it''s'), (4, NULL)`,
	`INSERT INTO d.overlaps VALUES (1, 'größe', '2020-01-01', '2021-01-01'), (1, 'x', '2021-01-01', '2022-01-01')`,
	`INSERT INTO d.enumq VALUES (1, 'it''s', 'x''y'), (2, 'a\\', 'z\\'), (3, 'q"x', 'x''y,z\\'), (4, 'b\\''c', '')`,
	`INSERT INTO d.versioned (id, v) VALUES (1, 'one'), (2, 'two')`,
}

// TestUnparsedCreateAtStart: tables that exist when the reader starts,
// with rows written before it starts, whose CREATE TABLE the schema model
// cannot parse. Their rows arrive, every value as the source holds it,
// whether the server logs column names (FULL) or not (MINIMAL), and
// whether the binlog read holds the CREATE (earliest) or not (a start
// after it). Before the fix the reader stopped at its start on the first
// such table, and the rows were lost to every table of the source.
func TestUnparsedCreateAtStart(t *testing.T) {
	eachRowMetadata(t, func(t *testing.T, srv *mysqltest.Server) {
		srv.Exec(t, "CREATE DATABASE d")
		for _, tb := range unparsedTables {
			srv.Exec(t, tb.create)
		}
		file, pos := srv.MasterStatus(t)
		srv.Exec(t, unparsedRows...)
		for _, start := range []struct {
			name string
			at   spec.Start
		}{
			{"earliest", earliest},
			{"after the creates", spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}},
		} {
			t.Run(start.name, func(t *testing.T) {
				p := startReader(t, binlog.Config{Source: source(srv, start.at)}, nil)
				want := 0
				for _, tb := range unparsedTables {
					want += len(srv.Query(t, "SELECT * FROM d."+tb.name))
				}
				evs := p.waitFor(30*time.Second, "every row", rowsAtLeast(want))
				sameAsSource(t, srv, evs)
			})
		}
	})
}

// sameAsSource checks that the rows of evs are the source's rows of their
// tables, column by column and byte for byte, each row once.
func sameAsSource(t *testing.T, srv *mysqltest.Server, evs []*change.Event) {
	t.Helper()
	got := map[string][]string{}
	data := flatData(t, evs)
	rcs := rows(evs)
	if len(data) != len(rcs) {
		t.Fatalf("%d flat rows for %d row changes", len(data), len(rcs))
	}
	for i, rc := range rcs {
		var vals []string
		for _, c := range rc.Table.Columns {
			v := flatText(data[i][c.Name])
			if v == "<null>" {
				v = "NULL"
			}
			vals = append(vals, c.Name+"="+v)
		}
		got[rc.Table.FullName()] = append(got[rc.Table.FullName()], strings.Join(vals, "|"))
	}
	for _, tb := range unparsedTables {
		names := srv.Query(t, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = '"+tb.name+"' ORDER BY ORDINAL_POSITION")
		var cols []string
		for _, n := range names {
			cols = append(cols, "`"+n[0]+"`")
		}
		var want []string
		for _, r := range srv.Query(t, "SELECT "+strings.Join(cols, ", ")+" FROM d."+tb.name) {
			var vals []string
			for j, v := range r {
				vals = append(vals, names[j][0]+"="+v)
			}
			want = append(want, strings.Join(vals, "|"))
		}
		g := got["d."+tb.name]
		slices.Sort(g)
		slices.Sort(want)
		if !slices.Equal(g, want) {
			t.Errorf("d.%s: rows\n%q\nwant the source's\n%q", tb.name, g, want)
		}
	}
}

// TestUnmodelledTableStops: a table that exists at the start and that
// braid can model neither from its CREATE TABLE nor from
// information_schema (system versioning with implicit row_start and
// row_end columns, which the binlog rows carry and information_schema
// does not list). With FULL row metadata its rows arrive, named by the
// table maps. Without, the reader still reads the other tables' rows,
// and at the table's first row stops with one line naming the source,
// the table, what could not be parsed and what to do. A reader that
// announces its tables (as group's do: the snapshot copies them, the
// shard-DDL merge counts them) stops at its start, whatever the
// metadata: leaving the table out would lose its rows to the snapshot
// without a word. Before the fix the reader did not load the table (not
// a 'BASE TABLE') and failed at its row with a message that blamed the
// start position.
func TestUnmodelledTableStops(t *testing.T) {
	eachRowMetadata(t, func(t *testing.T, srv *mysqltest.Server) {
		srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.ok (id int primary key)",
			"CREATE TABLE d.sv (id int primary key, v varchar(10)) WITH SYSTEM VERSIONING",
			"INSERT INTO d.ok VALUES (1)", "INSERT INTO d.sv VALUES (1, 'one')")
		t.Run("announced", func(t *testing.T) {
			p := startReader(t, binlog.Config{Source: source(srv, earliest), AnnounceTables: true}, nil)
			oneClearLine(t, p.runErr(30*time.Second), "d.sv", "cannot parse", "VERSIONING", "leave the table out")
			if n := len(p.snapshot()); n != 0 {
				t.Errorf("%d events before the error, want none", n)
			}
		})
		p := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
		p.waitFor(30*time.Second, "d.ok's row", rowsAtLeast(1))
		if strings.Contains(t.Name(), "FULL") {
			evs := p.waitFor(30*time.Second, "d.sv's row", rowsAtLeast(2))
			rc := rows(evs)[1]
			if rc.Table.FullName() != "d.sv" || named(rc, rc.After())["v"] != "one" {
				t.Fatalf("second row of %s: %v, want d.sv's (1, 'one')", rc.Table.FullName(), rc.After())
			}
			return
		}
		oneClearLine(t, p.runErr(30*time.Second), "d.sv", "cannot parse", "VERSIONING", "binlog_row_metadata=FULL")
		if n := len(rows(p.snapshot())); n != 1 {
			t.Errorf("%d rows emitted, want d.ok's one", n)
		}
	})
}

// TestUnparsedCreateWhileReading: a table created while the reader
// reads, by a CREATE TABLE the model cannot parse (implicit system
// versioning). With FULL row metadata its rows arrive; without, its
// first row stops the reader with one line naming the table and the
// DDL that could not be parsed, not blaming the start position as
// before.
func TestUnparsedCreateWhileReading(t *testing.T) {
	eachRowMetadata(t, func(t *testing.T, srv *mysqltest.Server) {
		srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.ok (id int primary key)", "INSERT INTO d.ok VALUES (1)")
		p := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
		// Its row comes after the reader loaded the live schema.
		p.waitFor(30*time.Second, "d.ok's row", rowsAtLeast(1))
		srv.Exec(t, "CREATE TABLE d.sv (id int primary key, v varchar(10)) WITH SYSTEM VERSIONING", "INSERT INTO d.sv VALUES (1, 'one')")
		if strings.Contains(t.Name(), "FULL") {
			evs := p.waitFor(30*time.Second, "d.sv's row", rowsAtLeast(2))
			if rc := rows(evs)[1]; rc.Table.FullName() != "d.sv" || named(rc, rc.After())["v"] != "one" {
				t.Fatalf("second row of %s: %v, want d.sv's (1, 'one')", rc.Table.FullName(), rc.After())
			}
			return
		}
		oneClearLine(t, p.runErr(30*time.Second), "d.sv", "the DDL at", "cannot be parsed", "VERSIONING", "binlog_row_metadata=FULL")
	})
}

// oneClearLine checks a reader's error: it wraps ErrSchemaUnknown, names
// source a and says each of wants, on one line.
func oneClearLine(t *testing.T, err error, wants ...string) {
	t.Helper()
	if !errors.Is(err, binlog.ErrSchemaUnknown) {
		t.Errorf("error %v, want one wrapping ErrSchemaUnknown", err)
	}
	msg := err.Error()
	for _, want := range append([]string{"source a"}, wants...) {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
}

// TestRowMetadataChangedSince: a row written under binlog_row_metadata=
// MINIMAL before a column rename, read by a reader started (after the
// table's CREATE) once the server switched to FULL. Whether a row names
// its columns is its own table map's to say, not the server's setting
// now: the old row has no names and the live schema, renamed since,
// cannot label it, so the reader stops on it naming the rename. Before
// the fix the reader took the server's FULL for every row, never
// settled the live schema, and emitted the old row with the renamed
// column: a silent mislabel.
func TestRowMetadataChangedSince(t *testing.T) {
	srv := mysqltest.Start(t, mysqltest.WithArgs("--binlog-row-metadata=MINIMAL"))
	srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, a int)")
	file, pos := srv.MasterStatus(t)
	srv.Exec(t, "INSERT INTO d.t VALUES (1, 10)", "ALTER TABLE d.t CHANGE a b int", "SET GLOBAL binlog_row_metadata = FULL", "INSERT INTO d.t VALUES (2, 20)")
	p := startReader(t, binlog.Config{Source: source(srv, spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}})}, nil)
	err := p.runErr(30 * time.Second)
	for _, rc := range rows(p.snapshot()) {
		t.Errorf("row emitted: %v", named(rc, rc.After()))
	}
	if !errors.Is(err, binlog.ErrSchemaUnknown) || !strings.Contains(err.Error(), "d.t") {
		t.Errorf("error %v, want one wrapping ErrSchemaUnknown naming d.t", err)
	}
}
