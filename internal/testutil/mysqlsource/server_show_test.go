package mysqlsource_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/schema"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
)

// TestShowBinlogEvents: what braid's DDL scan reads: one row per event
// with MySQL's type names, a Query's Info as "use `db`; statement", FROM
// and LIMIT paging, and MySQL's error for an offset inside an event.
func TestShowBinlogEvents(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	c := connect(t, s)
	type row struct {
		pos, end  uint64
		typ, info string
	}
	rows := func(q string) []row {
		t.Helper()
		r := exec(t, c, q)
		var out []row
		for i := range r.RowNumber() {
			pos, _ := r.GetUint(i, 1)
			end, _ := r.GetUint(i, 4)
			if str(r, i, 0) != "binlog.000001" {
				t.Errorf("row %d: Log_name %s", i, str(r, i, 0))
			}
			out = append(out, row{pos, end, str(r, i, 2), str(r, i, 5)})
		}
		return out
	}
	all := rows("SHOW BINLOG EVENTS IN 'binlog.000001'")
	want := []string{
		"Format_desc Server ver: 8.4.3, Binlog ver: 4",
		"Previous_gtids " + sourceUUID + ":1-118",
		"Gtid SET @@SESSION.GTID_NEXT= '" + sourceUUID + ":119'",
		"Query use `shop`; CREATE TABLE t (id int NOT NULL, PRIMARY KEY (id))",
		"Gtid SET @@SESSION.GTID_NEXT= '" + sourceUUID + ":120'",
		"Query BEGIN",
		"Xid COMMIT /* xid=7 */",
		"Rotate binlog.000002;pos=4",
	}
	var got []string
	for i, r := range all {
		got = append(got, r.typ+" "+r.info)
		if i > 0 && r.pos != all[i-1].end {
			t.Errorf("event %d at %d, the one before ends at %d", i, r.pos, all[i-1].end)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || all[0].pos != 4 || all[1].pos != 126 {
		t.Fatalf("SHOW BINLOG EVENTS:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	page := rows(fmt.Sprintf("SHOW BINLOG EVENTS IN 'binlog.000001' FROM %d LIMIT 1, 2", all[2].pos))
	if len(page) != 2 || page[0] != all[3] || page[1] != all[4] {
		t.Errorf("FROM %d LIMIT 1, 2: %v, want %v", all[2].pos, page, all[3:5])
	}
	if _, err := c.Execute("SHOW BINLOG EVENTS IN 'binlog.000001' FROM 5"); err == nil {
		t.Error("an offset inside an event was answered")
	} else if code, msg := myErr(t, err); code != mysql.ER_ERROR_WHEN_EXECUTING_COMMAND || !strings.Contains(msg, "Wrong offset or I/O error") {
		t.Errorf("offset inside an event: %d %s", code, msg)
	}
	if _, err := c.Execute("SHOW BINLOG EVENTS IN 'binlog.000009'"); err == nil {
		t.Error("a missing file was answered")
	} else if _, msg := myErr(t, err); !strings.Contains(msg, "Could not find target log") {
		t.Errorf("missing file: %s", msg)
	}
}

// TestCreateTextSpelling: a table described only by its columns gets
// the SHOW CREATE TABLE text MySQL 8 prints: types without display
// widths, a column collation only where it differs, generated and
// invisible columns in MySQL's own syntax, the table's COLLATE.
func TestCreateTextSpelling(t *testing.T) {
	def := "0"
	tbl := mysqlsource.Table{
		Name: "items",
		Columns: []mysqlsource.Column{
			{Name: "id", Type: "bigint unsigned", Extra: "auto_increment"},
			{Name: "name", Type: "varchar(40)", Collation: "utf8mb4_bin"},
			{Name: "legacy", Type: "varchar(10)", Charset: "latin1", Nullable: true},
			{Name: "qty", Type: "int", Default: &def},
			{Name: "doc", Type: "json", Nullable: true},
			{Name: "total", Type: "int", Nullable: true, Extra: "VIRTUAL GENERATED", Generation: "(`qty` * 2)"},
			{Name: "secret", Type: "int", Nullable: true, Extra: "INVISIBLE"},
		},
		Indexes: []mysqlsource.Index{
			{Name: "PRIMARY", Unique: true, Columns: []mysqlsource.IndexPart{{Column: "id"}}},
			{Name: "name", Unique: true, Columns: []mysqlsource.IndexPart{{Column: "name", Prefix: 10}}},
			{Name: "qty", Columns: []mysqlsource.IndexPart{{Column: "qty"}}},
		},
	}
	want := "CREATE TABLE `items` (\n" +
		"  `id` bigint unsigned NOT NULL AUTO_INCREMENT,\n" +
		"  `name` varchar(40) COLLATE utf8mb4_bin NOT NULL,\n" +
		"  `legacy` varchar(10) CHARACTER SET latin1 COLLATE latin1_swedish_ci DEFAULT NULL,\n" +
		"  `qty` int NOT NULL DEFAULT '0',\n" +
		"  `doc` json,\n" +
		"  `total` int GENERATED ALWAYS AS ((`qty` * 2)) VIRTUAL,\n" +
		"  `secret` int DEFAULT NULL /*!80023 INVISIBLE */,\n" +
		"  PRIMARY KEY (`id`),\n" +
		"  UNIQUE KEY `name` (`name`(10)),\n" +
		"  KEY `qty` (`qty`)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
	if got := tbl.CreateText(mysqlsource.Schema{Name: "shop"}); got != want {
		t.Errorf("CreateText:\n%s\nwant\n%s", got, want)
	}
}

// TestShowVariables: SHOW VARIABLES prints booleans as ON/OFF where
// SELECT @@ prints 1/0, and a session's value where it set one.
func TestShowVariables(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version80)
	c := connect(t, s)
	exec(t, c, "SET SESSION binlog_transaction_compression = ON")
	r := exec(t, c, "SHOW VARIABLES LIKE 'binlog_transaction_compression'")
	if r.RowNumber() != 1 || str(r, 0, 1) != "ON" {
		t.Errorf("session SHOW VARIABLES = %v", r.Values)
	}
	r = exec(t, c, "SHOW GLOBAL VARIABLES LIKE 'binlog_transaction_compression'")
	if r.RowNumber() != 1 || str(r, 0, 1) != "OFF" {
		t.Errorf("SHOW GLOBAL VARIABLES = %v", r.Values)
	}
	r = exec(t, c, "SELECT @@binlog_transaction_compression, @@global.binlog_transaction_compression")
	if str(r, 0, 0) != "1" || str(r, 0, 1) != "0" {
		t.Errorf("SELECT = %v", r.Values)
	}
	if _, err := c.Execute("SET SESSION binlog_row_metadata = FULL"); err == nil {
		t.Error("SET SESSION of a global-only variable succeeded")
	} else if code, _ := myErr(t, err); code != mysql.ER_GLOBAL_VARIABLE {
		t.Errorf("SET SESSION binlog_row_metadata: error %d", code)
	}
	exec(t, c, "SET GLOBAL binlog_row_metadata = FULL")
	if v, _ := s.Variable("binlog_row_metadata"); v != "FULL" {
		t.Errorf("after SET GLOBAL: %s", v)
	}
}

// TestStartupCheckQueries: what a start-up check of a MySQL source asks:
// several settings at once (SHOW VARIABLES WHERE), the GTID state, and
// MariaDB's binlog status statement, a parse error on MySQL.
func TestStartupCheckQueries(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	if err := s.PurgeTo("binlog.000002"); err != nil {
		t.Fatal(err)
	}
	c := connect(t, s)
	r := exec(t, c, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('binlog_row_image', 'gtid_mode', 'binlog_row_value_options') OR Variable_name LIKE 'binlog_transaction_compression'")
	var got []string
	for i := range r.RowNumber() {
		got = append(got, str(r, i, 0)+"="+str(r, i, 1))
	}
	if want := "binlog_row_image=FULL binlog_row_value_options= binlog_transaction_compression=OFF gtid_mode=ON"; strings.Join(got, " ") != want {
		t.Errorf("SHOW GLOBAL VARIABLES WHERE: %q, want %q", strings.Join(got, " "), want)
	}
	r = exec(t, c, "SELECT @@global.gtid_executed, @@global.gtid_purged, @@server_uuid, @@global.enforce_gtid_consistency")
	if got := []string{str(r, 0, 0), str(r, 0, 1), str(r, 0, 2), str(r, 0, 3)}; strings.Join(got, "|") != sourceUUID+":1-121|"+sourceUUID+":1-120|"+sourceUUID+"|ON" {
		t.Errorf("GTID state: %q", got)
	}
	if _, err := c.Execute("SHOW BINLOG STATUS"); err == nil {
		t.Error("SHOW BINLOG STATUS (MariaDB's) answered")
	} else if code, msg := myErr(t, err); code != mysql.ER_PARSE_ERROR || !strings.Contains(msg, "near 'STATUS' at line 1") {
		t.Errorf("SHOW BINLOG STATUS: %d %s", code, msg)
	}
}

// TestGoMySQLSchema: go-mysql's schema package (what its canal reads a
// table's shape with) gets from SHOW FULL COLUMNS and SHOW INDEX the
// columns, their types and collations, the primary key and the keys'
// visibility, as from MySQL 8; the short forms and FROM db work too.
func TestGoMySQLSchema(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	def := "0"
	s.PutTable("shop", mysqlsource.Table{
		Name: "items",
		Columns: []mysqlsource.Column{
			{Name: "id", Type: "bigint unsigned", Extra: "auto_increment"},
			{Name: "name", Type: "varchar(40)", Collation: "utf8mb4_bin"},
			{Name: "qty", Type: "int", Default: &def},
			{Name: "doc", Type: "json", Nullable: true},
			{Name: "secret", Type: "int", Nullable: true, Extra: "INVISIBLE"},
		},
		Indexes: []mysqlsource.Index{
			{Name: "PRIMARY", Unique: true, Columns: []mysqlsource.IndexPart{{Column: "id"}}},
			{Name: "name_qty", Unique: true, Columns: []mysqlsource.IndexPart{{Column: "name", Prefix: 10}, {Column: "qty"}}},
			{Name: "qty", Columns: []mysqlsource.IndexPart{{Column: "qty"}}, Invisible: true},
		},
	})
	c := connect(t, s)
	tbl, err := schema.NewTable(c, "shop", "items")
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, col := range tbl.Columns {
		cols = append(cols, fmt.Sprintf("%s:%d:%s:%v", col.Name, col.Type, col.Collation, col.IsUnsigned))
	}
	want := fmt.Sprintf("id:%d::true name:%d:utf8mb4_bin:false qty:%d::false doc:%d::false secret:%d::false",
		schema.TYPE_NUMBER, schema.TYPE_STRING, schema.TYPE_NUMBER, schema.TYPE_JSON, schema.TYPE_NUMBER)
	if got := strings.Join(cols, " "); got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	if !tbl.Columns[0].IsAuto || len(tbl.PKColumns) != 1 || tbl.PKColumns[0] != 0 {
		t.Errorf("auto increment %v, primary key %v", tbl.Columns[0].IsAuto, tbl.PKColumns)
	}
	var ixs []string
	for _, ix := range tbl.Indexes {
		ixs = append(ixs, fmt.Sprintf("%s%v:%d:%v", ix.Name, ix.Columns, ix.NoneUnique, ix.Visible))
	}
	if got := strings.Join(ixs, " "); got != "PRIMARY[id]:0:true name_qty[name qty]:0:true qty[qty]:1:false" {
		t.Errorf("indexes %s", got)
	}
	r := exec(t, c, "SHOW COLUMNS FROM items FROM shop")
	if r.RowNumber() != 5 || len(r.Fields) != 6 || str(r, 1, 0) != "name" || str(r, 2, 4) != "0" || str(r, 4, 5) != "INVISIBLE" {
		t.Errorf("SHOW COLUMNS FROM items FROM shop: %d rows, %d fields", r.RowNumber(), len(r.Fields))
	}
	r = exec(t, c, "SHOW KEYS IN shop.items")
	if r.RowNumber() != 4 || str(r, 2, 4) != "qty" || str(r, 1, 7) != "10" {
		t.Errorf("SHOW KEYS IN shop.items: %d rows", r.RowNumber())
	}
	if _, err := c.Execute("SHOW INDEX FROM shop.nothing"); err == nil {
		t.Error("SHOW INDEX of a missing table answered")
	} else if code, _ := myErr(t, err); code != mysql.ER_NO_SUCH_TABLE {
		t.Errorf("SHOW INDEX of a missing table: error %d", code)
	}
}
