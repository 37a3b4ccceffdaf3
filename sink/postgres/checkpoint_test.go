package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/postgres"
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

// TestUserWhoOnlyWrites: once a sink has made its checkpoint table and
// function, another user with only the rights to use them (no CREATE, not
// their owner) opens a sink on them and reads its checkpoints; given
// CREATE on a target schema, not on the database, it creates tables in it.
func TestUserWhoOnlyWrites(t *testing.T) {
	db, name := targetDB(t)
	ctx := context.Background()
	sk := spec.Sink{Name: "w", Type: "postgres", Address: targetAddr, Database: name, User: "postgres", Workers: 2, MetaDatabase: "braid_meta"}
	first, err := postgres.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	role := name + "_writer"
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"GRANT USAGE ON SCHEMA braid_meta TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON braid_meta.sink_checkpoint TO " + role,
		"GRANT EXECUTE ON FUNCTION braid_meta.sink_advance TO " + role,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	t.Cleanup(func() {
		db.Exec(ctx, "DROP OWNED BY "+role)
		db.Exec(ctx, "DROP ROLE "+role)
	})
	sk.User = role
	second, err := postgres.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatalf("a user who may only write the checkpoints: %v", err)
	}
	defer second.Close()
	if _, err := second.Checkpoints(ctx, 2); err != nil {
		t.Fatal(err)
	}

	// The same user, given CREATE on a target schema made for it (not
	// on the database), creates a table there as a CREATE TABLE in the
	// stream, or create_tables, does.
	if _, err := db.Exec(ctx, "CREATE SCHEMA target; GRANT USAGE, CREATE ON SCHEMA target TO "+role); err != nil {
		t.Fatal(err)
	}
	as, err := pgx.Connect(ctx, "postgres://"+role+"@"+targetAddr+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close(ctx)
	stmts, err := postgres.TranslateDDL(sk, "CREATE TABLE `target`.`t` (id INT PRIMARY KEY)")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := as.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
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
	ctx := context.Background()
	sk := spec.Sink{Name: "w", Type: "postgres", Address: targetAddr, Database: name, User: "postgres", Workers: 4, MetaDatabase: "braid_meta"}
	tg, err := postgres.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if _, err := tg.Checkpoints(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if r := tg.Routing(); r != sink.RouteByWideRange {
		t.Errorf("a new sink routes %d, want by wide range", r)
	}
	// Its count row, which holds the routing above the count, reads back.
	again, err := postgres.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Checkpoints(ctx, 4); err != nil || again.Routing() != sink.RouteByWideRange {
		t.Errorf("the new sink opened again: %v, routing %d; want by wide range", err, again.Routing())
	}
	// An older braid's checkpoints: worker rows, no count, no
	// destination (Open migrates the table; Checkpoints adopts them).
	for _, q := range []string{
		"DROP TABLE braid_meta.sink_checkpoint",
		"CREATE TABLE braid_meta.sink_checkpoint (sink text NOT NULL, worker integer NOT NULL, seq bigint NOT NULL, idx integer NOT NULL, PRIMARY KEY (sink, worker))",
		"INSERT INTO braid_meta.sink_checkpoint VALUES ('old', 0, 5, 1), ('old', 2, 7, 0)",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	sk.Name = "old"
	old, err := postgres.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for range 2 {
		if pts, err := old.Checkpoints(ctx, 4); err != nil || pts[2].Seq != 7 || old.Routing() != sink.RouteByKey {
			t.Errorf("older checkpoints: %v, %v, routing %d: want worker 2 at seq 7, by key", pts, err, old.Routing())
		}
	}
}

// TestOlderCheckpointsAdopted: a checkpoint table an older braid made,
// keyed by sink name alone (and its sink_advance), is migrated when a
// sink opens it. Its rows go to the first destination that reads a sink
// of their name, as no other has rows under it; another destination's
// sink of that name starts with none.
// An older braid's insert, without a destination, now fails. When rows
// without a destination turn up beside a destination's own, the sink
// reads neither and says how to settle it, and does what it said.
func TestOlderCheckpointsAdopted(t *testing.T) {
	db, name := targetDB(t)
	ctx := context.Background()
	for _, q := range []string{
		"CREATE SCHEMA braid_meta",
		"CREATE TABLE braid_meta.sink_checkpoint (sink text NOT NULL, worker integer NOT NULL, seq bigint NOT NULL, idx integer NOT NULL, PRIMARY KEY (sink, worker))",
		"CREATE FUNCTION braid_meta.sink_advance(p_sink text, p_worker integer, p_first_seq bigint, p_first_idx integer, p_last_seq bigint, p_last_idx integer) RETURNS void LANGUAGE sql AS 'SELECT 1'",
		"INSERT INTO braid_meta.sink_checkpoint VALUES ('copy', 0, 5, 1), ('copy', 1, 9, 0), ('copy', -1, 2, 0), ('other', 0, 3, 0)",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	sk := spec.Sink{Name: "copy", Type: "postgres", Address: targetAddr, Database: name, User: "postgres", Workers: 2, MetaDatabase: "braid_meta"}
	open := func(dest string) *postgres.Target {
		tg, err := postgres.Open(ctx, sk, dest, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tg.Close() })
		return tg
	}
	east, west := open("east"), open("west")
	if pts, err := east.Checkpoints(ctx, 2); err != nil || pts[0] != (sink.Point{Seq: 5, Idx: 1}) || pts[1] != (sink.Point{Seq: 9}) || east.Routing() != sink.RouteByKey {
		t.Errorf("east adopts the older checkpoints: %v, %v, routing %d", pts, err, east.Routing())
	}
	if pts, err := west.Checkpoints(ctx, 2); err != nil || pts[0] != (sink.Point{}) || pts[1] != (sink.Point{}) {
		t.Errorf("west, opened after: %v, %v, want none", pts, err)
	}
	if got := query(db, "SELECT dest, sink, worker, seq FROM braid_meta.sink_checkpoint WHERE worker >= 0"); strings.Join(got, ", ") != " other 0 3, east copy 0 5, east copy 1 9" {
		t.Errorf("the checkpoint rows: %q", got)
	}
	if got := query(db, "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'braid_meta.sink_checkpoint'::regclass AND contype = 'p'"); len(got) != 1 || got[0] != "PRIMARY KEY (dest, sink, worker)" {
		t.Errorf("the primary key: %q", got)
	}
	if _, err := db.Exec(ctx, "INSERT INTO braid_meta.sink_checkpoint (sink, worker, seq, idx) VALUES ('copy', 3, 1, 0)"); err == nil {
		t.Error("an older braid's insert, without a destination, went in")
	}
	if got := query(db, "SELECT count(*) FROM pg_proc WHERE proname = 'sink_advance'"); len(got) != 1 || got[0] != "1" {
		t.Errorf("sink_advance functions: %q, want this braid's alone", got)
	}

	if _, err := db.Exec(ctx, "INSERT INTO braid_meta.sink_checkpoint (dest, sink, worker, seq, idx) VALUES ('', 'copy', 0, 100, 0)"); err != nil {
		t.Fatal(err)
	}
	_, err := east.Checkpoints(ctx, 2)
	if err == nil || !strings.Contains(err.Error(), "whose the old ones are is unknown") {
		t.Fatalf("rows without a destination beside east's and west's: %v", err)
	}
	t.Log(err)
	// As the line says, for rows that are not east's.
	del := err.Error()[strings.LastIndex(err.Error(), "DELETE FROM"):]
	if _, err := db.Exec(ctx, del); err != nil {
		t.Fatal(del, err)
	}
	if pts, err := east.Checkpoints(ctx, 2); err != nil || pts[1] != (sink.Point{Seq: 9}) {
		t.Errorf("after %s: %v, %v", del, pts, err)
	}
}

// TestMigrationRace: sinks of several destinations that open an older
// checkpoint table at once (a node starting them all) all open it, and
// it ends migrated once, its older rows adopted by one of them.
func TestMigrationRace(t *testing.T) {
	db, name := targetDB(t)
	ctx := context.Background()
	for _, q := range []string{
		"CREATE SCHEMA braid_meta",
		"CREATE TABLE braid_meta.sink_checkpoint (sink text NOT NULL, worker integer NOT NULL, seq bigint NOT NULL, idx integer NOT NULL, PRIMARY KEY (sink, worker))",
		"INSERT INTO braid_meta.sink_checkpoint VALUES ('copy', 0, 5, 1)",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	errs := make(chan error, 6)
	for i := range cap(errs) {
		go func() {
			sk := spec.Sink{Name: "copy", Type: "postgres", Address: targetAddr, Database: name, User: "postgres", Workers: 1, MetaDatabase: "braid_meta"}
			tg, err := postgres.Open(ctx, sk, fmt.Sprintf("d%d", i), nil)
			if err == nil {
				_, err = tg.Checkpoints(ctx, 1)
				tg.Close()
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := query(db, "SELECT count(*) FROM braid_meta.sink_checkpoint WHERE worker = 0 AND seq = 5 AND dest <> ''"); len(got) != 1 || got[0] != "1" {
		t.Errorf("the older row went to %q destinations, want 1", got)
	}
}
