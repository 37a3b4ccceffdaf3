package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/engine/change"
)

// binCase is a column of TestCopyBinaryReadsAsText: the MySQL column the
// values come from, the target column's type, and values a change may
// hold for it.
type binCase struct {
	col    change.Column
	pgType string
	values []change.Value
}

var binCases = []binCase{
	{change.Column{Type: "smallint"}, "smallint", []change.Value{int64(-32768), int64(32767), int64(0), nil}},
	{change.Column{Type: "int"}, "integer", []change.Value{int64(math.MinInt32), int64(math.MaxInt32), int64(7), int64(-1)}},
	{change.Column{Type: "int", Unsigned: true}, "bigint", []change.Value{uint64(math.MaxUint32), uint64(0), uint64(1), nil}},
	{change.Column{Type: "bigint"}, "bigint", []change.Value{int64(math.MinInt64), int64(math.MaxInt64), int64(0), int64(-42)}},
	{change.Column{Type: "bigint", Unsigned: true}, "numeric(20)", []change.Value{uint64(math.MaxUint64), uint64(math.MaxInt64 + 1), uint64(0), uint64(10000)}},
	{change.Column{Type: "bigint"}, "text", []change.Value{int64(-9), int64(math.MinInt64), int64(1234567890), nil}},
	{change.Column{Type: "decimal"}, "numeric(12,3)", []change.Value{"-123456789.123", "0.000", "-0.500", "1.100"}},
	{change.Column{Type: "decimal"}, "numeric", []change.Value{"12345678901234567890.000000001", "0.0001", "-10000.00", "99990000"}},
	{change.Column{Type: "decimal"}, "numeric(10,2)", []change.Value{"00012.10", "-0.00", "5", "10000.01"}},
	{change.Column{Type: "float"}, "real", []change.Value{float32(0.1), float32(1e-45), float32(-3.4e38), float32(16777217)}},
	{change.Column{Type: "float"}, "double precision", []change.Value{float32(0.1), float32(1.0000001), float32(math.MaxFloat32), nil}},
	{change.Column{Type: "double"}, "double precision", []change.Value{0.1, 5e-324, -2.25e100, math.Copysign(0, -1)}},
	{change.Column{Type: "bit", RawType: "bit(10)"}, "bit(10)", []change.Value{uint64(682), uint64(0), uint64(1023), uint64(1)}},
	{change.Column{Type: "bit", RawType: "bit(64)"}, "bit(64)", []change.Value{uint64(math.MaxUint64), uint64(1 << 63), uint64(5), nil}},
	{change.Column{Type: "date", Nullable: true}, "date", []change.Value{"2024-02-29", "0001-01-01", "9999-12-31", "0000-00-00"}},
	{change.Column{Type: "date"}, "date", []change.Value{"1999-12-31", "2000-01-01", "1969-12-31", "2024-00-10"}},
	{change.Column{Type: "datetime"}, "timestamp(0)", []change.Value{"2024-02-29 23:59:59", "0001-01-01 00:00:00", "9999-12-31 23:59:59", "0000-00-00 00:00:00"}},
	{change.Column{Type: "datetime", Nullable: true}, "timestamp(6)", []change.Value{"2024-02-29 23:59:59.123456", "1969-12-31 23:59:59.000001", "1900-03-01 00:00:00.5", "2024-01-00 00:00:00"}},
	{change.Column{Type: "timestamp", Nullable: true}, "timestamp(3)", []change.Value{"2024-03-01 01:02:03.456", "1970-01-01 00:00:01.000", nil, "2038-01-19 03:14:07.999"}},
	{change.Column{Type: "time"}, "interval", []change.Value{"-838:59:59", "12:34:56.78", "00:00:00", "-00:00:01.5"}},
	{change.Column{Type: "time"}, "interval", []change.Value{"838:59:59.000000", "-12:00:00.000001", "01:02:03", nil}},
	{change.Column{Type: "varchar"}, "varchar(30)", []change.Value{"héllo wörld ✓", "", "tab\there\\back\rcr\nnl", `\N`}},
	{change.Column{Type: "char"}, "character(5)", []change.Value{"ab", "", "abcde", nil}},
	{change.Column{Type: "text"}, "text", []change.Value{"two\nlines", "😀", "a'b\"c", []byte("a\\b\tc")}},
	{change.Column{Type: "blob"}, "bytea", []change.Value{[]byte{0x5c, 0x00, 0xff}, []byte{}, []byte("\\x41"), nil}},
	{change.Column{Type: "json"}, "jsonb", []change.Value{`{"a": [1, 2.5, "x"], "b": null}`, "[]", `"x\ty"`, []byte(`{"z": 1.50}`)}},
	{change.Column{Type: "json"}, "json", []change.Value{`{"a": [1, 2.5, "x"], "b": null}`, "[]", `"x\ty"`, nil}},
	{change.Column{Type: "enum"}, "text", []change.Value{"b", "", "x,z", nil}},
}

// TestCopyBinaryReadsAsText: every value of every column type the
// binary COPY format is written for reads back from PostgreSQL exactly
// as the same value sent in COPY's text format (the format the
// statements' parameters match): numerics with their scale, floats to
// the bit, timestamps and dates (zero dates as -infinity or NULL, a
// fraction rounded by the column's precision), TIME's intervals past a
// day and negative, bits, text with the bytes the text format escapes,
// bytes, JSON.
func TestCopyBinaryReadsAsText(t *testing.T) {
	c := pgConn(t)
	ctx := t.Context()
	var defs, cols []string
	for i, bc := range binCases {
		name := "c" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		cols = append(cols, name)
		defs = append(defs, name+" "+bc.pgType)
	}
	for _, table := range []string{"as_text", "as_binary"} {
		if _, err := c.Exec(ctx, "CREATE TEMPORARY TABLE "+table+" (n integer, "+strings.Join(defs, ", ")+")"); err != nil {
			t.Fatal(err)
		}
	}
	rows := len(binCases[0].values)
	var text []byte
	bin := slices.Clone(copyHeader)
	for r := range rows {
		text = append(text, byte('0'+r))
		bin = binary.BigEndian.AppendUint16(bin, uint16(1+len(binCases)))
		bin = binary.BigEndian.AppendUint32(bin, 4)
		bin = binary.BigEndian.AppendUint32(bin, uint32(r))
		for i := range binCases {
			bc := &binCases[i]
			oid := typeOID(t, c, bc.pgType)
			if !binaryOID(oid) {
				t.Fatalf("%s (OID %d) has no binary encoding", bc.pgType, oid)
			}
			v := bc.values[r]
			var err error
			text = append(text, '\t')
			if text, err = appendCopyField(text, pgValue(&bc.col, v), oid == byteaOID); err != nil {
				t.Fatal(err)
			}
			var ok bool
			if bin, ok = appendBinaryField(bin, oid, &bc.col, v); !ok {
				t.Fatalf("%s value %#v into %s: no binary encoding", bc.col.Type, v, bc.pgType)
			}
		}
		text = append(text, '\n')
	}
	bin = binary.BigEndian.AppendUint16(bin, 0xffff)
	all := "n, " + strings.Join(cols, ", ")
	if _, err := c.PgConn().CopyFrom(ctx, bytes.NewReader(text), "COPY as_text ("+all+") FROM STDIN"); err != nil {
		t.Fatalf("text: %v", err)
	}
	if _, err := c.PgConn().CopyFrom(ctx, bytes.NewReader(bin), "COPY as_binary ("+all+") FROM STDIN (FORMAT binary)"); err != nil {
		t.Fatalf("binary: %v", err)
	}
	read := func(table string) [][]string {
		var sel []string
		for i, col := range cols {
			if binCases[i].pgType == "double precision" || binCases[i].pgType == "real" {
				col = "float8send(" + col + ")" // the bits, not a rounded text
			}
			sel = append(sel, "coalesce("+col+"::text, 'NULL')")
		}
		rs, err := c.Query(ctx, "SELECT ARRAY["+strings.Join(sel, ", ")+"] FROM "+table+" ORDER BY n")
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rs, pgx.RowTo[[]string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	asText, asBinary := read("as_text"), read("as_binary")
	if len(asText) != rows || len(asBinary) != rows {
		t.Fatalf("read %d and %d rows, want %d", len(asText), len(asBinary), rows)
	}
	for r := range rows {
		for i, bc := range binCases {
			if asText[r][i] != asBinary[r][i] {
				t.Errorf("%s value %#v into %s: binary reads %q, text %q", bc.col.Type, bc.values[r], bc.pgType, asBinary[r][i], asText[r][i])
			}
		}
	}
}

// TestCopyBinaryRefuses: values with no exact binary encoding here say
// so (their run goes in the text format), rather than send a value the
// text format would not give.
func TestCopyBinaryRefuses(t *testing.T) {
	for _, c := range []struct {
		col change.Column
		oid uint32
		v   change.Value
	}{
		{change.Column{Type: "int"}, int2OID, int64(40000)},
		{change.Column{Type: "bigint", Unsigned: true}, int8OID, uint64(math.MaxUint64)},
		{change.Column{Type: "decimal"}, numericOID, "1e5"},
		{change.Column{Type: "decimal"}, numericOID, "NaN"},
		{change.Column{Type: "decimal"}, numericOID, "1.2.3"},
		{change.Column{Type: "datetime"}, timestampOID, "2024-02-30 00:00:00"},
		{change.Column{Type: "datetime"}, timestampOID, "2024-02-28T00:00:00"},
		{change.Column{Type: "datetime"}, timestampOID, "2024-02-28 00:00:00.1234567"},
		{change.Column{Type: "date"}, dateOID, "2024-13-01"},
		{change.Column{Type: "time"}, intervalOID, "12:60:00"},
		{change.Column{Type: "varchar"}, byteaOID, `\x41`},
		{change.Column{Type: "double"}, float4OID, 0.1},
		{change.Column{Type: "int"}, float8OID, int64(1)},
		{change.Column{Type: "varchar"}, int4OID, "12"},
		{change.Column{Type: "varchar"}, 869 /* inet */, "10.0.0.1"},
	} {
		if got, ok := appendBinaryField(nil, c.oid, &c.col, c.v); ok {
			t.Errorf("%s value %#v into OID %d: binary %x, want none", c.col.Type, c.v, c.oid, got)
		}
	}
}

// pgConn connects to the machine's PostgreSQL (its database postgres:
// the tests here make only temporary tables, gone with the session).
func pgConn(t *testing.T) *pgx.Conn {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses PostgreSQL on 127.0.0.1:5432")
	}
	c, err := pgx.Connect(context.Background(), "postgres://postgres@127.0.0.1:5432/postgres")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL on 127.0.0.1:5432: %v", err)
		}
		t.Skipf("no PostgreSQL on 127.0.0.1:5432: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// typeOID is the OID of PostgreSQL type name.
func typeOID(t *testing.T, c *pgx.Conn, name string) uint32 {
	t.Helper()
	var oid uint32
	if err := c.QueryRow(t.Context(), "SELECT $1::regtype::oid", name).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	return oid
}
