package mysqlbinlog

import (
	"encoding/binary"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"
)

// StmtEndFlag marks the last rows event of a statement (STMT_END_F).
const StmtEndFlag uint16 = 0x0001

// partialJSONUpdates is the bit of binlog_row_value_options=PARTIAL_JSON
// in a PARTIAL_UPDATE_ROWS after image.
const partialJSONUpdates = 1

// Row is one row change. Before is nil for an insert, After nil for a
// delete. A value is nil for SQL NULL, else what appendValue takes; in a
// PARTIAL_UPDATE_ROWS event a JSON column's After may be JSONDiffs.
type Row struct{ Before, After []any }

// Rows is a WRITE_ROWS, UPDATE_ROWS or DELETE_ROWS event (v2) or a
// PARTIAL_UPDATE_ROWS event.
type Rows struct {
	Type  replication.EventType
	Table *Table
	Flags uint16 // StmtEndFlag on the statement's last rows event
	Rows  []Row
	// BeforeColumns and AfterColumns are the columns each image holds
	// (binlog_row_image MINIMAL or NOBLOB); nil is every column (FULL).
	BeforeColumns, AfterColumns []bool
}

// Body returns the event body.
func (r Rows) Body() ([]byte, error) {
	b, err := r.Header()
	if err != nil {
		return nil, err
	}
	for i, row := range r.Rows {
		if b, err = r.AppendRow(b, row); err != nil {
			return nil, fmt.Errorf("mysqlbinlog: %s.%s row %d %w", r.Table.Schema, r.Table.Name, i, err)
		}
	}
	return b, nil
}

// images reports which images the event type holds.
func (r Rows) images() (before, after bool, err error) {
	switch r.Type {
	case replication.WRITE_ROWS_EVENTv2:
		return false, true, nil
	case replication.DELETE_ROWS_EVENTv2:
		return true, false, nil
	case replication.UPDATE_ROWS_EVENTv2, replication.PARTIAL_UPDATE_ROWS_EVENT:
		return true, true, nil
	}
	return false, false, fmt.Errorf("mysqlbinlog: %s is not a v2 rows event type", r.Type)
}

// columns returns the columns of the before and after images.
func (r Rows) columns() (before, after []bool) {
	// A full image's bitmap has every bit of its bytes set, the padding
	// too (bitmap_set_all); a partial one only its columns'.
	all := make([]bool, (len(r.Table.Columns)+7)/8*8)
	for i := range all {
		all[i] = true
	}
	before, after = r.BeforeColumns, r.AfterColumns
	if before == nil {
		before = all
	}
	if after == nil {
		after = all
	}
	return before, after
}

// Header returns the body up to the rows: table id, flags, extra row
// info, column count and bitmaps. Header then AppendRow of each row is
// Body, for callers that size events as they go.
func (r Rows) Header() ([]byte, error) {
	hasBefore, hasAfter, err := r.images()
	if err != nil {
		return nil, err
	}
	before, after := r.columns()
	b := appendTableID(nil, r.Table.ID)
	b = binary.LittleEndian.AppendUint16(b, r.Flags)
	b = binary.LittleEndian.AppendUint16(b, 2) // extra row info: none, its length counts itself
	b = appendPackedInt(b, uint64(len(r.Table.Columns)))
	if hasBefore {
		b = append(b, lsbBitmap(before)...)
	}
	if hasAfter {
		b = append(b, lsbBitmap(after)...)
	}
	return b, nil
}

// AppendRow appends one row's images.
func (r Rows) AppendRow(b []byte, row Row) ([]byte, error) {
	hasBefore, hasAfter, err := r.images()
	if err != nil {
		return nil, err
	}
	before, after := r.columns()
	if hasBefore {
		if b, err = r.appendImage(b, row.Before, before, false); err != nil {
			return nil, fmt.Errorf("before image: %w", err)
		}
	}
	if hasAfter {
		partial := r.Type == replication.PARTIAL_UPDATE_ROWS_EVENT
		if b, err = r.appendImage(b, row.After, after, partial); err != nil {
			return nil, fmt.Errorf("after image: %w", err)
		}
	}
	return b, nil
}

func lsbBitmap(bits []bool) []byte {
	out := make([]byte, (len(bits)+7)/8)
	for i, set := range bits {
		if set {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}

func (r Rows) appendImage(b []byte, values []any, present []bool, partial bool) ([]byte, error) {
	cols := r.Table.Columns
	if len(values) != len(cols) {
		return nil, fmt.Errorf("%d values for %d columns", len(values), len(cols))
	}
	if partial {
		// value options, then one bit per JSON column: is its value a diff
		b = appendPackedInt(b, partialJSONUpdates)
		var bits []bool
		for i, c := range cols {
			if c.Kind == KindJSON {
				_, isDiff := values[i].(JSONDiffs)
				bits = append(bits, isDiff)
			}
		}
		b = append(b, lsbBitmap(bits)...)
	}
	var nulls []bool
	for i := range cols {
		if present[i] {
			nulls = append(nulls, values[i] == nil)
		}
	}
	b = append(b, lsbBitmap(nulls)...)
	for i, c := range cols {
		if !present[i] || values[i] == nil {
			continue
		}
		if diffs, ok := values[i].(JSONDiffs); ok {
			if !partial || c.Kind != KindJSON {
				return nil, fmt.Errorf("column %s: a JSON diff belongs only in a PARTIAL_UPDATE_ROWS after image of a JSON column", c.Name)
			}
			d, err := diffs.encode()
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.Name, err)
			}
			b = binary.LittleEndian.AppendUint32(b, uint32(len(d)))
			b = append(b, d...)
			continue
		}
		var err error
		if b, err = appendValue(b, c, values[i]); err != nil {
			return nil, err
		}
	}
	return b, nil
}
