package mysql_test

import (
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

// trustSpec is a destination of inj_0's tables routed to database name,
// with a MySQL sink applying their DDL (or creating tables).
func trustSpec(srv *mysqltest.Server, name string, createTables bool) *spec.Spec {
	ddl := ""
	if createTables {
		ddl = "ignore"
	}
	ds := spec.Spec{Name: "inj", Tables: []string{`inj_0\..*`}, Route: []spec.RouteRule{{Match: `inj_0\.(\w+)`, To: name + ".$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", DDL: ddl,
			CreateTables: createTables}}}
	ds = ds.WithDefaults()
	return &ds
}

// noTrace fails the test if any table of the target's database name (or
// its meta database) has a column the attacks select, or a value that is
// a user name or password hash of the target's mysql.user, or the
// contents of the target host's /etc/hostname.
func noTrace(t *testing.T, db *sql.DB, name string) {
	t.Helper()
	var secrets []string
	for _, r := range sinktest.Query(db, "SELECT User FROM mysql.user UNION SELECT Password FROM mysql.user") {
		if r != "" && r != "NULL" {
			secrets = append(secrets, r)
		}
	}
	if h, err := os.ReadFile("/etc/hostname"); err == nil && strings.TrimSpace(string(h)) != "" {
		secrets = append(secrets, strings.TrimSpace(string(h)))
	}
	if len(secrets) == 0 {
		t.Fatal("found no user of the target's mysql.user to look for")
	}
	tables := sinktest.Query(db, fmt.Sprintf("SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA IN ('%s', '%s_meta')", name, name))
	for _, tbl := range tables {
		s, n, _ := strings.Cut(tbl, ".")
		for _, col := range sinktest.Query(db, fmt.Sprintf("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s' AND TABLE_NAME = '%s'", s, n)) {
			if slices.Contains([]string{"u", "p", "f", "stolen_user", "stolen_pw"}, col) {
				t.Errorf("target table %s has column %s of the attack's SELECT", tbl, col)
			}
		}
		for _, cell := range cells(t, db, "SELECT * FROM `"+s+"`.`"+n+"`") {
			if slices.Contains(secrets, cell) || slices.Contains(secrets, strings.TrimSpace(cell)) {
				t.Errorf("target table %s holds %q, from the target's mysql.user or its host", tbl, cell)
			}
		}
	}
}

// cells returns every value of q's result, NULLs left out.
func cells(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if v.Valid {
				out = append(out, v.String)
			}
		}
	}
	return out
}

// columnsOf returns "name|type|default" of a table's columns, in order,
// from information_schema.COLUMNS (COLUMN_DEFAULT as the server prints it).
func columnsOf(q func(string) []string, schema, table string) []string {
	return q(fmt.Sprintf("SELECT CONCAT(LPAD(ORDINAL_POSITION, 3, '0'), '|', COLUMN_NAME, '|', COLUMN_TYPE, '|', COALESCE(COLUMN_DEFAULT, 'none')) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s' AND TABLE_NAME = '%s'", schema, table))
}

// srvQuery is a query of the shard, its rows as sinktest.Query gives them.
func srvQuery(t *testing.T, srv *mysqltest.Server) func(string) []string {
	return func(q string) []string {
		var out []string
		for _, r := range srv.Query(t, q) {
			out = append(out, strings.Join(r, " "))
		}
		slices.Sort(out)
		return out
	}
}

// TestDDLUnderSourceMode: attack 1. The shard's session runs with
// NO_BACKSLASH_ESCAPES; the sink parses the statement under that mode
// (the Query event carries it), rebuilds it, and the target gets the
// table the source has: the same columns with the same defaults, byte
// for byte, and the source's row, and nothing of the target's mysql.user
// or files anywhere. Before the fix the target ran the shard's text in
// its own mode: a CREATE TABLE … SELECT … FROM mysql.user.
func TestDDLUnderSourceMode(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE inj_0")
	r := applyOnce(t, trustSpec(srv, name, false))
	srv.Exec(t, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')", sinktest.AttackNoBackslash, "INSERT INTO inj_0.nb (id) VALUES (1)")

	src := columnsOf(srvQuery(t, srv), "inj_0", "nb")
	if len(src) != 3 || !strings.HasSuffix(src[1], `|'x\\'`) {
		t.Fatalf("the source's table is not the one the attack meant: %q", src)
	}
	want := []string{"1 x\\ , d varchar(200)) SELECT ROW_NUMBER() OVER () AS id, User AS u, Password AS p, LOAD_FILE(0x2f6574632f686f73746e616d65) AS f FROM mysql.user #"}
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id, c, d FROM "+name+".nb")
		_, lastErr := r.Applied()
		return slices.Equal(got, want), fmt.Sprintf("target rows %q, want %q; sink error %q", got, want, lastErr)
	})
	if got := columnsOf(func(q string) []string { return sinktest.Query(db, q) }, name, "nb"); !slices.Equal(got, src) {
		t.Errorf("target columns\n%q\nwant the source's\n%q", got, src)
	}
	noTrace(t, db, name)
}

// TestEnumMembersFromRowMetadata: attack 2. The schema model cannot parse
// the CREATE (PERIOD FOR), so the table's columns come from FULL row
// metadata, and create_tables makes the target table from them: its ENUM
// has the source's members, byte for byte (one ends in a backslash), the
// SELECT hidden in the other never runs, and the row arrives.
func TestEnumMembersFromRowMetadata(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t, mysqltest.WithArgs("--binlog-row-metadata=FULL"))
	srv.Exec(t, "CREATE DATABASE inj_0")
	r := applyOnce(t, trustSpec(srv, name, true))
	// The reader must be past its start before the attack's CREATE: a
	// table that exists at the start with a CREATE the schema model
	// cannot parse loses its rows today (found here; see the issue).
	srv.Exec(t, "CREATE TABLE inj_0.started (id int primary key)", "INSERT INTO inj_0.started VALUES (1)")
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id FROM "+name+".started")
		return slices.Equal(got, []string{"1"}), fmt.Sprintf("marker rows %q", got)
	})
	srv.Exec(t, sinktest.AttackEnum, `INSERT INTO inj_0.fm1 (id, e) VALUES (1, 'a\\'), (2, ')) SELECT 1 AS id, NULL AS e, User AS stolen_user, Password AS stolen_pw FROM mysql.user #')`)

	src := srvQuery(t, srv)("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'inj_0' AND TABLE_NAME = 'fm1' AND COLUMN_NAME = 'e'")
	want := []string{`1 a\`, "2 )) SELECT 1 AS id, NULL AS e, User AS stolen_user, Password AS stolen_pw FROM mysql.user #"}
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id, e FROM "+name+".fm1")
		_, lastErr := r.Applied()
		return slices.Equal(got, want), fmt.Sprintf("target rows %q, want %q; sink error %q", got, want, lastErr)
	})
	got := sinktest.Query(db, fmt.Sprintf("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s' AND TABLE_NAME = 'fm1' AND COLUMN_NAME = 'e'", name))
	if !slices.Equal(got, src) || len(src) != 1 {
		t.Errorf("target's ENUM is %q, want the source's %q", got, src)
	}
	noTrace(t, db, name)
}

// TestEnumMembersAtStart: attack 2 with the table and its rows there
// before braid starts, so its columns come from the reader's start: the
// CREATE the schema model cannot parse (PERIOD FOR) is read from
// information_schema instead. The rows arrive, the target's ENUM has the
// source's members byte for byte, and the hidden SELECT never runs.
// Before the fix the reader stopped at its start and no row arrived.
func TestEnumMembersAtStart(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t, mysqltest.WithArgs("--binlog-row-metadata=FULL"))
	srv.Exec(t, "CREATE DATABASE inj_0", sinktest.AttackEnum,
		`INSERT INTO inj_0.fm1 (id, e) VALUES (1, 'a\\'), (2, ')) SELECT 1 AS id, NULL AS e, User AS stolen_user, Password AS stolen_pw FROM mysql.user #')`)
	r := applyOnce(t, trustSpec(srv, name, true))

	src := srvQuery(t, srv)("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'inj_0' AND TABLE_NAME = 'fm1' AND COLUMN_NAME = 'e'")
	want := []string{`1 a\`, "2 )) SELECT 1 AS id, NULL AS e, User AS stolen_user, Password AS stolen_pw FROM mysql.user #"}
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id, e FROM "+name+".fm1")
		_, lastErr := r.Applied()
		return slices.Equal(got, want), fmt.Sprintf("target rows %q, want %q; sink error %q", got, want, lastErr)
	})
	got := sinktest.Query(db, fmt.Sprintf("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s' AND TABLE_NAME = 'fm1' AND COLUMN_NAME = 'e'", name))
	if !slices.Equal(got, src) || len(src) != 1 {
		t.Errorf("target's ENUM is %q, want the source's %q", got, src)
	}
	noTrace(t, db, name)
}

// TestDDLNamesOtherTable: a DROP TABLE of a selected shard table and of
// a table the destination does not have stops the sink with one line
// naming the seq and the statement and the way out; neither table is
// dropped on the target (the other one stands for mysql.user). Before
// the fix the target ran it, with the other table's name as written.
func TestDDLNamesOtherTable(t *testing.T) {
	db, name := targetDB(t)
	other := name + "_other"
	t.Cleanup(func() { db.Exec("DROP DATABASE IF EXISTS " + other) })
	for _, q := range []string{"CREATE DATABASE " + other, "CREATE TABLE " + other + ".victim (id INT PRIMARY KEY)", "INSERT INTO " + other + ".victim VALUES (7)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE inj_0", "CREATE TABLE inj_0.t2 (id INT PRIMARY KEY)", "INSERT INTO inj_0.t2 VALUES (1)")
	r := applyOnce(t, trustSpec(srv, name, false))
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id FROM "+name+".t2")
		return slices.Equal(got, []string{"1"}), fmt.Sprintf("target rows %q", got)
	})
	drop := "DROP TABLE IF EXISTS inj_0.t2, " + other + ".victim"
	srv.Exec(t, drop)
	var lastErr string
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		_, lastErr = r.Applied()
		return lastErr != "", "no sink error"
	})
	for _, want := range []string{"DDL refused at seq", other + ".victim", "not one of the destination's tables", "DROP TABLE", "ddl: ignore"} {
		if !strings.Contains(lastErr, want) {
			t.Errorf("sink error %q does not say %q", lastErr, want)
		}
	}
	if strings.Contains(lastErr, "\n") {
		t.Errorf("sink error is not one line: %q", lastErr)
	}
	if got := sinktest.Query(db, "SELECT id FROM "+other+".victim"); !slices.Equal(got, []string{"7"}) {
		t.Errorf("the table the destination does not have holds %q after the DDL, want its row", got)
	}
	if got := sinktest.Query(db, "SELECT id FROM "+name+".t2"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("the refused DDL ran in part: the target table holds %q", got)
	}
}

// TestCreateTablesAlterFirst: with create_tables and DDL applied, the
// target table is made at the table's first row; an ALTER that comes
// before any row (the table's CREATE is older than the stream) finds no
// target table. The sink makes it then, from the stream's version after
// the ALTER, and goes on; before the fix it retried the ALTER for ever.
func TestCreateTablesAlterFirst(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE inj_0", "CREATE TABLE inj_0.old (id INT PRIMARY KEY, a VARCHAR(10))")
	file, pos := srv.MasterStatus(t)
	srv.Exec(t, "ALTER TABLE inj_0.old ADD COLUMN b INT NOT NULL DEFAULT 5", "INSERT INTO inj_0.old VALUES (1, 'x', 7)")
	ds := trustSpec(srv, name, true)
	ds.Sinks[0].DDL = "" // applied
	ds.Sources[0].Start = spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}
	r := applyOnce(t, ds)
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id, a, b FROM "+name+".old")
		_, lastErr := r.Applied()
		return slices.Equal(got, []string{"1 x 7"}), fmt.Sprintf("target rows %q; sink error %q", got, lastErr)
	})
}

// TestDDLOfRoutedTables: a DROP of two routed shard tables drops their
// two target tables, each by its logical name; a table on the target
// named as the second shard table is not the destination's and stays.
// Before, the sink mapped only the DDL's first table through the route
// and took the second's shard name as its target table.
func TestDDLOfRoutedTables(t *testing.T) {
	db, name := targetDB(t)
	shardDB := name + "_shard"
	t.Cleanup(func() { db.Exec("DROP DATABASE IF EXISTS " + shardDB) })
	for _, q := range []string{"CREATE DATABASE " + shardDB, "CREATE TABLE " + shardDB + ".b (id INT PRIMARY KEY)", "INSERT INTO " + shardDB + ".b VALUES (7)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE "+shardDB, "CREATE TABLE "+shardDB+".a (id INT PRIMARY KEY)", "CREATE TABLE "+shardDB+".b (id INT PRIMARY KEY)",
		"INSERT INTO "+shardDB+".a VALUES (1)", "INSERT INTO "+shardDB+".b VALUES (2)")
	ds := spec.Spec{Name: "inj", Tables: []string{shardDB + `\..*`}, Route: []spec.RouteRule{{Match: shardDB + `\.(\w+)`, To: name + ".$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks:     []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta"}}}
	ds = ds.WithDefaults()
	r := applyOnce(t, &ds)
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id FROM "+name+".a UNION ALL SELECT id FROM "+name+".b")
		_, lastErr := r.Applied()
		return slices.Equal(got, []string{"1", "2"}), fmt.Sprintf("target rows %q; sink error %q", got, lastErr)
	})
	srv.Exec(t, "DROP TABLE "+shardDB+".a, "+shardDB+".b")
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, fmt.Sprintf("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%s'", name))
		_, lastErr := r.Applied()
		return len(got) == 0, fmt.Sprintf("target tables %q left; sink error %q", got, lastErr)
	})
	if got := sinktest.Query(db, "SELECT id FROM "+shardDB+".b"); !slices.Equal(got, []string{"7"}) {
		t.Errorf("the target's %s.b, not the destination's, holds %q after the DROP", shardDB, got)
	}
}
