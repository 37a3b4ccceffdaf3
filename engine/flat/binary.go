package flat

import (
	"encoding/binary"

	"github.com/braid-cdc/braid/engine/change"
)

// braid's binary stream encoding holds the flat messages Writer writes
// as JSON, the same fields and the same values (canal's string form), with
// every string and value length-prefixed instead of quoted and escaped, and
// column names given once per message instead of once per row. A consumer
// finds each value without scanning or unescaping it: the Go client decodes
// it at a fraction of the JSON's cost (see api/native, which serves it to a
// client that asks for it).
//
// A stream is a sequence of frames, each uvarint(len(payload)) then the
// payload, whose first byte says what it holds:
//
//	'C' uvarint(seq)                          a checkpoint (see api/native)
//	'M' uvarint(id) str(database) str(table)  a message
//	    list(pkNames) byte(isDdl) str(type) varint(es) varint(ts) str(sql)
//	    columns rows(data) rows(old)
//	    uvarint(seq) str(source) str(originDatabase) str(originTable)
//	    str(position) str(gtid) [uvarint(flags)]
//
// where str is uvarint(len) and the bytes; list is uvarint(n+1) and n
// strs, or 0 for null; columns is uvarint(n+1) and n times str(name)
// varint(sqlType) str(mysqlType), or 0 when sqlType and mysqlType are null
// (a DDL); rows is uvarint(r+1) and r rows of one cell per column, or 0
// for null; and a cell is uvarint(0) for a column the row does not hold
// (old's unchanged columns, and a column a binlog_row_image MINIMAL or
// NOBLOB image leaves out), uvarint(1) for NULL, or uvarint(k+2) and k
// bytes of UTF-8 text. An empty gtid is no gtid. varint is zig-zag. flags,
// written only when not 0, has bit 1 for a message of snapshot rows.
const (
	// BinaryMessage and BinaryCheckpoint are the first bytes of the binary
	// encoding's frames.
	BinaryMessage    = 'M'
	BinaryCheckpoint = 'C'
)

// Binary cells' first numbers, before a value's length+2.
const (
	binaryAbsent = 0
	binaryNull   = 1
)

// flushBinary writes the pending run as one message in the binary
// encoding; see flush.
func (w *Writer) flushBinary(out func([]byte) error) error {
	first := w.run[0]
	t := first.Table
	db, table := t.Logical()
	b := append(w.buf[:0], BinaryMessage)
	b = binary.AppendUvarint(b, w.Seq)
	b = appendBinaryString(b, db)
	b = appendBinaryString(b, table)
	keys := t.KeyNames()
	if len(keys) == 0 {
		b = append(b, 0) // null
	} else {
		b = binary.AppendUvarint(b, uint64(len(keys))+1)
		for _, k := range keys {
			b = appendBinaryString(b, k)
		}
	}
	b = append(b, 0) // isDdl
	b = appendBinaryString(b, first.Kind.String())
	b = binary.AppendVarint(b, w.commitMillis())
	b = binary.AppendVarint(b, w.now().UnixMilli())
	b = append(b, 0) // sql: ""
	b = binary.AppendUvarint(b, uint64(len(t.Columns))+1)
	for i := range t.Columns {
		c := &t.Columns[i]
		b = appendBinaryString(b, c.Name)
		b = binary.AppendVarint(b, int64(SQLType(c)))
		b = appendBinaryString(b, c.RawType)
	}
	b = binary.AppendUvarint(b, uint64(len(w.run))+1)
	for _, rc := range w.run {
		b = appendBinaryRow(b, rc, rc.Kind != change.Delete, false, len(t.Columns))
	}
	if first.Kind == change.Update {
		b = binary.AppendUvarint(b, uint64(len(w.run))+1)
		for _, rc := range w.run {
			b = appendBinaryRow(b, rc, false, true, len(t.Columns))
		}
	} else {
		b = append(b, 0) // old: null
	}
	b = w.appendBinaryTail(b, w.runEv, t.Schema, t.Name)
	w.buf = b
	err := out(b)
	w.endRun()
	return err
}

// ddlBinary renders a DDL as a message in the binary encoding; see
// ddlLine.
func (w *Writer) ddlBinary(ev *change.Event) []byte {
	schema, table := ev.DDL.Origin()
	db, ltable := ev.DDL.Logical()
	b := append(w.buf[:0], BinaryMessage)
	b = binary.AppendUvarint(b, w.Seq)
	b = appendBinaryString(b, db)
	b = appendBinaryString(b, ltable)
	b = append(b, 0, 1) // pkNames: null; isDdl
	b = appendBinaryString(b, DDLKind(ev.DDL.SQL))
	b = binary.AppendVarint(b, ev.CommitTime.UnixMilli())
	b = binary.AppendVarint(b, w.now().UnixMilli())
	b = appendBinaryString(b, ev.DDL.SQL)
	b = append(b, 0, 0, 0) // columns, data, old: null
	b = w.appendBinaryTail(b, ev, schema, table)
	w.buf = b
	return b
}

// emptyBinary renders the open transaction, which holds no row change,
// as a message of type TypeEmpty in the binary encoding; see emptyLine.
func (w *Writer) emptyBinary() []byte {
	typ, sql := w.emptyType()
	b := append(w.buf[:0], BinaryMessage)
	b = binary.AppendUvarint(b, w.Seq)
	b = append(b, 0, 0, 0, 0) // database, table: ""; pkNames: null; isDdl
	b = appendBinaryString(b, typ)
	b = binary.AppendVarint(b, w.commitMillis())
	b = binary.AppendVarint(b, w.now().UnixMilli())
	b = appendBinaryString(b, sql)
	b = append(b, 0, 0, 0) // columns, data, old: null
	b = w.appendBinaryTail(b, w.tx, "", "")
	w.buf = b
	return b
}

// appendBinaryTail writes braid's fields; see appendBraidFields.
func (w *Writer) appendBinaryTail(b []byte, ev *change.Event, originDB, originTable string) []byte {
	b = binary.AppendUvarint(b, w.Seq)
	b = appendBinaryString(b, ev.Source)
	b = appendBinaryString(b, originDB)
	b = appendBinaryString(b, originTable)
	b = appendBinaryString(b, ev.Pos.String())
	b = appendBinaryString(b, ev.GTID)
	if ev.Snapshot {
		b = binary.AppendUvarint(b, 1) // flags: 1 snapshot
	}
	return b
}

func appendBinaryString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBinaryRow writes one of rc's images as n cells, as appendRow
// writes it as JSON.
func appendBinaryRow(b []byte, rc *change.RowChange, after, onlyChanged bool, n int) []byte {
	if offs := rc.RawOffsets(after); offs != nil && !onlyChanged && !rc.Partial(after) {
		// The common case in a loop of its own: every column of a raw image.
		for i, off := range offs[:min(n, len(offs))] {
			if off < 0 {
				b = append(b, binaryNull)
				continue
			}
			at := len(b)
			b = rc.AppendRawText(append(b, 0), i, off, false)
			if k := len(b) - at + 1; k < 0x80 {
				b[at] = byte(k) // the common case inlined: see fixCellLength
			} else {
				b = fixCellLength(b, at)
			}
		}
		for range n - len(offs) {
			b = append(b, binaryAbsent)
		}
		return b
	}
	if onlyChanged {
		if before, after := rc.RawChanges(); before != nil {
			// An UPDATE's old values from the raw images, as appendRow.
			for i, off := range before[:min(n, len(before))] {
				switch {
				case !rc.RawChanged(i, off, after[i]):
					b = append(b, binaryAbsent)
				case off < 0:
					b = append(b, binaryNull)
				default:
					at := len(b)
					b = fixCellLength(rc.AppendRawText(append(b, 0), i, off, false), at)
				}
			}
			for range n - len(before) {
				b = append(b, binaryAbsent)
			}
			return b
		}
	}
	for i := range n {
		if onlyChanged && !rc.Changed(i) || !rc.Present(after, i) {
			b = append(b, binaryAbsent)
			continue
		}
		at := len(b)
		b = append(b, 0)
		var null bool
		if b, null = rc.AppendText(b, after, i); null {
			b[at] = binaryNull
			continue
		}
		b = fixCellLength(b, at)
	}
	return b
}

// fixCellLength writes the cell number of the value appended after b[at]
// (its length + 2), in the one byte reserved for it when the value is
// shorter than 126 bytes, else making room for the number's bytes.
func fixCellLength(b []byte, at int) []byte {
	k := uint64(len(b)-at-1) + 2
	if k < 0x80 {
		b[at] = byte(k)
		return b
	}
	var num [binary.MaxVarintLen64]byte
	head := binary.PutUvarint(num[:], k)
	b = append(b, num[:head-1]...) // grow by the extra bytes
	copy(b[at+head:], b[at+1:len(b)-(head-1)])
	copy(b[at:], num[:head])
	return b
}
