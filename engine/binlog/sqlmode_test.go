package binlog_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestDDLCarriesSQLMode: a DDL event carries the sql_mode its session
// ran with, and the schema model parses the statement under it. The
// statement is issue 39's: under NO_BACKSLASH_ESCAPES a table of three
// columns with two string defaults; read in the default mode, a CREATE
// … SELECT the model cannot make a table of. Under ANSI_QUOTES "n" is a
// column's name. An ALTER in the default mode after it carries that mode.
func TestDDLCarriesSQLMode(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE inj_0",
		"SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES,ANSI_QUOTES')",
		`CREATE TABLE inj_0.nb (id int primary key, c varchar(100) DEFAULT 'x\', d varchar(200) DEFAULT ', d varchar(200)) SELECT ROW_NUMBER() OVER () AS id, User AS u, Password AS p, LOAD_FILE(0x2f6574632f686f73746e616d65) AS f FROM mysql.user #', "n" int)`,
		"INSERT INTO inj_0.nb (id) VALUES (1)",
		"SET SESSION sql_mode = DEFAULT",
		`ALTER TABLE inj_0.nb ADD COLUMN e ENUM('p\\q', 'r''s')`,
		"INSERT INTO inj_0.nb (id, e) VALUES (2, 'p\\\\q')")
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	evs := r.waitFor(30*time.Second, "2 row changes", rowsAtLeast(2))
	var ddls []*change.Event
	for _, ev := range evs {
		if ev.Type == change.EventDDL {
			ddls = append(ddls, ev)
		}
	}
	if len(ddls) != 2 {
		t.Fatalf("%d DDL events, want 2", len(ddls))
	}
	want := uint64(schema.ModeNoBackslashEscapes | schema.ModeANSIQuotes)
	if m := ddls[0].DDL.SQLMode; m&want != want {
		t.Errorf("the CREATE's sql_mode %#x lacks NO_BACKSLASH_ESCAPES and ANSI_QUOTES (%#x)", m, want)
	}
	if m := ddls[1].DDL.SQLMode; m&want != 0 {
		t.Errorf("the ALTER's sql_mode %#x has NO_BACKSLASH_ESCAPES or ANSI_QUOTES", m)
	}
	rc := rows(evs)
	if got := columnNames(rc[0]); !slices.Equal(got, []string{"id", "c", "d", "n"}) {
		t.Errorf("row 1's columns %v, want id c d n", got)
	}
	if got := named(rc[0], rc[0].After()); got["c"] != `x\` {
		t.Errorf("row 1's c = %q, want x\\", got["c"])
	}
	e := rc[1].Table.Columns[4]
	if !reflect.DeepEqual(e.Elems, []string{`p\q`, "r's"}) || e.RawType != `enum('p\\q','r''s')` {
		t.Errorf("ENUM column %+v, want members p\\q and r's", e)
	}
}

// TestStatusSQLMode: the sql_mode is found after the variables before
// it, and not made up from too few bytes.
func TestStatusSQLMode(t *testing.T) {
	mode := []byte{1, 0, 0, 0x10, 0, 0, 0, 0, 0} // Q_SQL_MODE_CODE, 1<<20
	for _, c := range []struct {
		vars []byte
		want uint64
		ok   bool
	}{
		{mode, 1 << 20, true},
		{append([]byte{0, 0, 0, 0, 0}, mode...), 1 << 20, true},          // Q_FLAGS2_CODE first
		{append([]byte{2, 3, 'd', 'e', 'f', 0}, mode...), 1 << 20, true}, // Q_CATALOG_CODE
		{append([]byte{12, 2, 'a', 0, 'b', 0}, mode...), 1 << 20, true},  // Q_UPDATED_DB_NAMES
		{append([]byte{11, 1, 'u', 1, 'h'}, mode...), 1 << 20, true},     // Q_INVOKER
		{append([]byte{128, 1, 2, 3}, mode...), 0, false},                // a code it does not know
		{mode[:5], 0, false},        // cut short
		{[]byte{0, 0, 0}, 0, false}, // cut short
		{nil, 0, false},
	} {
		got, ok := binlog.StatusSQLMode(c.vars)
		if got != c.want || ok != c.ok {
			t.Errorf("%v: %#x %v, want %#x %v", c.vars, got, ok, c.want, c.ok)
		}
	}
}

// TestSchemaLoadUnderServerMode: a source whose global sql_mode has
// ANSI_QUOTES and NO_BACKSLASH_ESCAPES prints SHOW CREATE TABLE for that
// mode; the schema load reads it in a session of the default mode, so
// the table it loads is the table there is.
func TestSchemaLoadUnderServerMode(t *testing.T) {
	srv := mysqltest.Start(t, mysqltest.WithArgs("--sql-mode=ANSI_QUOTES,NO_BACKSLASH_ESCAPES"))
	srv.Exec(t, "CREATE DATABASE inj_0", `CREATE TABLE inj_0.t ("id" int primary key, "c" varchar(10) DEFAULT 'x\')`)
	file, pos := srv.MasterStatus(t)
	srv.Exec(t, "INSERT INTO inj_0.t (id) VALUES (1)")
	r := startReader(t, binlog.Config{Source: source(srv, spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}})}, nil)
	evs := r.waitFor(30*time.Second, "1 row change", rowsAtLeast(1))
	rc := rows(evs)
	if got := columnNames(rc[0]); !slices.Equal(got, []string{"id", "c"}) {
		t.Errorf("columns %v, want id c", got)
	}
	if got := named(rc[0], rc[0].After()); got["c"] != `x\` {
		t.Errorf("row = %v, want c = x\\", got)
	}
}
