package binlog

import (
	"reflect"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// TestColumnsCreateSameModel checks columnsCreate against SHOW CREATE
// TABLE, the reference: for tables the schema model reads both ways,
// the model built from information_schema is the same table (columns,
// types, charsets, nullability, keys, unique keys, default charset).
func TestColumnsCreateSameModel(t *testing.T) {
	srv := mysqltest.Start(t)
	tables := []string{
		`CREATE TABLE d.types (id INT UNSIGNED PRIMARY KEY, ti TINYINT, bi BIGINT UNSIGNED NOT NULL, dc DECIMAL(30,10), f FLOAT, db DOUBLE,
			b BIT(3), dt DATE, tm TIME(6), dtm DATETIME(6), ts TIMESTAMP(3) NULL, y YEAR, c CHAR(10), vc VARCHAR(100) NOT NULL, tx TEXT,
			bn BINARY(4), vb VARBINARY(10), bl BLOB, j JSON, e ENUM('it''s', 'a\\', 'q"x', 'b\\''c'), s SET('x''y', 'z\\'),
			u UUID, i6 INET6, g POINT, cz VARCHAR(10) COMPRESSED, h INT INVISIBLE, gen INT AS (id + 1) VIRTUAL, st INT AS (id * 2) STORED)`,
		`CREATE TABLE d.charsets (a VARCHAR(10) CHARACTER SET latin1, b TEXT CHARACTER SET binary, c CHAR(3) CHARACTER SET gbk NOT NULL,
			d VARCHAR(10) CHARACTER SET utf8mb3, e VARCHAR(10) CHARACTER SET ascii, UNIQUE KEY uc (c), UNIQUE KEY ua (a(4), e)) DEFAULT CHARSET=latin1`,
		"CREATE TABLE d.`we``ird` (`x y` INT NOT NULL, `z` INT NOT NULL, PRIMARY KEY (`z`, `x y`), UNIQUE KEY `k``1` (`x y`)) DEFAULT CHARSET=binary",
		`CREATE TABLE d.nokey (a INT, b VARCHAR(5)) CHARACTER SET cp1251`,
	}
	srv.Exec(t, "CREATE DATABASE d")
	srv.Exec(t, tables...)
	c := srv.Conn(t)
	for _, name := range []string{"types", "charsets", "we`ird", "nokey"} {
		create := srv.Query(t, "SHOW CREATE TABLE d."+quoteName(name))[0][1]
		want := loadOne(t, name, create)
		alt, why, err := columnsCreate(c, "d", name)
		if err != nil || why != "" {
			t.Fatalf("%s: columnsCreate: %v %s", name, err, why)
		}
		got := loadOne(t, name, alt)
		if reflect.DeepEqual(got, want) {
			continue
		}
		for i := range max(len(got.Columns), len(want.Columns)) {
			var g, w change.Column
			if i < len(got.Columns) {
				g = got.Columns[i]
			}
			if i < len(want.Columns) {
				w = want.Columns[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s: column %d from information_schema %+v, want %+v", name, i, g, w)
			}
		}
		got.Columns, want.Columns = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: table from information_schema %+v, want %+v", name, got, want)
		}
	}
}

// loadOne is the model's table d.name from create.
func loadOne(t *testing.T, name, create string) *change.Table {
	t.Helper()
	tr := schema.NewTracker()
	if err := tr.LoadCreate(change.Position{File: "f", Pos: 4}, "d", create); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	tb, ok := tr.Table("d", name)
	if !ok {
		t.Fatalf("%s: not in the model", name)
	}
	return tb
}
