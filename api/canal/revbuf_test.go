package canal

import (
	"bytes"
	"math"
	"testing"

	pbe "github.com/withlin/canal-go/protocol/entry"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestRevBufColumn writes Columns field by field with revBuf and checks
// them against protobuf's own encoding: negative int32s (java.sql.Types
// codes such as TINYINT's -6), oneof fields at their zero value, empty
// strings left out, and invalid UTF-8 replaced (protobuf would refuse it).
func TestRevBufColumn(t *testing.T) {
	for _, c := range []*pbe.Column{
		{Index: 0, SqlType: -6, Name: "flag", IsNullPresent: &pbe.Column_IsNull{IsNull: false}, Value: "-1", MysqlType: "tinyint(4)"},
		{Index: 7, SqlType: 12, Name: "note", IsKey: true, Updated: true, IsNullPresent: &pbe.Column_IsNull{IsNull: true}, MysqlType: "varchar(20)"},
		{Index: 300, SqlType: -5, Name: "ñame", IsNullPresent: &pbe.Column_IsNull{IsNull: false}, Value: "ü\uFFFDx", MysqlType: "bigint(20)"},
	} {
		var r revBuf
		start := r.open()
		r.stringField(10, c.MysqlType)
		value := c.Value
		if c.Index == 300 {
			value = "ü\xffx" // invalid UTF-8 in, U+FFFD out
		}
		r.stringField(8, value)
		r.oneofInt(6, int64(b2i(c.GetIsNull())))
		r.boolField(5, c.Updated)
		r.boolField(4, c.IsKey)
		r.stringField(3, c.Name)
		if c.SqlType != 0 {
			r.oneofInt(2, int64(c.SqlType))
		}
		r.int64Field(1, int64(c.Index))
		if n := r.size() - start; n != proto.Size(c) {
			t.Errorf("column %d: %d bytes, protobuf encodes %d", c.Index, n, proto.Size(c))
		}
		var got pbe.Column
		if err := proto.Unmarshal(r.b[r.i:], &got); err != nil {
			t.Fatalf("column %d: %v", c.Index, err)
		}
		if !proto.Equal(&got, c) {
			t.Errorf("column %d:\n got %v\nwant %v", c.Index, &got, c)
		}
	}
}

// TestFrameBufKept: an encoder keeps its frame buffer while frames need
// about as much (a consumer catching up), grows it with room to spare,
// and lets a big one go only after shrinkAfter frames in a row needed
// under a quarter of it (a consumer that caught up); a small buffer it
// always keeps.
func TestFrameBufKept(t *testing.T) {
	var e encoder
	e.frameBuf(16 << 20)
	first := &e.buf.b[0]
	if got := len(e.buf.b); got < 16<<20 || got > 19<<20 {
		t.Fatalf("a 16 MiB frame got a %d-byte buffer, want 16 MiB and an eighth", got)
	}
	for _, want := range []int{15 << 20, 17 << 20, 16 << 20} { // about the same size
		e.frameBuf(want)
		if &e.buf.b[0] != first {
			t.Fatalf("a %d-byte frame after a 16 MiB one got a new buffer", want)
		}
	}
	for range shrinkAfter - 1 {
		e.frameBuf(4096)
	}
	e.frameBuf(8 << 20) // a big one again: the count starts over
	for range shrinkAfter - 1 {
		e.frameBuf(4096)
	}
	if &e.buf.b[0] != first {
		t.Fatal("the buffer went before shrinkAfter small frames in a row")
	}
	e.frameBuf(4096)
	if len(e.buf.b) > keptFrame {
		t.Fatalf("after %d small frames in a row the buffer still holds %d bytes", shrinkAfter, len(e.buf.b))
	}
	small := &e.buf.b[0]
	for range 2 * shrinkAfter {
		e.frameBuf(100)
	}
	if &e.buf.b[0] != small {
		t.Fatal("a buffer under keptFrame was let go")
	}
}

// TestPutVarintBefore: a varint written back to front ends where it was
// asked to and reads as protobuf's, for every length of varint.
func TestPutVarintBefore(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 300, 16383, 16384, 1 << 21, 1<<35 + 7, math.MaxUint64} {
		b := make([]byte, 16)
		at := putVarintBefore(b, len(b), v)
		want := protowire.AppendVarint(nil, v)
		if !bytes.Equal(b[at:], want) {
			t.Errorf("%d: % x, want % x", v, b[at:], want)
		}
	}
}
