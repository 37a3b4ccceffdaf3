package mysqlbinlog

import (
	"encoding/binary"
	"math"
	"strings"
)

// wkbPoint is a POINT as MySQL stores it: SRID 0, then WKB.
func wkbPoint(x, y float64) []byte {
	b := []byte{0, 0, 0, 0, 1, 1, 0, 0, 0}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(y))
}

// wkbLineString is a LINESTRING through points (x0, y0, x1, y1, ...).
func wkbLineString(xy ...float64) []byte {
	b := []byte{0, 0, 0, 0, 1, 2, 0, 0, 0}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(xy)/2))
	for _, v := range xy {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// AllTypes returns a table with a column of every type MySQL 8.4 has (and
// VECTOR when vector is set: MySQL 9.0+), and three rows: the types'
// maxima, their minima and edge values, and NULL wherever a column can
// hold it. Column i of a row goes to column i of the table.
func AllTypes(schema, name string, vector bool) (*TableDef, []Row) {
	type col struct {
		def           ColumnDef
		high, low, no any // no: the third row's value (nil but in NOT NULL columns)
	}
	long := strings.Repeat("é", 300)
	cols := []col{
		{ColumnDef{Name: "id", Type: "int", NotNull: true}, 1, 2, 3},
		{ColumnDef{Name: "ti", Type: "tinyint"}, 127, -128, nil},
		{ColumnDef{Name: "tiu", Type: "tinyint unsigned"}, 255, 0, nil},
		{ColumnDef{Name: "b1", Type: "tinyint(1)"}, 1, 0, nil},
		{ColumnDef{Name: "si", Type: "smallint"}, 32767, -32768, nil},
		{ColumnDef{Name: "siu", Type: "smallint unsigned"}, 65535, 0, nil},
		{ColumnDef{Name: "mi", Type: "mediumint"}, 8388607, -8388608, nil},
		{ColumnDef{Name: "miu", Type: "mediumint unsigned"}, 16777215, 0, nil},
		{ColumnDef{Name: "i", Type: "int"}, math.MaxInt32, math.MinInt32, nil},
		{ColumnDef{Name: "iu", Type: "int unsigned"}, uint64(math.MaxUint32), 0, nil},
		{ColumnDef{Name: "bi", Type: "bigint"}, int64(math.MaxInt64), int64(math.MinInt64), nil},
		{ColumnDef{Name: "biu", Type: "bigint unsigned"}, uint64(math.MaxUint64), 0, nil},
		{ColumnDef{Name: "d", Type: "decimal(10,2)"}, "99999999.99", "-99999999.99", nil},
		{ColumnDef{Name: "d0", Type: "decimal(5,0)"}, "12345", "-1", nil},
		{ColumnDef{Name: "dw", Type: "decimal(65,30)"}, strings.Repeat("9", 35) + "." + strings.Repeat("9", 30), "-0.000000000000000000000000000001", nil},
		{ColumnDef{Name: "f", Type: "float"}, float32(3.4028235e38), float32(-1.5), nil},
		{ColumnDef{Name: "db", Type: "double"}, math.MaxFloat64, -2.5e-300, nil},
		{ColumnDef{Name: "bt1", Type: "bit(1)"}, uint64(1), uint64(0), nil},
		{ColumnDef{Name: "bt64", Type: "bit(64)"}, uint64(math.MaxUint64), uint64(0), nil},
		{ColumnDef{Name: "dt", Type: "date"}, "9999-12-31", "1000-01-01", nil},
		{ColumnDef{Name: "tm", Type: "time"}, "838:59:59", "-838:59:59", nil},
		{ColumnDef{Name: "tm6", Type: "time(6)"}, "23:59:59.999999", "-00:00:00.000001", nil},
		{ColumnDef{Name: "dtm", Type: "datetime"}, "9999-12-31 23:59:59", "1000-01-01 00:00:00", nil},
		{ColumnDef{Name: "dtm3", Type: "datetime(3)"}, "2026-03-01 10:00:00.125", "1000-01-01 00:00:00.001", nil},
		{ColumnDef{Name: "dtm6", Type: "datetime(6)"}, "9999-12-31 23:59:59.999999", "1970-01-01 00:00:00.000001", nil},
		{ColumnDef{Name: "ts", Type: "timestamp"}, "2038-01-19 03:14:07", "1970-01-01 00:00:01", nil},
		{ColumnDef{Name: "ts6", Type: "timestamp(6)"}, "2038-01-19 03:14:07.999999", "1970-01-01 00:00:01.000001", nil},
		{ColumnDef{Name: "yr", Type: "year"}, 2155, 1901, nil},
		{ColumnDef{Name: "ch", Type: "char(10)"}, "ñandú 🦆", "", nil},
		{ColumnDef{Name: "chl", Type: "char(10)", Collation: "latin1_swedish_ci"}, "caf\xe9", "a", nil},
		{ColumnDef{Name: "vc", Type: "varchar(300)"}, long, "", nil},
		{ColumnDef{Name: "vcb", Type: "varchar(20)", Collation: "utf8mb4_bin"}, "Case Matters", "x", nil},
		{ColumnDef{Name: "bn", Type: "binary(16)"}, []byte{0xff, 0, 1}, []byte{}, nil},
		{ColumnDef{Name: "vb", Type: "varbinary(64)"}, []byte{0, 0xfe, 0xff}, []byte{}, nil},
		{ColumnDef{Name: "tb", Type: "tinyblob"}, []byte(strings.Repeat("b", 255)), []byte{}, nil},
		{ColumnDef{Name: "bl", Type: "blob"}, []byte{0, 1, 2}, []byte{}, nil},
		{ColumnDef{Name: "mb", Type: "mediumblob"}, []byte(strings.Repeat("m", 70000)), []byte{}, nil},
		{ColumnDef{Name: "lb", Type: "longblob"}, []byte{9}, []byte{}, nil},
		{ColumnDef{Name: "tt", Type: "tinytext"}, "tiny", "", nil},
		{ColumnDef{Name: "tx", Type: "text"}, "línea 1\nlínea 2\t'quoted' \"double\" \\", "", nil},
		{ColumnDef{Name: "mt", Type: "mediumtext"}, "medium", "", nil},
		{ColumnDef{Name: "lt", Type: "longtext"}, "long", "", nil},
		{ColumnDef{Name: "en", Type: "enum('small','medium','large')"}, "large", "small", nil},
		{ColumnDef{Name: "st", Type: "set('red','green','blue')"}, "red,green,blue", "", nil},
		{ColumnDef{Name: "js", Type: "json"}, `{"a": [1, 2.5, "x", null, true, false], "b": {"c": -70000, "d": 18446744073709551615}, "": "empty key"}`, `[]`, nil},
		{ColumnDef{Name: "jss", Type: "json"}, `"a string"`, `0`, nil},
		{ColumnDef{Name: "geo", Type: "geometry"}, wkbPoint(1, 2), wkbLineString(0, 0, 1, 1), nil},
		{ColumnDef{Name: "pt", Type: "point"}, wkbPoint(-1.5, 2.25), wkbPoint(0, 0), nil},
		{ColumnDef{Name: "ls", Type: "linestring"}, wkbLineString(0, 0, 3, 4, 5, 6), wkbLineString(1, 1, 2, 2), nil},
		{ColumnDef{Name: "pg", Type: "polygon"}, nil, nil, nil},
		{ColumnDef{Name: "mpt", Type: "multipoint"}, nil, nil, nil},
		{ColumnDef{Name: "mls", Type: "multilinestring"}, nil, nil, nil},
		{ColumnDef{Name: "mpg", Type: "multipolygon"}, nil, nil, nil},
		{ColumnDef{Name: "gc", Type: "geometrycollection"}, nil, nil, nil},
		{ColumnDef{Name: "inv", Type: "int", Invisible: true}, 42, -42, nil},
		{ColumnDef{Name: "gen", Type: "int", Generated: "(`i` % 7)"}, math.MaxInt32 % 7, math.MinInt32 % 7, nil},
	}
	if vector {
		cols = append(cols, col{ColumnDef{Name: "vec", Type: "vector(3)"}, []float32{1.5, -2, float32(math.MaxFloat32)}, []float32{0, 0, 0}, nil})
	}
	def := &TableDef{Schema: schema, Name: name, PrimaryKey: []string{"id"}}
	rows := make([]Row, 3)
	for _, c := range cols {
		def.Columns = append(def.Columns, c.def)
		rows[0].After = append(rows[0].After, c.high)
		rows[1].After = append(rows[1].After, c.low)
		rows[2].After = append(rows[2].After, c.no)
	}
	return def, rows
}
