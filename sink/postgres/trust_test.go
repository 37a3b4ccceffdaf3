package postgres_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// nasty are the literals PostgreSQL text can hold.
var nasty = sinktest.NoNUL(sinktest.Nasty)

// TestLiteralsOnServer: every literal braid writes into PostgreSQL text
// reads back as its bytes, whatever standard_conforming_strings is.
func TestLiteralsOnServer(t *testing.T) {
	db, _ := targetDB(t)
	for _, conforming := range []string{"on", "off"} {
		if _, err := db.Exec(t.Context(), "SET standard_conforming_strings = "+conforming); err != nil {
			t.Fatal(err)
		}
		for _, s := range append(nasty, sinktest.Mixed(t, nasty, 300)...) {
			var got string
			if err := db.QueryRow(t.Context(), "SELECT "+postgres.QuoteLiteral(s)+"::text").Scan(&got); err != nil {
				t.Errorf("standard_conforming_strings %s: SELECT %s: %v", conforming, postgres.QuoteLiteral(s), err)
				continue
			}
			if got != s {
				t.Errorf("standard_conforming_strings %s: SELECT %s returned %q, want %q", conforming, postgres.QuoteLiteral(s), got, s)
			}
		}
	}
}

// TestDDLTrust: the attacks against the PostgreSQL sink, through the
// runner. Attack 1 under its own mode is a table with the source's two
// defaults, byte for byte; attack 2's table comes from row metadata and
// never from the DDL (which the model cannot parse); a DROP of a
// selected table and one the destination does not have stops the sink
// with one line naming the DDL, and drops neither.
func TestDDLTrust(t *testing.T) {
	db, name := targetDB(t)
	ctx := t.Context()
	if _, err := db.Exec(ctx, "CREATE SCHEMA other; CREATE TABLE other.victim (id int primary key); INSERT INTO other.victim VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	srv := mysqltest.Start(t, mysqltest.WithArgs("--binlog-row-metadata=FULL"))
	srv.Exec(t, "CREATE DATABASE inj_0", "CREATE DATABASE other", "CREATE TABLE other.victim (id int primary key)")
	ds := spec.Spec{Name: "inj", Tables: []string{`inj_0\..*`}, Route: []spec.RouteRule{{Match: `inj_0\.(\w+)`, To: "inj.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks:     []spec.Sink{{Name: "copy", Type: "postgres", Address: targetAddr, Database: name, Workers: 2, Batch: 10}}}
	ds = ds.WithDefaults()
	sk := ds.Sinks[0]
	log := testLogger(t, slog.LevelError)
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{sink.ClientID("copy"): nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	target, err := sinkrun.Open(ctx, sk, ds.Name, log)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	r := startRunner(ctx, p, target, &ds, sk, &group.FileStore{Dir: t.TempDir()}, log)
	defer func() { r.stop() }()

	srv.Exec(t, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')", sinktest.AttackNoBackslash, "INSERT INTO inj_0.nb (id) VALUES (1)")
	want := []string{"1 x\\ , d varchar(200)) SELECT ROW_NUMBER() OVER () AS id, User AS u, Password AS p, LOAD_FILE(0x2f6574632f686f73746e616d65) AS f FROM mysql.user #"}
	waitRows(t, 30*time.Second, r.r, want, func() []string { return query(db, "SELECT id, c, d FROM inj.nb") })
	if got := query(db, "SELECT column_name FROM information_schema.columns WHERE table_schema = 'inj' AND table_name = 'nb'"); !slices.Equal(got, []string{"c", "d", "id"}) {
		t.Errorf("target table inj.nb has columns %q, want id, c, d", got)
	}
	// A default an ALTER adds under the same mode is the source's, byte
	// for byte (a CREATE's defaults do not reach PostgreSQL).
	srv.Exec(t, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')", `ALTER TABLE inj_0.nb ADD COLUMN n varchar(50) DEFAULT 'a\'' $$ E''x'`)
	srcDefault := srv.Query(t, "SELECT DEFAULT(n) FROM inj_0.nb")
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := query(db, "SELECT column_name FROM information_schema.columns WHERE table_schema = 'inj' AND table_name = 'nb' AND column_name = 'n'")
		_, lastErr := r.r.Applied()
		return len(got) == 1, fmt.Sprintf("no column n on the target; sink error %q", lastErr)
	})
	if _, err := db.Exec(ctx, "INSERT INTO inj.nb (id) VALUES (99)"); err != nil {
		t.Fatal(err)
	}
	if got := query(db, "SELECT n FROM inj.nb WHERE id = 99"); len(srcDefault) != 1 || !slices.Equal(got, srcDefault[0]) || srcDefault[0][0] != `a\' $$ E'x` {
		t.Errorf("target default %q, want the source's %q", got, srcDefault)
	}
	db.Exec(ctx, "DELETE FROM inj.nb WHERE id = 99")

	srv.Exec(t, "SET SESSION sql_mode = DEFAULT", sinktest.AttackEnum, `INSERT INTO inj_0.fm1 (id, e) VALUES (1, 'a\\')`)
	// The model could not parse the CREATE: no DDL reaches the sink, and
	// without create_tables the missing table stops it.
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		_, lastErr := r.r.Applied()
		return strings.Contains(lastErr, "fm1"), fmt.Sprintf("sink error %q", lastErr)
	})
	r.stop()
	skipped := spec.Sink{Name: "copy", Type: "postgres", Address: targetAddr, Database: name, Workers: 2, Batch: 10, CreateTables: true}
	skipped = (&spec.Spec{Sinks: []spec.Sink{skipped}}).WithDefaults().Sinks[0]
	target2, err := sinkrun.Open(ctx, skipped, ds.Name, log)
	if err != nil {
		t.Fatal(err)
	}
	defer target2.Close()
	r = startRunner(ctx, p, target2, &ds, skipped, &group.FileStore{Dir: t.TempDir()}, log)
	waitRows(t, 30*time.Second, r.r, []string{`1 a\`}, func() []string { return query(db, "SELECT id, e FROM inj.fm1") })

	srv.Exec(t, "DROP TABLE IF EXISTS inj_0.nb, other.victim")
	var lastErr string
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		_, lastErr = r.r.Applied()
		return strings.Contains(lastErr, "DROP TABLE"), fmt.Sprintf("sink error %q", lastErr)
	})
	for _, want := range []string{"DDL refused at seq", "other.victim", "ddl: ignore"} {
		if !strings.Contains(lastErr, want) {
			t.Errorf("sink error %q does not say %q", lastErr, want)
		}
	}
	if got := query(db, "SELECT id FROM other.victim"); !slices.Equal(got, []string{"7"}) {
		t.Errorf("other.victim holds %q after the refused DDL", got)
	}
	if got := query(db, "SELECT id FROM inj.nb"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("inj.nb holds %q after the refused DDL", got)
	}
	for _, table := range query(db, "SELECT table_schema || '.' || table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')") {
		for _, col := range query(db, "SELECT column_name FROM information_schema.columns WHERE table_schema || '.' || table_name = '"+table+"'") {
			if slices.Contains([]string{"u", "p", "f", "stolen_user", "stolen_pw"}, col) {
				t.Errorf("target table %s has column %s of an attack's SELECT", table, col)
			}
		}
	}
}

// TestCreateTablesAlterFirst: with create_tables the target table is
// made at the table's first row; an ALTER before any row (the table's
// CREATE older than the stream) finds no target table. The sink makes
// it then from the stream's version after the ALTER, and goes on; before
// the fix it retried the ALTER for ever.
func TestCreateTablesAlterFirst(t *testing.T) {
	db, name := targetDB(t)
	ctx := t.Context()
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE inj_0", "CREATE TABLE inj_0.old (id INT PRIMARY KEY, a VARCHAR(10))")
	file, pos := srv.MasterStatus(t)
	srv.Exec(t, "ALTER TABLE inj_0.old ADD COLUMN b INT NOT NULL DEFAULT 5", "INSERT INTO inj_0.old VALUES (1, 'x', 7)")
	ds := spec.Spec{Name: "inj", Tables: []string{`inj_0\..*`}, Route: []spec.RouteRule{{Match: `inj_0\.(\w+)`, To: "inj.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}}},
		Sinks:     []spec.Sink{{Name: "copy", Type: "postgres", Address: targetAddr, Database: name, Workers: 2, Batch: 10, CreateTables: true}}}
	ds = ds.WithDefaults()
	sk := ds.Sinks[0]
	log := testLogger(t, slog.LevelError)
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{sink.ClientID("copy"): nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	target, err := sinkrun.Open(ctx, sk, ds.Name, log)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	r := startRunner(ctx, p, target, &ds, sk, &group.FileStore{Dir: t.TempDir()}, log)
	defer func() { r.stop() }()
	waitRows(t, 30*time.Second, r.r, []string{"1 x 7"}, func() []string { return query(db, "SELECT id, a, b FROM inj.old") })
}
