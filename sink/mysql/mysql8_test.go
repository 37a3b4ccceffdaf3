package mysql_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

// mysql8Spec is a destination of a MySQL test source's shop tables
// routed to database name on the machine's MariaDB, its DDL applied.
func mysql8Spec(src *mysqlsource.Server, name string) *spec.Spec {
	ds := spec.Spec{Name: "m8", Tables: []string{`shop\..*`}, Route: []spec.RouteRule{{Match: `shop\.(\w+)`, To: name + ".$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: src.Addr(), User: "root", Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks:     []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta"}}}
	ds = ds.WithDefaults()
	return &ds
}

// TestMySQL8CollationsAndInvisible: a MySQL 8.4 source's table, created
// with MySQL 8's collations (the default utf8mb4_0900_ai_ci, and
// as_cs, Swedish, Japanese and binary _0900 ones) and an INVISIBLE
// column with a default, then altered (a column added INVISIBLE, the
// first made VISIBLE), is made on the MariaDB 10.11 target with
// MariaDB's UCA 14.0.0 NO PAD collations of the same locale and
// strength (the Japanese one, which MariaDB lacks, at the root's), its
// invisible columns invisible, the first one's default kept, and every
// row. Before, the target refused the CREATE (unknown collation
// utf8mb4_0900_ai_ci) and the sink retried it for ever; invisible
// columns became visible, and SET VISIBLE dropped the column's default.
func TestMySQL8CollationsAndInvisible(t *testing.T) {
	db, name := targetDB(t)
	var has int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE FULL_COLLATION_NAME = 'utf8mb4_uca1400_nopad_ai_ci'").Scan(&has); err != nil || has == 0 {
		t.Skipf("the target on %s has no UCA 14.0.0 collations (MariaDB 10.10+): %v", targetAddr, err)
	}
	items := &mysqlbinlog.TableDef{Schema: "shop", Name: "items", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "name", Type: "varchar(32)"},
		{Name: "code", Type: "varchar(16)", Collation: "utf8mb4_0900_as_cs"},
		{Name: "sv", Type: "varchar(16)", Collation: "utf8mb4_sv_0900_ai_ci"},
		{Name: "ja", Type: "varchar(16)", Collation: "utf8mb4_ja_0900_as_cs"},
		{Name: "raw", Type: "varchar(16)", Collation: "utf8mb4_0900_bin"},
		{Name: "secret", Type: "int", Default: "'7'", Invisible: true},
	}}
	added := *items
	added.Columns = append(slices.Clone(items.Columns), mysqlbinlog.ColumnDef{Name: "extra", Type: "int", Invisible: true})
	visible := added
	visible.Columns = slices.Clone(added.Columns)
	visible.Columns[6].Invisible = false
	row := func(id int, extra ...any) mysqlbinlog.Row {
		r := []any{id, fmt.Sprintf("Ångström %d", id), fmt.Sprintf("Code-%d", id), "Åsa", "ひらがな", "raw", id * 10}
		return mysqlbinlog.Row{After: append(r, extra...)}
	}
	src := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
	if _, err := src.Serve(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: mysqlsource.Version84}, Txns: []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: items}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items", Rows: []mysqlbinlog.Row{row(1), row(2)}}}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", SQL: "ALTER TABLE items ADD COLUMN extra int /*!80023 INVISIBLE */", Table: &added}},
		{Compressed: true, Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items", Rows: []mysqlbinlog.Row{row(3, 33)}}}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", SQL: "ALTER TABLE items ALTER COLUMN secret SET VISIBLE", Table: &visible}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items", Rows: []mysqlbinlog.Row{row(4, 44)}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	r := applyOnce(t, mysql8Spec(src, name))
	want := []string{"1 Ångström 1 Code-1 Åsa ひらがな raw 10 NULL", "2 Ångström 2 Code-2 Åsa ひらがな raw 20 NULL",
		"3 Ångström 3 Code-3 Åsa ひらがな raw 30 33", "4 Ångström 4 Code-4 Åsa ひらがな raw 40 44"}
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := sinktest.Query(db, "SELECT id, name, code, sv, ja, raw, secret, extra FROM "+name+".items ORDER BY id")
		_, lastErr := r.Applied()
		return slices.Equal(got, want), fmt.Sprintf("target rows %q, want %q; sink error %q", got, want, lastErr)
	})
	got := sinktest.Query(db, "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = '"+name+"' AND TABLE_NAME = 'items'")
	if !slices.Equal(got, []string{"utf8mb4_uca1400_nopad_ai_ci"}) {
		t.Errorf("table collation %q, want utf8mb4_uca1400_nopad_ai_ci", got)
	}
	got = sinktest.Query(db, "SELECT CONCAT_WS('|', COLUMN_NAME, COALESCE(COLLATION_NAME, '-'), COALESCE(COLUMN_DEFAULT, '-'), EXTRA) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '"+name+"' AND TABLE_NAME = 'items' ORDER BY ORDINAL_POSITION")
	want = []string{"id|-|-|", "name|utf8mb4_uca1400_nopad_ai_ci|NULL|", "code|utf8mb4_uca1400_nopad_as_cs|NULL|",
		"sv|utf8mb4_uca1400_swedish_nopad_ai_ci|NULL|", "ja|utf8mb4_uca1400_nopad_as_cs|NULL|", "raw|utf8mb4_nopad_bin|NULL|",
		"secret|-|7|INVISIBLE", "extra|-|NULL|INVISIBLE"}
	slices.Sort(want) // as sinktest.Query sorts
	if !slices.Equal(got, want) {
		t.Errorf("target columns (name|collation|default|extra):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMySQL8VectorRefused: a MySQL 9 source's table with a VECTOR
// column stops the sink on a MariaDB target before 11.7 with one line
// naming the column and what to do; before, the target's syntax error
// was retried for ever.
func TestMySQL8VectorRefused(t *testing.T) {
	db, name := targetDB(t)
	var version string
	if err := db.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil || major > 11 || major == 11 && minor >= 7 {
		t.Skipf("the target on %s is %s, which has VECTOR", targetAddr, version)
	}
	src := mysqlsource.StartVector(t)
	r := applyOnce(t, mysql8Spec(src, name))
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		_, lastErr := r.Applied()
		return strings.Contains(lastErr, "DDL refused") && strings.Contains(lastErr, "column "+name+".emb.v is VECTOR(3)") &&
			strings.Contains(lastErr, "has no VECTOR type (MariaDB has it from 11.7)") && !strings.Contains(lastErr, "\n"), fmt.Sprintf("sink error %q", lastErr)
	})
}
