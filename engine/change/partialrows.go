package change

import (
	"fmt"
	"math"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// partialJSONUpdates is the binlog_row_value_options bit of an after
// image whose JSON columns may hold diffs (PARTIAL_JSON).
const partialJSONUpdates = 1

// SplitPartialRows is SplitRows for a PARTIAL_UPDATE_ROWS event (MySQL
// 8.0+, binlog_row_value_options=PARTIAL_JSON) of a table whose columns
// have types tm.ColumnType: each after image starts with its value options
// and a bitmap of the JSON columns logged as diffs; braid applies each
// column's diffs to its value in the before image and keeps the images as
// those of an UPDATE_ROWS event, so a reader sees whole after images. A
// partial column whose before image is missing (binlog_row_image other
// than FULL) is an error: there is nothing to apply the diffs to.
func SplitPartialRows(re *replication.RowsEvent, tm *replication.TableMapEvent, shapes []Shape, pos int, data []byte) (rr *Images, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("partial rows event of %s.%s is truncated or malformed: %v", re.Table.Schema, re.Table.Table, r)
		}
	}()
	cols := int(re.ColumnCount)
	if cols != len(shapes) || len(tm.ColumnType) != cols {
		return nil, fmt.Errorf("rows event of %s.%s has %d columns, its table map %d", re.Table.Schema, re.Table.Table, cols, len(shapes))
	}
	rows := data[pos:]
	jsonCols := 0
	for _, tp := range tm.ColumnType {
		if tp == mysql.MYSQL_TYPE_JSON {
			jsonCols++
		}
	}
	present1, present2 := presentColumns(re.ColumnBitmap1, cols), presentColumns(re.ColumnBitmap2, cols)
	before := &Images{data: rows, cols: cols}
	out := make([]byte, 0, len(rows)+len(rows)/2)
	for at := 0; at < len(rows); {
		before.at = before.at[:0]
		end, err := before.image(shapes, at, re.ColumnBitmap1, present1)
		if err != nil {
			return nil, err
		}
		out = append(out, rows[at:end]...)
		at = end

		options, _, n := mysql.LengthEncodedInt(rows[at:])
		at += n
		var partial []byte
		if options&partialJSONUpdates != 0 {
			partial = rows[at : at+(jsonCols+7)/8]
			at += len(partial)
		}
		nulls := rows[at : at+(present2+7)/8]
		out = append(out, nulls...)
		at += len(nulls)
		nullIdx, jsonIdx := 0, 0
		for i, sh := range shapes {
			isPartial := false
			if tm.ColumnType[i] == mysql.MYSQL_TYPE_JSON {
				isPartial = partial != nil && partial[jsonIdx>>3]&(1<<(jsonIdx&7)) != 0
				jsonIdx++
			}
			if re.ColumnBitmap2[i>>3]&(1<<(i&7)) == 0 {
				continue
			}
			isNull := nulls[nullIdx>>3]&(1<<(nullIdx&7)) != 0
			nullIdx++
			if isNull || sh.null {
				continue
			}
			n := sh.len(rows[at:])
			if at+n > len(rows) {
				return nil, fmt.Errorf("column %d: a value of %d bytes at %d of %d", i, n, at, len(rows))
			}
			value := rows[at : at+n]
			at += n
			if !isPartial {
				out = append(out, value...)
				continue
			}
			off := before.at[i]
			if off < 0 {
				return nil, fmt.Errorf("%s.%s: a partial JSON update of column %d without its before image: set binlog_row_image=FULL on the server (PARTIAL_JSON needs it)", re.Table.Schema, re.Table.Table, i)
			}
			doc, err := ApplyJSONDiffs(shapes[i].bytes(rows[off:]), sh.bytes(value))
			if err != nil {
				return nil, fmt.Errorf("%s.%s column %d: %w", re.Table.Schema, re.Table.Table, i, err)
			}
			if uint64(len(doc)) >= 1<<(8*sh.prefix) {
				return nil, fmt.Errorf("%s.%s column %d: JSON after a partial update is %d bytes, more than the column holds", re.Table.Schema, re.Table.Table, i, len(doc))
			}
			for k := range sh.prefix {
				out = append(out, byte(len(doc)>>(8*k)))
			}
			out = append(out, doc...)
		}
	}
	return splitRows(re, shapes, out, true)
}

// appendVector appends a VECTOR value (little-endian float32s) as MySQL's
// VECTOR_TO_STRING prints it: "[1.00000e+00,2.50000e-01]".
func appendVector(b []byte, v []byte) []byte {
	b = append(b, '[')
	for i := 0; i+4 <= len(v); i += 4 {
		if i > 0 {
			b = append(b, ',')
		}
		f := math.Float32frombits(uint32(v[i]) | uint32(v[i+1])<<8 | uint32(v[i+2])<<16 | uint32(v[i+3])<<24)
		switch {
		case math.IsNaN(float64(f)):
			b = append(b, "nan"...)
		case math.IsInf(float64(f), 1):
			b = append(b, "inf"...)
		case math.IsInf(float64(f), -1):
			b = append(b, "-inf"...)
		default:
			b = strconv.AppendFloat(b, float64(f), 'e', 5, 32)
		}
	}
	return append(b, ']')
}
