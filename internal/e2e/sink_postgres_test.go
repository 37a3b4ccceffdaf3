package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/internal/testutil/sinktest"
)

// pgAuditedTarget is a database of the machine's PostgreSQL (dropped
// after the test) with a table shop.orders whose trigger appends each
// application of a row (an INSERT, or an upsert that updates) to
// shop.applied. The crash tests of sink_test.go run against it.
type pgAuditedTarget struct {
	db   *pgx.Conn
	name string
}

var _ auditedDB = (*pgAuditedTarget)(nil)

func newPGAuditedTarget(t *testing.T, columns string) *pgAuditedTarget {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses PostgreSQL on 127.0.0.1:5432")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres")
	if err != nil {
		t.Skipf("no PostgreSQL on 127.0.0.1:5432 to apply to: %v", err)
	}
	name := fmt.Sprintf("braid_sink_%d_%d", os.Getpid(), rand.IntN(1e6))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close(ctx)
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	for _, q := range []string{
		"CREATE SCHEMA shop",
		"CREATE TABLE shop.orders " + columns,
		"CREATE TABLE shop.applied (id bigint NOT NULL, n integer NOT NULL)",
		"CREATE FUNCTION shop.count_applied() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO shop.applied VALUES (NEW.id, 1); RETURN NEW; END $$",
		"CREATE TRIGGER counted AFTER INSERT OR UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.count_applied()",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	return &pgAuditedTarget{db: db, name: name}
}

func (a *pgAuditedTarget) sinkYAML() string {
	return fmt.Sprintf("{name: copy, type: postgres, address: '127.0.0.1:5432', database: %s, workers: 4, batch: 20}", a.name)
}

func (a *pgAuditedTarget) orders() string { return "shop.orders" }

func (a *pgAuditedTarget) audit() (int, []string) { return tableAudit(a.read, "shop.applied") }

func (a *pgAuditedTarget) read(q string) []string {
	return sinktest.Values(a.db.Query(context.Background(), q))
}
