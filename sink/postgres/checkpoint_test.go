package postgres_test

import (
	"context"
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

// TestWorkersKept: the checkpoints remember how many workers wrote them
// and how they split the keys; a sink opened with another count refuses
// to start, naming both, since a key's worker depends on the count. A
// new sink routes by key range; one whose checkpoints braid wrote before
// it kept the routing goes on by key hash, as they were written.
func TestWorkersKept(t *testing.T) {
	db, name := targetDB(t)
	ctx := context.Background()
	sk := spec.Sink{Name: "w", Type: "postgres", Address: targetAddr, Database: name, User: "postgres", Workers: 4, MetaDatabase: "braid_meta"}
	tg, err := postgres.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	for _, c := range []struct {
		n    int
		want string
	}{{4, ""}, {8, "written by 4 workers, the spec has 8"}, {2, "written by 4 workers, the spec has 2"}, {4, ""}} {
		_, err := tg.Checkpoints(ctx, c.n)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%d workers: %v, want %q", c.n, err, c.want)
		}
	}
	if r := tg.Routing(); r != sink.RouteByRange {
		t.Errorf("a new sink routes %d, want by range", r)
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
