package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
)

// TestCaptureShardDDLAcrossMariaDBAndMySQL: one logical table, shop.orders,
// whose shard tables live on a real MariaDB and on a MySQL 8.4 test
// source, merged with pessimistic shard DDL. Each shard's CREATE TABLE and
// ALTER are written as a schema tool writes them from its server's SHOW
// CREATE TABLE: MariaDB's int(11), LONGTEXT CHECK (json_valid) for JSON
// and utf8mb4_general_ci, MySQL's int, JSON and utf8mb4_0900_ai_ci. They
// are the same table: one CREATE TABLE goes out, the second shard's is
// skipped, the ALTER waits for both shards and goes out once, and no row
// waits for a decision. (Before the comparison learnt these spellings,
// the second CREATE conflicted and held its shard's rows.)
func TestCaptureShardDDLAcrossMariaDBAndMySQL(t *testing.T) {
	maria := mysqltest.Start(t)
	before := time.Now()
	maria.Exec(t, "CREATE DATABASE shop_0",
		"CREATE TABLE shop_0.orders (`id` int(11) NOT NULL, `name` varchar(32) COLLATE utf8mb4_general_ci DEFAULT NULL, "+
			"`doc` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`doc`)), PRIMARY KEY (`id`)) "+
			"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
		`INSERT INTO shop_0.orders VALUES (1, 'maria 1', '{"n": 1}'), (2, 'maria 2', '{"n": 2}')`,
		"ALTER TABLE shop_0.orders ADD COLUMN `note` varchar(16) COLLATE utf8mb4_general_ci DEFAULT NULL, "+
			"ADD COLUMN `extra` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`extra`))",
		`INSERT INTO shop_0.orders VALUES (3, 'maria 3', '{"n": 3}', 'n3', '{"e": 3}')`)
	after := time.Now()

	// The MySQL shard created its table before MariaDB's, and altered it
	// after MariaDB's ALTER: both CREATEs come before both ALTERs.
	orders := &mysqlbinlog.TableDef{Schema: "shop_1", Name: "orders", PrimaryKey: []string{"id"}, Collation: "utf8mb4_0900_ai_ci",
		Columns: []mysqlbinlog.ColumnDef{{Name: "id", Type: "int", NotNull: true}, {Name: "name", Type: "varchar(32)"}, {Name: "doc", Type: "json"}}}
	altered := *orders
	altered.Columns = append(append([]mysqlbinlog.ColumnDef(nil), orders.Columns...),
		mysqlbinlog.ColumnDef{Name: "note", Type: "varchar(16)"}, mysqlbinlog.ColumnDef{Name: "extra", Type: "json"})
	insert := func(at time.Time, row ...any) mysqlbinlog.Txn {
		return mysqlbinlog.Txn{CommitTime: at, Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop_1.orders",
			Rows: []mysqlbinlog.Row{{After: row}}}}}
	}
	start := before.Add(-time.Minute)
	my := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
	if _, err := my.Serve(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: mysqlsource.Version84, Start: start.Add(-time.Minute)}, Txns: []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop_1", CreatesDatabase: true, SQL: "CREATE DATABASE shop_1"}, CommitTime: start},
		{DDL: &mysqlbinlog.DDL{Schema: "shop_1", Table: orders}, CommitTime: start.Add(time.Millisecond)},
		insert(start.Add(2*time.Millisecond), 11, "my 11", `{"n": 11}`),
		insert(start.Add(3*time.Millisecond), 12, "my 12", `{"n": 12}`),
		{DDL: &mysqlbinlog.DDL{Schema: "shop_1", Table: &altered,
			SQL: "ALTER TABLE orders ADD COLUMN `note` varchar(16) COLLATE utf8mb4_0900_ai_ci DEFAULT NULL, ADD COLUMN `extra` json DEFAULT NULL"},
			CommitTime: after},
		insert(after.Add(time.Millisecond), 13, "my 13", `{"n": 13}`, "n13", `{"e": 13}`),
	}}); err != nil {
		t.Fatal(err)
	}

	spec := nodes.WriteSpec(t, fmt.Sprintf(`
name: shop
ordering: strict
shard_ddl: pessimistic
heartbeat: 100ms
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
sources:
  - {name: maria, address: '%s', start: earliest}
  - {name: my84, address: '%s', start: earliest}
`, maria.Addr(), my.Addr()))
	// One CREATE TABLE, three inserts (MariaDB's two rows are one), one
	// ALTER, two inserts; the CREATE DATABASEs select no table.
	const want = 7
	var out, errb bytes.Buffer
	if code := run([]string{"capture", "-f", spec, "--max", fmt.Sprint(want), "--cursor-dir", t.TempDir(), "--timeout", "60s"}, &out, &errb); code != 0 {
		t.Fatalf("capture exited %d: %s", code, errb.String())
	}
	var got []string
	messages := 0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m struct {
			IsDdl          bool
			Type, Database string
			Table, Source  string
			Sql            string
			Data           []map[string]*string
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		if m.IsDdl {
			messages++
			got = append(got, fmt.Sprintf("%s %s.%s", m.Type, m.Database, m.Table))
			continue
		}
		messages++
		for _, d := range m.Data {
			line := fmt.Sprintf("%s %s.%s %s:%s", m.Type, m.Database, m.Table, m.Source, *d["id"])
			if d["note"] != nil {
				line += " note=" + *d["note"] + " extra=" + *d["extra"]
			}
			got = append(got, line)
		}
	}
	if messages != want {
		t.Fatalf("%d messages, want %d:\n%s\nstderr:\n%s", messages, want, strings.Join(got, "\n"), errb.String())
	}
	text := strings.Join(got, "\n")
	for _, w := range []string{
		"INSERT shop.orders my84:11", "INSERT shop.orders my84:12", "INSERT shop.orders maria:1", "INSERT shop.orders maria:2",
		`INSERT shop.orders maria:3 note=n3 extra={"e": 3}`, `INSERT shop.orders my84:13 note=n13 extra={"e": 13}`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("no %q in:\n%s", w, text)
		}
	}
	if n := strings.Count(text, "CREATE shop.orders"); n != 1 {
		t.Errorf("%d CREATE TABLEs of shop.orders, want 1:\n%s", n, text)
	}
	if n := strings.Count(text, "ALTER shop.orders"); n != 1 {
		t.Errorf("%d ALTERs of shop.orders, want 1:\n%s", n, text)
	}
	// The ALTER goes out after every row before it and before every row after it.
	alter := strings.Index(text, "ALTER shop.orders")
	if strings.Index(text, "maria:2") > alter || strings.Index(text, "my84:12") > alter ||
		strings.Index(text, "maria:3") < alter || strings.Index(text, "my84:13") < alter {
		t.Errorf("the ALTER is not between the rows before and after it:\n%s", text)
	}
	if strings.Contains(errb.String(), "conflict") {
		t.Errorf("a conflict was logged:\n%s", errb.String())
	}
}
