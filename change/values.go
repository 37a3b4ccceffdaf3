package change

// NewValueRows returns the rows of table t given as Values (one slice per
// row, a Value per column of t, each of the dynamic type Value documents)
// as INSERTs numbered from index: rows a snapshot read with SELECT rather
// than from the binlog. Their text is formatted from the Values as they
// are; nothing is converted.
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
