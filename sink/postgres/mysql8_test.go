package postgres_test

import (
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/spec"
)

// mysql8Spec is a destination of a MySQL test source's shop tables
// into the test's PostgreSQL database, DDL applied.
func mysql8Spec(src *mysqlsource.Server, name string) *spec.Spec {
	ds := spec.Spec{Name: "m8", Tables: []string{`shop\..*`},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: src.Addr(), User: "root", Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "copy", Type: "postgres", Address: targetAddr, Database: name, User: "postgres",
			MetaDatabase: "braid_meta"}}}
	ds = ds.WithDefaults()
	return &ds
}

// TestMySQL8InvisibleColumns: a MySQL 8.4 source's table with an
// INVISIBLE column (created so, and one added so), its collations
// MySQL 8's _0900 ones, is made on PostgreSQL, which has no invisible
// columns, with them as ordinary columns holding the source's values
// (docs/sinks.md); the collations are not PostgreSQL's business.
func TestMySQL8InvisibleColumns(t *testing.T) {
	db, name := targetDB(t)
	items := &mysqlbinlog.TableDef{Schema: "shop", Name: "items", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "code", Type: "varchar(16)", Collation: "utf8mb4_0900_as_cs"},
		{Name: "secret", Type: "int", Default: "'7'", Invisible: true},
	}}
	added := *items
	added.Columns = append(slices.Clone(items.Columns), mysqlbinlog.ColumnDef{Name: "extra", Type: "int", Invisible: true})
	src := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
	if _, err := src.Serve(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: mysqlsource.Version84}, Txns: []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: items}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items", Rows: []mysqlbinlog.Row{{After: []any{1, "A", 10}}}}}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", SQL: "ALTER TABLE items ADD COLUMN extra int /*!80023 INVISIBLE */", Table: &added}},
		{Compressed: true, Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items", Rows: []mysqlbinlog.Row{{After: []any{2, "b", 20, 22}}}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	r, _ := applyOnce(t, mysql8Spec(src, name))
	waitRows(t, 30*time.Second, r, []string{"1 A 10 <nil>", "2 b 20 22"}, func() []string {
		return query(db, "SELECT * FROM shop.items ORDER BY id")
	})
}

// TestMySQL8VectorRefused: a MySQL 9 source's VECTOR column stops the
// sink on a PostgreSQL without pgvector with one line naming the column
// and what to do. Before, the column was made as text and took
// MySQL's VECTOR_TO_STRING text without a word.
func TestMySQL8VectorRefused(t *testing.T) {
	db, name := targetDB(t)
	if got := query(db, "SELECT COUNT(*) FROM pg_type WHERE typname = 'vector'"); !slices.Equal(got, []string{"0"}) {
		t.Skipf("the target on %s has a vector type (pgvector)", targetAddr)
	}
	src := mysqlsource.StartVector(t)
	r, _ := applyOnce(t, mysql8Spec(src, name))
	waitErr(t, r, "DDL refused", `column "shop"."emb"."v" is VECTOR(3), and the target has no vector type: install pgvector`)
	if got := query(db, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = 'emb'"); !slices.Equal(got, []string{"0"}) {
		t.Errorf("the table was made: %v", got)
	}
}
