package change

import (
	"slices"
	"strconv"
	"unsafe"
)

// NewValueRows returns the rows of table t given as Values (one slice per
// row, a Value per column of t, each of the dynamic type Value documents)
// as INSERTs numbered from index: rows a snapshot read with SELECT and
// changed since. Their text is formatted from the Values as they are;
// nothing is converted.
func NewValueRows(t *Table, index int, rows [][]Value) []RowChange {
	codec := &Codec{Table: t, converts: make([]bool, len(t.Columns))}
	images := &Images{Decoded: make([][]any, len(rows))}
	out := make([]RowChange, len(rows))
	for k, row := range rows {
		images.Decoded[k] = row
		out[k] = NewRowChange(codec, Insert, index+k, images, k)
	}
	return out
}

// TextRows are rows of a table as SQL's text protocol gives them (a
// snapshot's SELECT): each value the text the server printed, kept as it
// is in one buffer and formatted straight from it, as the binlog's raw
// images are; turned into a Value only when asked (RowChange.After, Row).
// Building them costs no allocation per value.
//
// The text must be what a session in the server's default time zone gets
// for the columns of the table given, with FLOAT columns selected as
// DOUBLE (col + 0e0: their exact binary value, where MySQL prints six
// digits).
type TextRows struct {
	codec  *Codec
	images Images
}

// NewTextRows returns an empty set of rows of t.
func NewTextRows(t *Table) *TextRows {
	r := &TextRows{codec: &Codec{Table: t, converts: make([]bool, len(t.Columns))}}
	r.images.cols = len(t.Columns)
	r.images.ends = []int32{}
	return r
}

// Add appends the next value of the current row: its text, or nil for
// NULL; after the table's last column, the next value starts a new row.
func (r *TextRows) Add(text []byte) {
	im := &r.images
	if text == nil {
		im.at, im.ends = append(im.at, -1), append(im.ends, -1)
	} else {
		im.at = append(im.at, int32(len(im.data)))
		im.data = append(im.data, text...)
		im.ends = append(im.ends, int32(len(im.data)))
	}
}

// Grow makes room for rows more rows of about size bytes of text in all,
// so that reading a chunk of known length does not grow its buffers
// again and again.
func (r *TextRows) Grow(rows, size int) {
	im := &r.images
	n := rows * im.cols
	im.at, im.ends = slices.Grow(im.at, n), slices.Grow(im.ends, n)
	im.data = slices.Grow(im.data, size)
}

// Columns is the number of values a row has.
func (r *TextRows) Columns() int { return r.images.cols }

// Len is the number of whole rows.
func (r *TextRows) Len() int { return len(r.images.at) / max(1, r.images.cols) }

// TextBytes is the length of the rows' text.
func (r *TextRows) TextBytes() int { return len(r.images.data) }

// Bytes is the memory the rows take (text and offsets), for Event.Size.
func (r *TextRows) Bytes() int64 { return int64(cap(r.images.data)) + r.images.OffsetBytes() }

// Row returns row k as Values.
func (r *TextRows) Row(k int) []Value {
	rc := NewRowChange(r.codec, Insert, 0, &r.images, k)
	return rc.After()
}

// Changes returns rows from to to (exclusive) as INSERTs numbered from
// index, sharing the rows' buffer.
func (r *TextRows) Changes(index, from, to int) []RowChange {
	out := make([]RowChange, 0, to-from)
	for k := from; k < to; k++ {
		out = append(out, NewRowChange(r.codec, Insert, index+k-from, &r.images, k))
	}
	return out
}

// text is text image k's value of column i, nil for NULL.
func (im *Images) text(k int32, i int) []byte {
	j := int(k)*im.cols + i
	if im.at[j] < 0 {
		return nil
	}
	return im.data[im.at[j]:im.ends[j]:im.ends[j]]
}

// appendTextValue writes column i's value x, as the server printed it,
// in canal's string form: as Codec.appendText writes the Value the binlog
// gives the same value.
func (t *Codec) appendTextValue(b []byte, i int, x []byte, quoted bool) []byte {
	c := &t.Columns[i]
	s := unsafe.String(unsafe.SliceData(x), len(x)) // read during this call only
	switch {
	case intTypes[c.Type] && c.Unsigned:
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return appendUintText(b, v, quoted)
		}
	case intTypes[c.Type]:
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return appendIntText(b, v, quoted)
		}
	case c.Type == "float" || c.Type == "double" || c.Type == "bit":
		return appendValueText(b, textValue(c, x), quoted)
	case c.Binary:
		return appendLatin1Text(b, x, quoted)
	}
	return appendStringText(b, s, quoted)
}

// intTypes are the column types whose Value is an int64 or uint64 (YEAR
// too: the binlog gives it as a number).
var intTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "integer": true, "bigint": true, "year": true}

// textValue is the Value of column c whose value the server printed as x.
func textValue(c *Column, x []byte) Value {
	s := unsafe.String(unsafe.SliceData(x), len(x))
	switch {
	case intTypes[c.Type] && c.Unsigned:
		v, _ := strconv.ParseUint(s, 10, 64)
		return v
	case intTypes[c.Type]:
		v, _ := strconv.ParseInt(s, 10, 64)
		return v
	case c.Type == "float":
		f, _ := strconv.ParseFloat(s, 64)
		return float32(f)
	case c.Type == "double":
		f, _ := strconv.ParseFloat(s, 64)
		return f
	case c.Type == "bit":
		var v uint64
		for _, d := range x {
			v = v<<8 | uint64(d)
		}
		return v
	case c.Binary:
		return append([]byte(nil), x...)
	}
	return string(x)
}
