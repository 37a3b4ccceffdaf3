package schema_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/schema"
)

func schPos(n uint32) change.Position { return change.Position{File: "binlog.000001", Pos: n} }

// schDescribe renders a table's columns as "name rawtype [key] [null]", the
// form the ALTER cases state what they expect in.
func schDescribe(t *change.Table) string {
	if t == nil {
		return "<none>"
	}
	parts := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		s := c.Name + " " + c.RawType
		if c.Key {
			s += " key"
		}
		if c.Nullable {
			s += " null"
		}
		parts[i] = s
	}
	return strings.Join(parts, ", ")
}

// schTracker returns a tracker that knows the tables of creates, loaded at
// position 100 in schema "db".
func schTracker(t *testing.T, creates ...string) *schema.Tracker {
	t.Helper()
	s := schema.NewTracker()
	for _, c := range creates {
		if err := s.LoadCreate(schPos(100), "db", c); err != nil {
			t.Fatalf("LoadCreate(%q): %v", c, err)
		}
	}
	return s
}

// schApply applies DDL events at positions 200, 300, ... and fails on error.
func schApply(t *testing.T, s *schema.Tracker, sqls ...string) {
	t.Helper()
	for i, sql := range sqls {
		if _, err := s.ApplyDDL(schPos(uint32(200+100*i)), "db", sql); err != nil {
			t.Fatalf("ApplyDDL(%q): %v", sql, err)
		}
	}
}

func schWant(t *testing.T, s *schema.Tracker, schema, name, want string) {
	t.Helper()
	tbl, _ := s.Table(schema, name)
	if got := schDescribe(tbl); got != want {
		t.Errorf("%s.%s:\n got  %s\n want %s", schema, name, got, want)
	}
}

// TestSchemaColumnTypes loads one table with every column type and checks
// each column's model, including the types the TiDB parser names otherwise
// (BOOL, REAL, INTEGER, NUMERIC, SERIAL) and the ones it lacks (spatial,
// UUID, INET6).
func TestSchemaColumnTypes(t *testing.T) {
	s := schTracker(t, "CREATE TABLE `all` ("+
		"c_tinyint tinyint, c_utinyint tinyint(3) unsigned, c_bool bool, c_smallint smallint(5) unsigned zerofill,"+
		"c_mediumint mediumint, c_int int NOT NULL, c_uint int(10) unsigned, c_integer integer, c_bigint bigint,"+
		"c_serial serial, c_decimal decimal(30,10), c_numeric numeric, c_udec decimal(5) unsigned,"+
		"c_float float, c_float2 float(7,3), c_float30 float(30), c_double double, c_real real, c_double2 double(10,2),"+
		"c_bit bit, c_bit8 bit(8), c_date date, c_time time, c_time3 time(3), c_datetime datetime, c_datetime6 datetime(6),"+
		"c_timestamp timestamp NULL, c_year year,"+
		"c_char char, c_char10 char(10), c_charbin char(3) binary, c_varchar varchar(255), c_binary binary(16), c_varbinary varbinary(20),"+
		"c_varcharbin varchar(8) CHARACTER SET binary, c_latin varchar(8) CHARACTER SET latin1 COLLATE latin1_swedish_ci,"+
		"c_tinytext tinytext, c_text text, c_mediumtext mediumtext, c_longtext longtext, c_text100 text(100),"+
		"c_tinyblob tinyblob, c_blob blob, c_mediumblob mediumblob, c_longblob longblob, c_textbin text CHARACTER SET binary,"+
		"c_enum enum('a','b','it''s'), c_set set('x','y'), c_json json, c_mjson longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin CHECK (json_valid(`c_mjson`)),"+
		"c_geometry geometry, c_point point NOT NULL, c_polygon polygon, c_uuid uuid, c_inet6 inet6,"+
		"PRIMARY KEY (c_int))")
	tbl, ok := s.Table("db", "all")
	if !ok {
		t.Fatal("table not loaded")
	}
	want := []change.Column{
		{Name: "c_tinyint", Type: "tinyint", RawType: "tinyint(4)", Nullable: true},
		{Name: "c_utinyint", Type: "tinyint", RawType: "tinyint(3) unsigned", Unsigned: true, Nullable: true},
		{Name: "c_bool", Type: "tinyint", RawType: "tinyint(1)", Nullable: true},
		{Name: "c_smallint", Type: "smallint", RawType: "smallint(5) unsigned zerofill", Unsigned: true, Nullable: true},
		{Name: "c_mediumint", Type: "mediumint", RawType: "mediumint(9)", Nullable: true},
		{Name: "c_int", Type: "int", RawType: "int(11)", Key: true},
		{Name: "c_uint", Type: "int", RawType: "int(10) unsigned", Unsigned: true, Nullable: true},
		{Name: "c_integer", Type: "int", RawType: "int(11)", Nullable: true},
		{Name: "c_bigint", Type: "bigint", RawType: "bigint(20)", Nullable: true},
		{Name: "c_serial", Type: "bigint", RawType: "bigint(20) unsigned", Unsigned: true}, // NOT NULL UNIQUE, but the PK is the key
		{Name: "c_decimal", Type: "decimal", RawType: "decimal(30,10)", Nullable: true},
		{Name: "c_numeric", Type: "decimal", RawType: "decimal(10,0)", Nullable: true},
		{Name: "c_udec", Type: "decimal", RawType: "decimal(5,0) unsigned", Unsigned: true, Nullable: true},
		{Name: "c_float", Type: "float", RawType: "float", Nullable: true},
		{Name: "c_float2", Type: "float", RawType: "float(7,3)", Nullable: true},
		{Name: "c_float30", Type: "double", RawType: "double", Nullable: true}, // FLOAT(p>24) is DOUBLE
		{Name: "c_double", Type: "double", RawType: "double", Nullable: true},
		{Name: "c_real", Type: "double", RawType: "double", Nullable: true},
		{Name: "c_double2", Type: "double", RawType: "double(10,2)", Nullable: true},
		{Name: "c_bit", Type: "bit", RawType: "bit(1)", Nullable: true},
		{Name: "c_bit8", Type: "bit", RawType: "bit(8)", Nullable: true},
		{Name: "c_date", Type: "date", RawType: "date", Nullable: true},
		{Name: "c_time", Type: "time", RawType: "time", Nullable: true},
		{Name: "c_time3", Type: "time", RawType: "time(3)", Nullable: true},
		{Name: "c_datetime", Type: "datetime", RawType: "datetime", Nullable: true},
		{Name: "c_datetime6", Type: "datetime", RawType: "datetime(6)", Nullable: true},
		{Name: "c_timestamp", Type: "timestamp", RawType: "timestamp", Nullable: true},
		{Name: "c_year", Type: "year", RawType: "year(4)", Nullable: true},
		{Name: "c_char", Type: "char", RawType: "char(1)", Nullable: true},
		{Name: "c_char10", Type: "char", RawType: "char(10)", Nullable: true},
		{Name: "c_charbin", Type: "char", RawType: "char(3)", Nullable: true}, // BINARY attribute = _bin collation, not bytes
		{Name: "c_varchar", Type: "varchar", RawType: "varchar(255)", Nullable: true},
		{Name: "c_binary", Type: "binary", RawType: "binary(16)", Binary: true, Nullable: true},
		{Name: "c_varbinary", Type: "varbinary", RawType: "varbinary(20)", Binary: true, Nullable: true},
		{Name: "c_varcharbin", Type: "varbinary", RawType: "varbinary(8)", Binary: true, Nullable: true},
		{Name: "c_latin", Type: "varchar", RawType: "varchar(8)", Charset: "latin1", Nullable: true},
		{Name: "c_tinytext", Type: "tinytext", RawType: "tinytext", Nullable: true},
		{Name: "c_text", Type: "text", RawType: "text", Nullable: true},
		{Name: "c_mediumtext", Type: "mediumtext", RawType: "mediumtext", Nullable: true},
		{Name: "c_longtext", Type: "longtext", RawType: "longtext", Nullable: true},
		{Name: "c_text100", Type: "text", RawType: "text", Nullable: true}, // 100 chars of up to 4 bytes > 255
		{Name: "c_tinyblob", Type: "tinyblob", RawType: "tinyblob", Binary: true, Nullable: true},
		{Name: "c_blob", Type: "blob", RawType: "blob", Binary: true, Nullable: true},
		{Name: "c_mediumblob", Type: "mediumblob", RawType: "mediumblob", Binary: true, Nullable: true},
		{Name: "c_longblob", Type: "longblob", RawType: "longblob", Binary: true, Nullable: true},
		{Name: "c_textbin", Type: "blob", RawType: "blob", Binary: true, Nullable: true},
		{Name: "c_enum", Type: "enum", RawType: "enum('a','b','it''s')", Elems: []string{"a", "b", "it's"}, Nullable: true},
		{Name: "c_set", Type: "set", RawType: "set('x','y')", Elems: []string{"x", "y"}, Nullable: true},
		{Name: "c_json", Type: "json", RawType: "json", Nullable: true},
		{Name: "c_mjson", Type: "json", RawType: "json", Nullable: true}, // MariaDB's JSON as SHOW CREATE TABLE prints it
		{Name: "c_geometry", Type: "geometry", RawType: "geometry", Binary: true, Nullable: true},
		{Name: "c_point", Type: "geometry", RawType: "point", Binary: true},
		{Name: "c_polygon", Type: "geometry", RawType: "polygon", Binary: true, Nullable: true},
		{Name: "c_uuid", Type: "uuid", RawType: "uuid", Binary: true, Nullable: true},
		{Name: "c_inet6", Type: "inet6", RawType: "inet6", Binary: true, Nullable: true},
	}
	if len(tbl.Columns) != len(want) {
		t.Fatalf("got %d columns, want %d: %s", len(tbl.Columns), len(want), schDescribe(tbl))
	}
	for i, w := range want {
		if got := tbl.Columns[i]; !reflect.DeepEqual(got, w) {
			t.Errorf("column %d:\n got  %+v\n want %+v", i, got, w)
		}
	}
	if tbl.Schema != "db" || tbl.Name != "all" {
		t.Errorf("table name %s", tbl.FullName())
	}
}

// TestSchemaKeys covers how Column.Key is chosen: the primary key, inline
// or as a constraint; without one, the first UNIQUE index on NOT NULL whole
// columns, as MySQL picks it.
func TestSchemaKeys(t *testing.T) {
	cases := []struct {
		why, create, want string
	}{
		{"inline primary key is NOT NULL", "CREATE TABLE t (id int PRIMARY KEY, a int)",
			"id int(11) key, a int(11) null"},
		{"composite constraint, declared after the columns", "CREATE TABLE t (a int, b int, c int, CONSTRAINT pk PRIMARY KEY (b, a))",
			"a int(11) key, b int(11) key, c int(11) null"},
		{"no primary key: a nullable unique key does not count", "CREATE TABLE t (a int, b int NOT NULL, UNIQUE KEY (a), UNIQUE KEY (b))",
			"a int(11) null, b int(11) key"},
		{"no primary key: the first qualifying unique key", "CREATE TABLE t (a int NOT NULL, b int NOT NULL, UNIQUE KEY ub (b), UNIQUE KEY ua (a))",
			"a int(11), b int(11) key"},
		{"a prefix unique key does not count", "CREATE TABLE t (a varchar(50) NOT NULL, UNIQUE KEY (a(10)))",
			"a varchar(50)"},
		{"inline UNIQUE NOT NULL", "CREATE TABLE t (a int, b int NOT NULL UNIQUE)",
			"a int(11) null, b int(11) key"},
		{"primary key wins over an earlier unique key", "CREATE TABLE t (a int NOT NULL, b int, UNIQUE (a), PRIMARY KEY (b))",
			"a int(11), b int(11) key"},
		{"no key at all", "CREATE TABLE t (a int, KEY (a))",
			"a int(11) null"},
	}
	for _, c := range cases {
		s := schTracker(t, c.create)
		tbl, _ := s.Table("db", "t")
		if got := schDescribe(tbl); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.why, got, c.want)
		}
	}
}

// TestSchemaAlter applies each ALTER TABLE form to the same table.
func TestSchemaAlter(t *testing.T) {
	const base = "CREATE TABLE t (id int NOT NULL, a varchar(10), b int, PRIMARY KEY (id))"
	cases := []struct {
		why, alter, want string
	}{
		{"ADD COLUMN appends", "ALTER TABLE t ADD COLUMN c int NOT NULL",
			"id int(11) key, a varchar(10) null, b int(11) null, c int(11)"},
		{"ADD without COLUMN, FIRST", "ALTER TABLE t ADD c bigint FIRST",
			"c bigint(20) null, id int(11) key, a varchar(10) null, b int(11) null"},
		{"ADD AFTER", "ALTER TABLE t ADD COLUMN c int AFTER id",
			"id int(11) key, c int(11) null, a varchar(10) null, b int(11) null"},
		{"ADD several in parentheses", "ALTER TABLE t ADD COLUMN (c int, d text)",
			"id int(11) key, a varchar(10) null, b int(11) null, c int(11) null, d text null"},
		{"ADD AFTER a column added by the same ALTER", "ALTER TABLE t ADD c int AFTER a, ADD d int AFTER c",
			"id int(11) key, a varchar(10) null, c int(11) null, d int(11) null, b int(11) null"},
		{"DROP COLUMN", "ALTER TABLE t DROP COLUMN a",
			"id int(11) key, b int(11) null"},
		{"DROP without COLUMN", "ALTER TABLE t DROP b",
			"id int(11) key, a varchar(10) null"},
		{"MODIFY changes the type in place", "ALTER TABLE t MODIFY a varchar(100) NOT NULL",
			"id int(11) key, a varchar(100), b int(11) null"},
		{"MODIFY FIRST", "ALTER TABLE t MODIFY COLUMN b int unsigned FIRST",
			"b int(10) unsigned null, id int(11) key, a varchar(10) null"},
		{"MODIFY AFTER", "ALTER TABLE t MODIFY a varchar(10) AFTER b",
			"id int(11) key, b int(11) null, a varchar(10) null"},
		{"column names are case-insensitive", "ALTER TABLE t MODIFY A varchar(20)",
			"id int(11) key, A varchar(20) null, b int(11) null"},
		{"CHANGE renames and retypes", "ALTER TABLE t CHANGE a note text",
			"id int(11) key, note text null, b int(11) null"},
		{"CHANGE a key column keeps it the key", "ALTER TABLE t CHANGE COLUMN id order_id bigint NOT NULL AFTER b",
			"a varchar(10) null, b int(11) null, order_id bigint(20) key"},
		{"RENAME COLUMN", "ALTER TABLE t RENAME COLUMN b TO qty",
			"id int(11) key, a varchar(10) null, qty int(11) null"},
		{"DROP PRIMARY KEY", "ALTER TABLE t DROP PRIMARY KEY",
			"id int(11), a varchar(10) null, b int(11) null"},
		{"replace the primary key; its columns become NOT NULL", "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, b)",
			"id int(11) key, a varchar(10) null, b int(11) key"},
		{"ADD UNIQUE after DROP PRIMARY KEY", "ALTER TABLE t DROP PRIMARY KEY, MODIFY b int NOT NULL, ADD UNIQUE KEY ub (b)",
			"id int(11), a varchar(10) null, b int(11) key"},
		{"ADD COLUMN ... PRIMARY KEY", "ALTER TABLE t DROP PRIMARY KEY, ADD COLUMN k int PRIMARY KEY FIRST",
			"k int(11) key, id int(11), a varchar(10) null, b int(11) null"},
		{"dropping a key column drops it from the key", "ALTER TABLE t ADD c int NOT NULL, DROP PRIMARY KEY, ADD PRIMARY KEY (id, c), DROP COLUMN c",
			"id int(11) key, a varchar(10) null, b int(11) null"},
		{"ALTER COLUMN defaults and table options change nothing",
			"ALTER TABLE t ALTER COLUMN a SET DEFAULT 'x', ALTER COLUMN b DROP DEFAULT, ENGINE=InnoDB, DEFAULT CHARSET=utf8mb4, COMMENT='c', ALGORITHM=INPLACE, LOCK=NONE",
			"id int(11) key, a varchar(10) null, b int(11) null"},
		{"indexes other than unique ones change nothing", "ALTER TABLE t ADD INDEX ia (a), ADD FULLTEXT KEY (a), DROP INDEX ia",
			"id int(11) key, a varchar(10) null, b int(11) null"},
		{"DROP CONSTRAINT drops a unique index", "ALTER TABLE t DROP PRIMARY KEY, MODIFY b int NOT NULL, ADD CONSTRAINT ub UNIQUE (b), DROP CONSTRAINT ub",
			"id int(11), a varchar(10) null, b int(11)"},
		{"ALTER COLUMN SET INVISIBLE changes nothing", "ALTER TABLE t ALTER COLUMN a SET INVISIBLE, ALTER b SET VISIBLE",
			"id int(11) key, a varchar(10) null, b int(11) null"},
		{"CONVERT TO CHARACTER SET binary", "ALTER TABLE t CONVERT TO CHARACTER SET binary",
			"id int(11) key, a varbinary(10) null, b int(11) null"},
		{"multi-clause ALTER applies left to right",
			"ALTER TABLE t ADD COLUMN c datetime(6) NOT NULL AFTER id, DROP COLUMN a, CHANGE b qty int unsigned, MODIFY c datetime(3) FIRST, RENAME COLUMN qty TO quantity",
			"c datetime(3) null, id int(11) key, quantity int(10) unsigned null"},
	}
	for _, c := range cases {
		s := schTracker(t, base)
		changed, err := s.ApplyDDL(schPos(200), "db", c.alter)
		if err != nil {
			t.Errorf("%s: %v", c.why, err)
			continue
		}
		tbl, _ := s.Table("db", "t")
		if got := schDescribe(tbl); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.why, got, c.want)
		}
		if wantChanged := c.want != schDescribe(schMust(schTracker(t, base).Table("db", "t"))); wantChanged != (len(changed) == 1) {
			t.Errorf("%s: changed = %v", c.why, changed)
		}
	}
}

func schMust(t *change.Table, ok bool) *change.Table {
	if !ok {
		return nil
	}
	return t
}

// TestSchemaAlterMismatch: a DDL the server ran but the model cannot apply
// means the model is wrong; it fails and applies nothing of the event.
func TestSchemaAlterMismatch(t *testing.T) {
	for _, alter := range []string{
		"ALTER TABLE t ADD b int",
		"ALTER TABLE t DROP COLUMN nope",
		"ALTER TABLE t MODIFY nope int",
		"ALTER TABLE t CHANGE nope x int",
		"ALTER TABLE t ADD c int AFTER nope",
		"ALTER TABLE t RENAME COLUMN a TO b",
		"ALTER TABLE t ADD c int, DROP nope", // the first clause must not stick
	} {
		s := schTracker(t, "CREATE TABLE t (a int, b int)")
		_, err := s.ApplyDDL(schPos(200), "db", alter)
		if !errors.Is(err, schema.ErrDDLMismatch) {
			t.Errorf("%s: err = %v, want ErrDDLMismatch", alter, err)
			continue
		}
		if !strings.Contains(err.Error(), "binlog.000001:200") || !strings.Contains(err.Error(), "db.t") {
			t.Errorf("%s: error does not name position and table: %v", alter, err)
		}
		schWant(t, s, "db", "t", "a int(11) null, b int(11) null")
	}
}

// TestSchemaRenameThenAlter follows a table through RENAME TABLE and ALTER
// TABLE ... RENAME, across databases, and alters it under its new name.
func TestSchemaRenameThenAlter(t *testing.T) {
	s := schTracker(t, "CREATE TABLE orders (id int PRIMARY KEY, a int)", "CREATE TABLE other (x int)")
	changed, err := s.ApplyDDL(schPos(200), "db", "RENAME TABLE orders TO orders_old, other TO archive.other")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"db.orders", "db.orders_old", "db.other", "archive.other"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("changed = %v, want %v", changed, want)
	}
	schApply(t, s, "",
		"ALTER TABLE orders_old ADD COLUMN b int",
		"ALTER TABLE db.orders_old RENAME TO db.orders2, DROP COLUMN a",
		"ALTER TABLE archive.other RENAME AS other2",
	)
	schWant(t, s, "db", "orders", "<none>")
	schWant(t, s, "db", "orders_old", "<none>")
	schWant(t, s, "db", "orders2", "id int(11) key, b int(11) null")
	schWant(t, s, "db", "other2", "x int(11) null") // unqualified RENAME target takes the default db
	schWant(t, s, "archive", "other", "<none>")
	if tbl, _ := s.Table("db", "orders2"); tbl.Schema != "db" || tbl.Name != "orders2" {
		t.Errorf("renamed table is named %s", tbl.FullName())
	}
	// The old name still answers for positions before the rename.
	if tbl, ok := s.TableAt("db", "orders", schPos(150)); !ok || schDescribe(tbl) != "id int(11) key, a int(11) null" {
		t.Errorf("orders at 150 = %s", schDescribe(tbl))
	}
	// Rename swap through a temporary name.
	s = schTracker(t, "CREATE TABLE a (x int)", "CREATE TABLE b (y int)")
	schApply(t, s, "RENAME TABLE a TO tmp, b TO a, tmp TO b")
	schWant(t, s, "db", "a", "y int(11) null")
	schWant(t, s, "db", "b", "x int(11) null")
	schWant(t, s, "db", "tmp", "<none>")
}

// TestSchemaTableAt: rows written before an ALTER map through the schema
// of their time (go-mysql canal's issue #905).
func TestSchemaTableAt(t *testing.T) {
	s := schTracker(t, "CREATE TABLE t (id int PRIMARY KEY, a int)")
	schApply(t, s, "ALTER TABLE t ADD b int", "ALTER TABLE t DROP a", "DROP TABLE t", "CREATE TABLE t (z int)")
	cases := []struct {
		pos  change.Position
		want string
	}{
		{schPos(50), "<none>"}, // before the table was loaded
		{schPos(100), "id int(11) key, a int(11) null"},
		{schPos(199), "id int(11) key, a int(11) null"},
		{schPos(200), "id int(11) key, a int(11) null, b int(11) null"},
		{schPos(250), "id int(11) key, a int(11) null, b int(11) null"},
		{schPos(300), "id int(11) key, b int(11) null"},
		{schPos(450), "<none>"},
		{schPos(500), "z int(11) null"},
		{change.Position{File: "binlog.000002", Pos: 4}, "z int(11) null"},
		{change.Position{File: "binlog.000000", Pos: 999}, "<none>"},
	}
	for _, c := range cases {
		tbl, ok := s.TableAt("db", "t", c.pos)
		if got := schDescribe(tbl); got != c.want || ok != (tbl != nil) {
			t.Errorf("TableAt(%s) = %s, %v; want %s", c.pos, got, ok, c.want)
		}
	}
	// Versions never share columns: the one at 100 still has a.
	old, _ := s.TableAt("db", "t", schPos(100))
	old2, _ := s.TableAt("db", "t", schPos(200))
	if &old.Columns[0] == &old2.Columns[0] {
		t.Error("versions share their column slice")
	}
}

// TestSchemaMarkUnknownUntil: a table altered between the start position
// and now has no known columns before its last DDL; after that DDL it has
// the live schema the caller read.
func TestSchemaMarkUnknownUntil(t *testing.T) {
	s := schTracker(t, "CREATE TABLE other (x int)")
	live := &change.Table{Schema: "db", Name: "t", Columns: []change.Column{
		{Name: "id", Type: "int", RawType: "int(11)", Key: true},
		{Name: "c", Type: "varchar", RawType: "varchar(5)", Nullable: true},
	}}
	s.MarkUnknownUntil("db", "t", schPos(300), live)
	if _, ok := s.Table("db", "t"); ok {
		t.Error("Table answers while unknown")
	}
	if until, ok := s.Unknown("db", "t"); !ok || until != schPos(300) {
		t.Errorf("Unknown = %v, %v", until, ok)
	}
	// DDL on the table before its position cannot be applied: ignored.
	changed, err := s.ApplyDDL(schPos(200), "db", "ALTER TABLE t ADD b int, DROP COLUMN nope")
	if err != nil || len(changed) != 0 {
		t.Fatalf("ALTER before the position: %v, %v", changed, err)
	}
	changed, err = s.ApplyDDL(schPos(300), "db", "ALTER TABLE t DROP COLUMN b, ADD COLUMN c varchar(5)")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(changed, []string{"db.t"}) {
		t.Errorf("changed = %v", changed)
	}
	schWant(t, s, "db", "t", "id int(11) key, c varchar(5) null")
	if _, ok := s.Unknown("db", "t"); ok {
		t.Error("still unknown after its DDL")
	}
	if _, ok := s.TableAt("db", "t", schPos(299)); ok {
		t.Error("TableAt before the DDL answers")
	}
	// The caller's table was copied.
	live.Columns[1].Name = "changed"
	schWant(t, s, "db", "t", "id int(11) key, c varchar(5) null")
	// Later DDL applies on top of it.
	schApply(t, s, "", "", "ALTER TABLE t ADD d int") // at 400
	schWant(t, s, "db", "t", "id int(11) key, c varchar(5) null, d int(11) null")
}

// TestSchemaMarkUnknownFlipsLate: the flip also happens at the first event
// after the position (a BEGIN), and a table dropped since takes nil.
func TestSchemaMarkUnknownFlipsLate(t *testing.T) {
	s := schema.NewTracker()
	s.MarkUnknownUntil("db", "gone", schPos(300), nil)
	s.MarkUnknownUntil("db", "t", schPos(300), &change.Table{Schema: "x", Name: "y", Columns: []change.Column{{Name: "a", Type: "int", RawType: "int(11)"}}})
	changed, err := s.ApplyDDL(schPos(350), "", "BEGIN")
	if err != nil || !reflect.DeepEqual(changed, []string{"db.gone", "db.t"}) {
		t.Fatalf("BEGIN after the position: %v, %v", changed, err)
	}
	schWant(t, s, "db", "t", "a int(11)")
	if tbl, _ := s.Table("db", "t"); tbl.FullName() != "db.t" {
		t.Errorf("snapshot table renamed to %s", tbl.FullName())
	}
	if _, ok := s.Unknown("db", "gone"); ok {
		t.Error("gone still unknown")
	}
	schWant(t, s, "db", "gone", "<none>")
}

// TestSchemaSnapshotRoundTrip: the history survives JSON and a new owner.
func TestSchemaSnapshotRoundTrip(t *testing.T) {
	s := schTracker(t, "CREATE TABLE t (id int NOT NULL, e enum('a','b'), u int NOT NULL, UNIQUE KEY (u))", "CREATE TABLE gone (x int)")
	schApply(t, s, "ALTER TABLE t ADD b blob, DROP INDEX u", "DROP TABLE gone", "ALTER TABLE t ADD UNIQUE KEY ku (u)")
	s.MarkUnknownUntil("db", "later", schPos(900), &change.Table{Schema: "db", Name: "later", Columns: []change.Column{{Name: "k", Type: "int", RawType: "int(11)", Key: true}}})
	snap := s.Snapshot()
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back change.SchemaSnapshot
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, snap) {
		t.Fatalf("JSON round trip differs:\n%+v\n%+v", back, snap)
	}
	r, err := schema.Restore(back)
	if err != nil {
		t.Fatal(err)
	}
	if again := r.Snapshot(); !reflect.DeepEqual(again, snap) {
		t.Fatalf("restored snapshot differs:\n%+v\n%+v", again, snap)
	}
	for _, p := range []uint32{100, 200, 300, 400} {
		a, _ := s.TableAt("db", "t", schPos(p))
		b, _ := r.TableAt("db", "t", schPos(p))
		if !reflect.DeepEqual(a, b) {
			t.Errorf("TableAt %d differs after restore", p)
		}
	}
	// The restored tracker keeps the indexes: dropping the unique key
	// leaves no key.
	schWant(t, r, "db", "t", "id int(11), e enum('a','b') null, u int(11) key, b blob null")
	if _, err := r.ApplyDDL(schPos(500), "db", "ALTER TABLE t DROP INDEX ku"); err != nil {
		t.Fatal(err)
	}
	schWant(t, r, "db", "t", "id int(11), e enum('a','b') null, u int(11), b blob null")
	// Events up to the snapshot's position are skipped on replay.
	if changed, err := r.ApplyDDL(schPos(200), "db", "ALTER TABLE t ADD b blob"); err != nil || changed != nil {
		t.Errorf("replayed DDL: %v, %v", changed, err)
	}
	// The pending state survives too.
	if until, ok := r.Unknown("db", "later"); !ok || until != schPos(900) {
		t.Errorf("pending lost: %v %v", until, ok)
	}
	// The snapshot shares nothing with the tracker.
	snap.Tables[0].Versions[0].Table.Columns[0].Name = "mutated"
	if tbl, _ := s.TableAt("db", "gone", schPos(100)); tbl.Columns[0].Name != "x" {
		t.Error("Snapshot shares columns with the tracker")
	}

	bad := []change.SchemaSnapshot{
		{Tables: []change.SchemaTableHistory{{Schema: "db", Name: "t"}}},
		{Tables: []change.SchemaTableHistory{{Schema: "db", Name: "t", Versions: []change.SchemaVersion{{Pos: schPos(2)}, {Pos: schPos(1)}}}}},
		{Tables: []change.SchemaTableHistory{{Schema: "db", Name: "t", Versions: []change.SchemaVersion{{Pos: schPos(1), Table: &change.Table{Schema: "db", Name: "u", Columns: []change.Column{{Name: "a"}}}}}}}},
	}
	for i, b := range bad {
		if _, err := schema.Restore(b); err == nil {
			t.Errorf("bad snapshot %d restored", i)
		}
	}
}

// TestSchemaIgnored: statements that are not DDL on tables change nothing
// and never fail, even when the TiDB parser could not parse them.
func TestSchemaIgnored(t *testing.T) {
	s := schTracker(t, "CREATE TABLE t (a int)")
	for i, sql := range []string{
		"BEGIN", "COMMIT", "ROLLBACK", "XA START 'x'", "XA END 'x'", "XA PREPARE 'x'", "XA COMMIT 'x'",
		"SAVEPOINT s1", "ROLLBACK TO SAVEPOINT s1", "GRANT ALL ON *.* TO 'u'@'%'",
		"CREATE USER 'u'@'%' IDENTIFIED BY 'secret'", "FLUSH PRIVILEGES", "ANALYZE TABLE t", "OPTIMIZE TABLE t",
		"TRUNCATE TABLE t", "CREATE INDEX i ON t (a)", "CREATE VIEW v AS SELECT * FROM t", "DROP VIEW v",
		"INSERT INTO t VALUES (1)", "UPDATE t SET a = 2", "DELETE FROM t",
		"CREATE DEFINER=`root`@`localhost` PROCEDURE p() BEGIN ALTER TABLE t ADD x int; END",
		"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
		"BEGIN NOT ATOMIC ALTER TABLE t ADD y int; END", // MariaDB compound statement
		"CREATE TEMPORARY TABLE t (shadow int)", "DROP TEMPORARY TABLE IF EXISTS t",
		"CREATE OR REPLACE TEMPORARY TABLE t (shadow int)",
		"CREATE DATABASE IF NOT EXISTS x /*!40100 DEFAULT CHARACTER SET utf8mb4 */",
		"ALTER DATABASE x CHARACTER SET utf8mb4", "CREATE SEQUENCE s START WITH 10", "ALTER USER u",
		"/*!40000 ALTER TABLE t DISABLE KEYS */", "# just a comment", "",
	} {
		changed, err := s.ApplyDDL(schPos(uint32(200+i)), "db", sql)
		if err != nil || len(changed) != 0 {
			t.Errorf("%q: changed %v, err %v", sql, changed, err)
		}
	}
	schWant(t, s, "db", "t", "a int(11) null")
}

// TestSchemaMariaDB covers MariaDB syntax the TiDB parser rejects or that
// SHOW CREATE TABLE prints on MariaDB.
func TestSchemaMariaDB(t *testing.T) {
	const base = "CREATE TABLE t (id int PRIMARY KEY, a int)"
	cases := []struct {
		why  string
		ddl  []string
		want string
	}{
		{"ADD COLUMN IF NOT EXISTS of an existing column is a no-op", []string{"ALTER TABLE t ADD COLUMN IF NOT EXISTS a bigint, ADD COLUMN IF NOT EXISTS b int"},
			"id int(11) key, a int(11) null, b int(11) null"},
		{"DROP COLUMN IF EXISTS of a missing column is a no-op", []string{"ALTER TABLE t DROP COLUMN IF EXISTS nope, DROP COLUMN IF EXISTS a"},
			"id int(11) key"},
		{"MODIFY / CHANGE IF EXISTS", []string{"ALTER TABLE t MODIFY COLUMN IF EXISTS nope int, CHANGE COLUMN IF EXISTS a b bigint"},
			"id int(11) key, b bigint(20) null"},
		{"CREATE OR REPLACE TABLE replaces", []string{"CREATE OR REPLACE TABLE t (z int)"},
			"z int(11) null"},
		{"ALTER ONLINE TABLE, WAIT and NOWAIT", []string{"ALTER ONLINE TABLE t WAIT 5 ADD c int", "ALTER TABLE t NOWAIT ADD d int"},
			"id int(11) key, a int(11) null, c int(11) null, d int(11) null"},
		{"ALTER TABLE IF EXISTS", []string{"ALTER TABLE IF EXISTS t ADD c int", "ALTER TABLE IF EXISTS nope ADD c int"},
			"id int(11) key, a int(11) null, c int(11) null"},
		{"RENAME TABLE IF EXISTS ... WAIT", []string{"RENAME TABLE IF EXISTS t WAIT 3 TO t2", "RENAME TABLE t2 NOWAIT TO t"},
			"id int(11) key, a int(11) null"},
		{"DROP TABLE ... NOWAIT, then CREATE TABLE IF NOT EXISTS", []string{"DROP TABLE IF EXISTS t NOWAIT", "CREATE TABLE IF NOT EXISTS t (n int)", "CREATE TABLE IF NOT EXISTS t (m int)"},
			"n int(11) null"},
		{"unique index by CREATE / DROP INDEX", []string{"ALTER TABLE t DROP PRIMARY KEY, MODIFY a int NOT NULL", "CREATE UNIQUE INDEX IF NOT EXISTS ua ON t (a)"},
			"id int(11), a int(11) key"},
		{"DROP INDEX IF EXISTS", []string{"ALTER TABLE t DROP PRIMARY KEY, MODIFY a int NOT NULL, ADD UNIQUE KEY ua (a)", "DROP INDEX IF EXISTS ua ON t"},
			"id int(11), a int(11)"},
		{"INVISIBLE, COMPRESSED, PERSISTENT columns", []string{"ALTER TABLE t ADD b int INVISIBLE, ADD c blob COMPRESSED, ADD d int AS (a + 1) PERSISTENT"},
			"id int(11) key, a int(11) null, b int(11) null, c blob null, d int(11) null"},
		{"spatial column added by ALTER, with a SPATIAL index", []string{"ALTER TABLE t ADD g point NOT NULL REF_SYSTEM_ID=4326, ADD SPATIAL INDEX (g)"},
			"id int(11) key, a int(11) null, g point"},
		{"a column named like a spatial type", []string{"ALTER TABLE t ADD point int, ADD `polygon` polygon, ADD uuid uuid DEFAULT uuid()"},
			"id int(11) key, a int(11) null, point int(11) null, polygon polygon null, uuid uuid null"},
		{"charsets and collations the TiDB parser does not know", []string{"ALTER TABLE t ADD u varchar(5) CHARACTER SET utf16 COLLATE utf16_general_ci, ADD v text COLLATE utf8mb4_uca1400_ai_ci, ADD w char(2) CHARACTER SET armscii8, CONVERT TO CHARACTER SET cp1251"},
			"id int(11) key, a int(11) null, u varchar(5) null, v text null, w char(2) null"},
		{"introducers the TiDB parser cannot encode", []string{"ALTER TABLE t ADD b varchar(5) CHARACTER SET big5 DEFAULT _big5'x', ADD c varbinary(4) DEFAULT _cp1251 0x41, ADD d varchar(3) DEFAULT _sjis X'41', ADD e varchar(3) DEFAULT _utf8mb4'ok'"},
			"id int(11) key, a int(11) null, b varchar(5) null, c varbinary(4) null, d varchar(3) null, e varchar(3) null"},
	}
	for _, c := range cases {
		s := schTracker(t, base)
		for i, ddl := range c.ddl {
			if _, err := s.ApplyDDL(schPos(uint32(200+i)), "db", ddl); err != nil {
				t.Errorf("%s: %q: %v", c.why, ddl, err)
			}
		}
		schWant(t, s, "db", "t", c.want)
	}
}

// TestSchemaShowCreate loads what MariaDB and MySQL 8 print for SHOW CREATE
// TABLE, including options and clauses the TiDB parser rejects.
func TestSchemaShowCreate(t *testing.T) {
	cases := []struct{ why, create, want string }{
		{"MariaDB 11 defaults", "CREATE TABLE `orders` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `ts` timestamp NOT NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(),\n" +
			"  `doc` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`doc`)),\n  `g` point NOT NULL,\n  `h` int(11) DEFAULT NULL INVISIBLE,\n" +
			"  PRIMARY KEY (`id`),\n  SPATIAL KEY `g` (`g`)\n) ENGINE=InnoDB AUTO_INCREMENT=3 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_uca1400_ai_ci `encrypted`=yes",
			"id int(11) key, ts timestamp, doc json null, g point, h int(11) null"},
		{"MySQL 8 with version comments", "CREATE TABLE `t` (\n  `id` bigint unsigned NOT NULL,\n  `p` point NOT NULL /*!80003 SRID 4326 */,\n  `v` int DEFAULT NULL /*!80023 INVISIBLE */,\n" +
			"  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci /*!50100 PARTITION BY HASH (`id`) PARTITIONS 4 */",
			"id bigint(20) unsigned key, p point, v int(11) null"},
		{"MariaDB engine attributes are cut", "CREATE TABLE `t` (`a` int(11) DEFAULT NULL) ENGINE=Aria PAGE_CHECKSUM=1 TRANSACTIONAL=1 `encrypted`=yes `encryption_key_id`=2",
			"a int(11) null"},
		{"binary default charset makes text columns binary", "CREATE TABLE `t` (`a` varchar(10), `b` text, `c` char(2) CHARACTER SET latin1) DEFAULT CHARSET=binary",
			"a varbinary(10) null, b blob null, c char(2) null"},
		{"binary default charset, with options the parser rejects", "CREATE TABLE `t` (`a` varchar(10)) DEFAULT CHARSET=binary `x`=1",
			"a varbinary(10) null"},
	}
	for _, c := range cases {
		s := schema.NewTracker()
		if err := s.LoadCreate(schPos(4), "db", c.create); err != nil {
			t.Errorf("%s: %v", c.why, err)
			continue
		}
		tbl, ok := s.Table("db", strings.Trim(strings.Fields(c.create)[2], "`"))
		if got := schDescribe(tbl); !ok || got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.why, got, c.want)
		}
	}
	s := schema.NewTracker()
	for _, bad := range []string{"DROP TABLE t", "CREATE TABLE t2 LIKE t", "SELECT 1", "CREATE TABLE t (a int) WITH SYSTEM VERSIONING", "CREATE TABLE t (a int) ENGINE=InnoDB WITH SYSTEM VERSIONING `x`=1"} {
		if err := s.LoadCreate(schPos(4), "db", bad); !errors.Is(err, schema.ErrDDLParse) {
			t.Errorf("LoadCreate(%q) = %v, want ErrDDLParse", bad, err)
		}
	}
}

// TestSchemaParseError: unparseable DDL names the position, the default
// database and the statement, and leaves the model as it was.
func TestSchemaParseError(t *testing.T) {
	s := schTracker(t, "CREATE TABLE t (a int)")
	long := "ALTER TABLE t ADD b int, ADD c int WITH SYSTEM VERSIONING " + strings.Repeat("x", 300)
	_, err := s.ApplyDDL(change.Position{File: "mysql-bin.000007", Pos: 4242}, "db", long)
	if !errors.Is(err, schema.ErrDDLParse) {
		t.Fatalf("err = %v, want ErrDDLParse", err)
	}
	msg := err.Error()
	for _, want := range []string{"mysql-bin.000007:4242", `"db"`, "ALTER TABLE t ADD b int"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, strings.Repeat("x", 250)) {
		t.Errorf("error quotes more than 200 characters of the statement: %d bytes", len(msg))
	}
	schWant(t, s, "db", "t", "a int(11) null")
	// A parse error in a later statement of the event applies nothing.
	if _, err := s.ApplyDDL(schPos(300), "db", "ALTER TABLE t ADD b int; ALTER TABLE t ADD ((("); !errors.Is(err, schema.ErrDDLParse) {
		t.Errorf("second statement: %v", err)
	}
	schWant(t, s, "db", "t", "a int(11) null")
	// The event can be retried once fixed: the failed position was not
	// recorded as applied.
	if _, err := s.ApplyDDL(schPos(300), "db", "ALTER TABLE t ADD b int"); err != nil {
		t.Fatal(err)
	}
	schWant(t, s, "db", "t", "a int(11) null, b int(11) null")
}

// TestSchemaStatements covers the table-level statements: several in one
// event, DROP of several tables, DROP DATABASE, CREATE TABLE LIKE, default
// database resolution and case-sensitive table names.
func TestSchemaStatements(t *testing.T) {
	s := schTracker(t, "CREATE TABLE a (x int PRIMARY KEY)", "CREATE TABLE b (y int)", "CREATE TABLE A (big int)")
	changed, err := s.ApplyDDL(schPos(200), "other", "CREATE TABLE db.c LIKE db.a; CREATE TABLE d (z int); -- two\n ALTER TABLE db.b ADD w int;")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"db.c", "other.d", "db.b"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("changed = %v, want %v", changed, want)
	}
	schWant(t, s, "db", "c", "x int(11) key")
	schWant(t, s, "other", "d", "z int(11) null")
	schWant(t, s, "db", "b", "y int(11) null, w int(11) null")
	schWant(t, s, "db", "A", "big int(11) null") // a and A are different tables

	changed, err = s.ApplyDDL(schPos(300), "db", "DROP TABLE IF EXISTS a, nope, other.d")
	if err != nil || !reflect.DeepEqual(changed, []string{"db.a", "other.d"}) {
		t.Errorf("DROP: %v, %v", changed, err)
	}
	schWant(t, s, "db", "A", "big int(11) null")

	changed, err = s.ApplyDDL(schPos(400), "", "DROP DATABASE db")
	if err != nil || !reflect.DeepEqual(changed, []string{"db.A", "db.b", "db.c"}) {
		t.Errorf("DROP DATABASE: %v, %v", changed, err)
	}
	for _, n := range []string{"A", "b", "c"} {
		schWant(t, s, "db", n, "<none>")
	}
	// CREATE TABLE LIKE a table braid does not know: exists, columns unknown.
	if _, err := s.ApplyDDL(schPos(500), "db", "CREATE TABLE e LIKE nowhere.x"); err != nil {
		t.Fatal(err)
	}
	schWant(t, s, "db", "e", "<none>")
	// ALTER of a table braid does not know is ignored.
	if changed, err := s.ApplyDDL(schPos(600), "db", "ALTER TABLE nowhere ADD x int, DROP nope"); err != nil || changed != nil {
		t.Errorf("ALTER of an unknown table: %v, %v", changed, err)
	}
}

// TestSchemaCompact bounds history without changing answers at or after the
// compaction point.
func TestSchemaCompact(t *testing.T) {
	s := schTracker(t, "CREATE TABLE t (a int)", "CREATE TABLE gone (x int)")
	schApply(t, s, "ALTER TABLE t ADD b int", "DROP TABLE gone", "ALTER TABLE t ADD c int")
	s.Compact(schPos(350))
	if tbl, _ := s.TableAt("db", "t", schPos(350)); schDescribe(tbl) != "a int(11) null, b int(11) null" {
		t.Errorf("t at 350 = %s", schDescribe(tbl))
	}
	if _, ok := s.TableAt("db", "t", schPos(150)); ok {
		t.Error("version before the kept one still answers")
	}
	schWant(t, s, "db", "t", "a int(11) null, b int(11) null, c int(11) null")
	snap := s.Snapshot()
	if len(snap.Tables) != 1 || len(snap.Tables[0].Versions) != 2 {
		t.Errorf("after Compact: %+v", snap.Tables)
	}
}

// TestDDLTables: what the pre-scan of the binlog learns from each DDL.
func TestDDLTables(t *testing.T) {
	cases := []struct {
		sql  string
		want []schema.DDLTouch
	}{
		{"CREATE TABLE t (a int)", []schema.DDLTouch{{Table: "db.t", Creates: true}}},
		{"create table if not exists Shop.Orders like t", []schema.DDLTouch{{Table: "Shop.Orders", Creates: true}}},
		{"CREATE OR REPLACE TABLE t (a int)", []schema.DDLTouch{{Table: "db.t", Creates: true, Drops: true}}},
		{"DROP TABLE IF EXISTS a, x.b /* generated by server */", []schema.DDLTouch{{Table: "db.a", Drops: true}, {Table: "x.b", Drops: true}}},
		{"RENAME TABLE a TO b, x.c TO y.d", []schema.DDLTouch{{Table: "db.a", Drops: true}, {Table: "db.b", Creates: true}, {Table: "x.c", Drops: true}, {Table: "y.d", Creates: true}}},
		{"ALTER TABLE t ADD c int", []schema.DDLTouch{{Table: "db.t"}}},
		{"ALTER TABLE t ADD c int, RENAME TO u", []schema.DDLTouch{{Table: "db.t", Drops: true}, {Table: "db.u", Creates: true}}},
		{"CREATE UNIQUE INDEX u ON t (a)", []schema.DDLTouch{{Table: "db.t"}}},
		{"DROP INDEX u ON x.t", []schema.DDLTouch{{Table: "x.t"}}},
		{"DROP DATABASE shop", []schema.DDLTouch{{Table: "shop.*", Drops: true, Database: true}}},
		{"CREATE TABLE a (x int); DROP TABLE b", []schema.DDLTouch{{Table: "db.a", Creates: true}, {Table: "db.b", Drops: true}}},
		{"BEGIN", nil},
		{"TRUNCATE t", nil},
		{"CREATE TEMPORARY TABLE t (a int)", nil},
		{"CREATE INDEX i ON t (a)", nil},
	}
	for _, c := range cases {
		got, err := schema.DDLTables("db", c.sql)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("DDLTables(%q) = %+v, %v; want %+v", c.sql, got, err, c.want)
		}
	}
	if _, err := schema.DDLTables("db", "ALTER TABLE t ADD ((("); !errors.Is(err, schema.ErrDDLParse) {
		t.Errorf("bad DDL: %v", err)
	}
}

// BenchmarkSchemaApplyDDLBegin: every query event goes through ApplyDDL;
// the ones that are not DDL must cost next to nothing (no parser, no
// allocation).
func BenchmarkSchemaApplyDDLBegin(b *testing.B) {
	s := schema.NewTracker()
	if err := s.LoadCreate(schPos(4), "db", "CREATE TABLE t (a int)"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	pos := schPos(100)
	for b.Loop() {
		if _, err := s.ApplyDDL(pos, "db", "BEGIN"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSchemaApplyDDLAlter is the cost of a real DDL, for comparison.
func BenchmarkSchemaApplyDDLAlter(b *testing.B) {
	s := schema.NewTracker()
	if err := s.LoadCreate(schPos(4), "db", "CREATE TABLE t (id int PRIMARY KEY, a int)"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := uint32(100)
	for b.Loop() {
		n += 2
		if _, err := s.ApplyDDL(schPos(n), "db", "ALTER TABLE t ADD b int"); err != nil {
			b.Fatal(err)
		}
		if _, err := s.ApplyDDL(schPos(n+1), "db", "ALTER TABLE t DROP b"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSchemaApplyDDLBeginAllocs pins the benchmark's point in a test.
func TestSchemaApplyDDLBeginAllocs(t *testing.T) {
	s := schema.NewTracker()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.ApplyDDL(schPos(100), "db", "  /* c */ BEGIN"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("ApplyDDL(BEGIN) allocates %.0f times", allocs)
	}
}

// TestSchemaLatin1: a character column holds latin1 (Column.Charset) when
// it declares it, by CHARACTER SET or COLLATE, or when the table's default
// is latin1 and it declares nothing; the table's default holds for columns
// ALTER adds or redefines, and CONVERT TO changes them all.
func TestSchemaLatin1(t *testing.T) {
	charsets := func(tbl *change.Table) string {
		var parts []string
		for _, c := range tbl.Columns {
			parts = append(parts, c.Name+":"+c.Charset)
		}
		return strings.Join(parts, " ")
	}
	cases := []struct {
		why    string
		create string
		alters []string
		want   string
	}{
		{"table default latin1", "CREATE TABLE t (id int, a varchar(10), b text, c char(2) CHARACTER SET utf8mb4, d enum('x'), e varbinary(4)) DEFAULT CHARSET=latin1",
			nil, "id: a:latin1 b:latin1 c: d: e:"},
		{"column charset and collation", "CREATE TABLE t (a varchar(10) CHARACTER SET latin1, b varchar(10) COLLATE latin1_bin, c varchar(10)) DEFAULT CHARSET=utf8mb4",
			nil, "a:latin1 b:latin1 c:"},
		{"table collation latin1", "CREATE TABLE t (a varchar(10)) COLLATE=latin1_general_ci",
			nil, "a:latin1"},
		{"options the parser rejects are cut, the charset kept", "CREATE TABLE t (a varchar(10)) DEFAULT CHARSET=latin1 `encrypted`=yes",
			nil, "a:latin1"},
		{"added and redefined columns take the table default", "CREATE TABLE t (a varchar(10), b int) DEFAULT CHARSET=latin1",
			[]string{"ALTER TABLE t ADD COLUMN c text", "ALTER TABLE t MODIFY b varchar(5)", "ALTER TABLE t ADD COLUMN d text CHARACTER SET utf8mb4"},
			"a:latin1 b:latin1 c:latin1 d:"},
		{"CONVERT TO utf8mb4 clears, DEFAULT CHARSET alone only changes later columns", "CREATE TABLE t (a varchar(10), b varchar(10)) DEFAULT CHARSET=latin1",
			[]string{"ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", "ALTER TABLE t DEFAULT CHARSET=latin1", "ALTER TABLE t ADD COLUMN c varchar(3)"},
			"a: b: c:latin1"},
		{"CONVERT TO latin1", "CREATE TABLE t (a varchar(10), b blob) DEFAULT CHARSET=utf8mb4",
			[]string{"ALTER TABLE t CONVERT TO CHARACTER SET latin1"}, "a:latin1 b:"},
	}
	for _, c := range cases {
		s := schTracker(t, c.create)
		schApply(t, s, c.alters...)
		tbl, ok := s.Table("db", "t")
		if !ok {
			t.Fatalf("%s: no table", c.why)
		}
		if got := charsets(tbl); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.why, got, c.want)
		}
	}
}

// TestSchemaDatabaseCharsets: a CREATE TABLE naming no charset takes its
// database's default: as the server reported it at the start, as CREATE or
// ALTER DATABASE set it (CREATE DATABASE naming none takes the server's),
// and after a snapshot's round trip.
func TestSchemaDatabaseCharsets(t *testing.T) {
	s := schema.NewTracker()
	s.SetCharsets("latin1", map[string]string{"db": "LATIN1", "u": "utf8mb4", "v": "utf8mb4"})
	schApply(t, s,
		"CREATE TABLE t1 (a varchar(3))",
		"CREATE TABLE v.t2 (a varchar(3))",
		"CREATE DATABASE n CHARACTER SET utf8mb4",
		"CREATE TABLE n.t3 (a varchar(3))",
		"ALTER DATABASE n COLLATE latin1_bin",
		"CREATE TABLE n.t4 (a varchar(3))",
		"CREATE DATABASE m",
		"CREATE TABLE m.t5 (a varchar(3))",
		"DROP DATABASE u",
		"CREATE DATABASE IF NOT EXISTS u",
		"CREATE TABLE u.t6 (a varchar(3))",
		"CREATE DATABASE IF NOT EXISTS n CHARACTER SET utf8mb4",
		"CREATE TABLE n.t7 (a varchar(3))",
		"CREATE DATABASE c COMMENT = 'MariaDB''s option' CHARACTER SET latin1", // the TiDB parser needs COMMENT cut
		"CREATE TABLE c.t9 (a varchar(3))",
	)
	check := func(s *schema.Tracker, schema, name, want string) {
		t.Helper()
		tbl, ok := s.Table(schema, name)
		if !ok {
			t.Fatalf("%s.%s not known", schema, name)
		}
		if got := tbl.Columns[0].Charset; got != want {
			t.Errorf("%s.%s: charset %q, want %q", schema, name, got, want)
		}
	}
	for _, c := range []struct{ schema, name, want string }{
		{"db", "t1", "latin1"}, {"v", "t2", ""}, {"n", "t3", ""}, {"n", "t4", "latin1"},
		{"m", "t5", "latin1"}, {"u", "t6", "latin1"}, {"n", "t7", "latin1"}, {"c", "t9", "latin1"},
	} {
		check(s, c.schema, c.name, c.want)
	}
	restored, err := schema.Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restored.ApplyDDL(schPos(9000), "n", "CREATE TABLE t8 (a text)"); err != nil {
		t.Fatal(err)
	}
	check(restored, "n", "t8", "latin1")

	// On a utf8 server only the databases whose default matters are held.
	u := schema.NewTracker()
	u.SetCharsets("utf8mb4", map[string]string{"a": "utf8mb4", "b": "latin1", "c": "utf8"})
	if got := u.Snapshot().Databases; !reflect.DeepEqual(got, map[string]string{"b": "latin1"}) {
		t.Errorf("databases held on a utf8 server: %v, want only b's latin1", got)
	}
}
