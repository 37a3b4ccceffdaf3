package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"
)

// binaryFrames are a stream's frames for the tests: a checkpoint, a
// message of two columns with an UPDATE's data and old, a DDL.
func binaryFrames() [][]byte {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	cell := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))+2), s...) }
	m := []byte{frameMessage, 7}
	m = str(str(m, "shop"), "orders")
	m = str(append(m, 2), "id") // pkNames: ["id"]
	m = str(append(m, 0), "UPDATE")
	m = binary.AppendVarint(m, 1_700_000_000_000)
	m = binary.AppendVarint(m, 1_700_000_000_005)
	m = str(m, "")
	m = append(m, 3) // two columns
	m = str(binary.AppendVarint(str(m, "id"), 4), "int(11)")
	m = str(binary.AppendVarint(str(m, "note"), 12), "varchar(20)")
	m = append(m, 3) // data: two rows
	m = cell(cell(m, "1"), "new")
	m = append(cell(m, "2"), binaryNull)
	m = append(m, 3) // old: two rows
	m = cell(append(m, binaryAbsent), "old")
	m = cell(append(m, binaryAbsent), string(bytes.Repeat([]byte("x"), 300)))
	m = append(m, 7)
	m = str(str(str(str(str(m, "s0"), "shop_0"), "orders"), "binlog.000001:4"), "")
	ddl := []byte{frameMessage, 8}
	ddl = str(str(ddl, "shop"), "orders")
	ddl = str(append(ddl, 0, 1), "ALTER")
	ddl = binary.AppendVarint(binary.AppendVarint(ddl, 1), 2)
	ddl = str(ddl, "ALTER TABLE shop_0.orders ADD c INT")
	ddl = append(ddl, 0, 0, 0, 8)
	ddl = str(str(str(str(str(ddl, "s0"), "shop_0"), "orders"), "binlog.000001:400"), "0-1-2")
	return [][]byte{{frameCheckpoint, 6}, m, ddl}
}

// binaryFrameOf encodes a view of a message in the binary encoding, as
// the server would have sent it.
func binaryFrameOf(v *MessageView) []byte {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	b := binary.AppendUvarint([]byte{frameMessage}, v.ID)
	b = str(str(b, v.Database), v.Table)
	if v.hasPkNames {
		b = binary.AppendUvarint(b, uint64(len(v.PkNames))+1)
		for _, k := range v.PkNames {
			b = str(b, k)
		}
	} else {
		b = append(b, 0)
	}
	b = append(b, map[bool]byte{false: 0, true: 1}[v.IsDdl])
	b = str(b, v.Type)
	b = binary.AppendVarint(binary.AppendVarint(b, v.Es), v.Ts)
	b = str(b, v.SQL)
	rows := func(b []byte, rs *viewRows) []byte {
		if !rs.set {
			return append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(rs.rows))+1)
		for r := range rs.rows {
			for c := range v.cols {
				switch cell := rs.cell(r, c); {
				case cell == nil:
					b = append(b, binaryAbsent)
				case cell.null:
					b = append(b, binaryNull)
				default:
					b = append(binary.AppendUvarint(b, uint64(len(cell.v))+2), cell.v...)
				}
			}
		}
		return b
	}
	if v.hasSQLType {
		b = binary.AppendUvarint(b, uint64(len(v.cols))+1)
		for _, c := range v.cols {
			b = str(binary.AppendVarint(str(b, c.name), int64(c.sqlType)), c.mysqlType)
		}
		b = rows(rows(b, &v.data), &v.old)
	} else {
		b = append(b, 0, 0, 0)
	}
	b = binary.AppendUvarint(b, v.Seq)
	return str(str(str(str(str(b, v.Source), v.OriginDatabase), v.OriginTable), v.Position), v.GTID)
}

func frameStream(frames [][]byte) []byte {
	var b []byte
	for _, f := range frames {
		b = append(binary.AppendUvarint(b, uint64(len(f))), f...)
	}
	return b
}

// TestBinaryDecode decodes hand-built frames into the messages they hold.
func TestBinaryDecode(t *testing.T) {
	var d lineDecoder
	var v MessageView
	frames := binaryFrames()
	if err := d.decodeBinary(frames[0], &v); err != nil || v.checkpoint == nil || *v.checkpoint != 6 {
		t.Fatalf("checkpoint frame: %v, %v", err, v.checkpoint)
	}
	if err := d.decodeBinary(frames[1], &v); err != nil {
		t.Fatal(err)
	}
	m := v.Message()
	long := string(bytes.Repeat([]byte("x"), 300))
	if m.ID != 7 || m.Seq != 7 || m.Database != "shop" || m.Table != "orders" || m.Type != "UPDATE" || m.IsDdl ||
		m.Es != 1_700_000_000_000 || m.Ts != 1_700_000_000_005 || len(m.PkNames) != 1 || m.PkNames[0] != "id" ||
		m.SQLType["note"] != 12 || m.MysqlType["id"] != "int(11)" || m.Source != "s0" || m.OriginDatabase != "shop_0" ||
		m.Position != "binlog.000001:4" || m.GTID != "" || m.Raw != nil {
		t.Fatalf("message %+v", m)
	}
	if len(m.Data) != 2 || *m.Data[0]["note"] != "new" || m.Data[1]["note"] != nil || *m.Data[1]["id"] != "2" ||
		len(m.Old) != 2 || len(m.Old[0]) != 1 || *m.Old[0]["note"] != "old" || *m.Old[1]["note"] != long {
		t.Fatalf("rows %v, old %v", m.Data, m.Old)
	}
	if !v.Changed(0, 1) || v.Changed(0, 0) {
		t.Error("Changed: want note changed and id not")
	}
	if err := d.decodeBinary(frames[2], &v); err != nil {
		t.Fatal(err)
	}
	if m := v.Message(); !m.IsDdl || m.SQL != "ALTER TABLE shop_0.orders ADD c INT" || m.Data != nil || m.SQLType != nil || m.GTID != "0-1-2" {
		t.Fatalf("DDL message %+v", m)
	}
	// A JSON line's view, encoded, decodes to the line's message.
	line := benchLine(5)
	var lv MessageView
	if !d.decode(line, &lv) {
		t.Fatal("the line decoder gave up")
	}
	want := lv.Message()
	want.Raw = nil
	if err := d.decodeBinary(binaryFrameOf(&lv), &v); err != nil {
		t.Fatal(err)
	}
	if got := v.Message(); !reflect.DeepEqual(got, want) {
		t.Fatalf("binary message\n got %+v\nwant %+v", got, want)
	}
	// Every frame cut short, or with a byte more, is refused.
	for _, f := range frames {
		for n := range len(f) {
			if err := d.decodeBinary(f[:n], &v); !errors.Is(err, errBadFrame) {
				t.Fatalf("frame cut to %d of %d bytes: %v, want errBadFrame", n, len(f), err)
			}
		}
		if err := d.decodeBinary(append(f[:len(f):len(f)], 0), &v); !errors.Is(err, errBadFrame) {
			t.Fatalf("frame with a byte more: %v, want errBadFrame", err)
		}
	}
}

// TestFrameReader reads a stream of frames a byte at a time and through a
// buffer shorter than some frames, and reports a stream cut inside a frame
// or a frame too long.
func TestFrameReader(t *testing.T) {
	frames := binaryFrames()
	stream := frameStream(frames)
	for _, size := range []int{16, 64, 1 << 16} {
		fr := &frameReader{r: iotest.OneByteReader(bytes.NewReader(stream)), buf: make([]byte, size)}
		for i, want := range frames {
			got, err := fr.next()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("buffer %d, frame %d: %v, %q, want %q", size, i, err, got, want)
			}
		}
		if _, err := fr.next(); err != io.EOF {
			t.Fatalf("buffer %d: after the last frame %v, want EOF", size, err)
		}
		fr = &frameReader{r: bytes.NewReader(stream[:len(stream)-1]), buf: make([]byte, size)}
		var err error
		for range frames {
			if _, err = fr.next(); err != nil {
				break
			}
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("buffer %d: a stream cut inside its last frame gave %v, want ErrUnexpectedEOF", size, err)
		}
	}
	huge := binary.AppendUvarint(nil, maxFrame+1)
	if _, err := (&frameReader{r: bytes.NewReader(huge), buf: make([]byte, 64)}).next(); !errors.Is(err, errBadFrame) {
		t.Fatalf("a frame of more than maxFrame bytes: %v", err)
	}
}

// FuzzBinaryFrames feeds the binary decoder any stream: it fails or
// decodes, never panics, and what it decodes can be read whole.
func FuzzBinaryFrames(f *testing.F) {
	f.Add(frameStream(binaryFrames()))
	for _, fr := range binaryFrames() {
		f.Add(frameStream([][]byte{fr}))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		fr := &frameReader{r: bytes.NewReader(stream), buf: make([]byte, 32)}
		var d lineDecoder
		var v MessageView
		for {
			p, err := fr.next()
			if err != nil {
				return
			}
			if d.decodeBinary(p, &v) != nil {
				continue
			}
			m := v.Message()
			for r := range v.Rows() {
				for c := range v.Columns() {
					v.Value(r, c)
				}
			}
			for r := range v.OldRows() {
				for c := range v.Columns() {
					v.Old(r, c)
					v.Changed(r, c)
				}
			}
			_ = m
		}
	})
}
