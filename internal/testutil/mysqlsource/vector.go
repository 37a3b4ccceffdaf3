package mysqlsource

import (
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
)

// StartVector starts a MySQL 9 source whose binlog creates database
// shop and table shop.emb (id INT, the key; v VECTOR(3)) and inserts
// one row (1, [1, 0.5, -2]): what the SQL sinks' tests give a target
// that has no VECTOR type (sink/mysql before MariaDB 11.7, sink/postgres
// without pgvector), which must refuse it naming the column.
func StartVector(tb testing.TB) *Server {
	tb.Helper()
	emb := &mysqlbinlog.TableDef{Schema: "shop", Name: "emb", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "v", Type: "vector(3)"},
	}}
	src := Start(tb, Config{Version: Version9})
	if _, err := src.Serve(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: Version9}, Txns: []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: emb}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.emb", Rows: []mysqlbinlog.Row{{After: []any{1, []float32{1, 0.5, -2}}}}}}},
	}}); err != nil {
		tb.Fatal(err)
	}
	return src
}
