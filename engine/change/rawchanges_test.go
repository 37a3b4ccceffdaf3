package change

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// TestRawChangesMatchChanged checks the raw path of an UPDATE's old
// values (RawChanges, RawChanged) against Changed on random raw UPDATE
// images: the same columns changed, for a plain row and one shown through
// a view, with NULLs on either side and doubles whose bytes differ but
// whose numbers do not (0 and -0); and that an image leaving a column out
// takes the per-column path (RawChanges gives nil).
func TestRawChangesMatchChanged(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 44))
	tm := &replication.TableMapEvent{Schema: []byte("s"), Table: []byte("t"), ColumnCount: 4,
		ColumnType: []byte{mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_DOUBLE, mysql.MYSQL_TYPE_LONG},
		ColumnMeta: []uint16{0, 64, 8, 0}}
	tbl := &Table{Schema: "s", Name: "t", Columns: []Column{
		{Name: "id", Type: "bigint", Key: true}, {Name: "note", Type: "varchar", Nullable: true},
		{Name: "d", Type: "double", Nullable: true}, {Name: "n", Type: "int", Nullable: true}}}
	view := &Table{Schema: "s", Name: "t", Columns: []Column{
		{Name: "n", Type: "int"}, {Name: "added", Type: "int"}, {Name: "id", Type: "bigint"}, {Name: "note", Type: "varchar"}, {Name: "d", Type: "double"}}}
	codec := NewCodec(tbl, tm, nil)
	shapes := TableShapes(tm)
	notes := []string{"", "a", "deliver to door", "ünïcode ✓"}
	doubles := []float64{0, math.Copysign(0, -1), 1.5, -2}
	value := func(col int) any {
		if col > 0 && rng.IntN(5) == 0 {
			return nil
		}
		switch col {
		case 0:
			return rng.Int64N(3)
		case 1:
			return notes[rng.IntN(len(notes))]
		case 2:
			return doubles[rng.IntN(len(doubles))]
		}
		return int32(rng.IntN(3))
	}
	image := func(b []byte, row []any) []byte {
		var nulls byte
		for i, v := range row {
			if v == nil {
				nulls |= 1 << i
			}
		}
		b = append(b, nulls)
		for _, v := range row {
			switch x := v.(type) {
			case int64:
				b = binary.LittleEndian.AppendUint64(b, uint64(x))
			case string:
				b = append(append(b, byte(len(x))), x...)
			case float64:
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
			case int32:
				b = binary.LittleEndian.AppendUint32(b, uint32(x))
			}
		}
		return b
	}
	checked := 0
	for range 3000 {
		var data []byte
		pairs := 1 + rng.IntN(4)
		for range pairs {
			before, after := make([]any, 4), make([]any, 4)
			for i := range before {
				before[i], after[i] = value(i), value(i)
				if rng.IntN(2) == 0 {
					after[i] = before[i]
				}
			}
			data = image(image(data, before), after)
		}
		re := &replication.RowsEvent{ColumnCount: 4, ColumnBitmap1: []byte{0x0f}, ColumnBitmap2: []byte{0x0f}, Table: tm}
		im, err := splitRows(re, shapes, data, true)
		if err != nil {
			t.Fatal(err)
		}
		for k := range pairs {
			rc := NewRowChange(codec, Update, k, im, 2*k)
			for _, rc := range []RowChange{rc, rc.WithView(view)} {
				before, after := rc.RawChanges()
				if len(before) != len(rc.Table.Columns) || len(after) != len(before) {
					t.Fatalf("RawChanges gave %d and %d offsets for %d columns", len(before), len(after), len(rc.Table.Columns))
				}
				for i := range rc.Table.Columns {
					if got, want := rc.RawChanged(i, before[i], after[i]), rc.Changed(i); got != want {
						t.Fatalf("column %s: RawChanged %v, Changed %v (before %v, after %v)", rc.Table.Columns[i].Name, got, want, rc.Value(false, i), rc.Value(true, i))
					}
					checked++
				}
			}
		}
		im.SetPresent([]byte{0x0f}, []byte{0x0d}, 4) // the after images leave note out
		partial := NewRowChange(codec, Update, 0, im, 0)
		if before, after := partial.RawChanges(); before != nil || after != nil {
			t.Fatal("RawChanges of a partial image: want nil, the per-column path")
		}
	}
	t.Logf("%d columns compared", checked)
}

// TestRowChangeSize keeps a RowChange at 56 bytes on 64-bit platforms: a
// catch-up allocates one for every row change it reads.
func TestRowChangeSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("not a 64-bit platform")
	}
	if got := unsafe.Sizeof(RowChange{}); got != 56 {
		t.Fatalf("a RowChange is %d bytes, want 56: keep its pointers first and its int32s last", got)
	}
}

// TestEventSize keeps an Event within 320 bytes on 64-bit platforms, a
// size class of Go's allocator (the next is 352): the binlog reader
// allocates one per rows event, and 16 bytes past it cost 32. The old
// layout, Event.Lost added, was 336 bytes, padding after its small
// fields included.
func TestEventSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("not a 64-bit platform")
	}
	if got := unsafe.Sizeof(Event{}); got > 320 {
		t.Fatalf("an Event is %d bytes, want 320 at most: keep its small fields together (Type, ServerID; Snapshot, Stale)", got)
	}
}

// TestAllPresent checks the byte-wise test of a column bitmap against
// the bit-by-bit rule on random bitmaps, short ones included.
func TestAllPresent(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ref := func(bitmap []byte, cols int) bool {
		for i := range cols {
			if i>>3 >= len(bitmap) || bitmap[i>>3]&(1<<(i&7)) == 0 {
				return false
			}
		}
		return true
	}
	for range 100_000 {
		cols := rng.IntN(40)
		bitmap := make([]byte, max(0, (cols+7)>>3-rng.IntN(2)))
		for i := range bitmap {
			bitmap[i] = 0xff
			if rng.IntN(3) == 0 {
				bitmap[i] = byte(rng.Uint32())
			}
		}
		if got, want := allPresent(bitmap, cols), ref(bitmap, cols); got != want {
			t.Fatalf("allPresent(%08b, %d) = %v, want %v", bitmap, cols, got, want)
		}
	}
	if !allPresent(nil, 5) {
		t.Fatal("a nil bitmap (no image) holds every column")
	}
}

// TestIntegerIsValue checks Integer against Value on random raw images
// of every integer column type, signed and unsigned, at their extremes
// and with NULLs, for a plain row and one shown through a view: the same
// number Value gives; for NULL, an ENUM, a BIT and a VARCHAR, none
// (Value has them).
func TestIntegerIsValue(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 45))
	types := []byte{mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_INT24,
		mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_BIT, mysql.MYSQL_TYPE_VARCHAR}
	widths := []int{1, 1, 2, 2, 3, 3, 4, 4, 8, 8, 1, 1, 0}
	tm := &replication.TableMapEvent{Schema: []byte("s"), Table: []byte("t"), ColumnCount: uint64(len(types)), ColumnType: types,
		ColumnMeta: []uint16{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, uint16(mysql.MYSQL_TYPE_ENUM)<<8 | 1, 1 << 8, 64}}
	tbl := &Table{Schema: "s", Name: "t", Columns: []Column{
		{Name: "ti", Type: "tinyint"}, {Name: "tu", Type: "tinyint", Unsigned: true},
		{Name: "si", Type: "smallint"}, {Name: "su", Type: "smallint", Unsigned: true},
		{Name: "mi", Type: "mediumint"}, {Name: "mu", Type: "mediumint", Unsigned: true},
		{Name: "ii", Type: "int"}, {Name: "iu", Type: "int", Unsigned: true},
		{Name: "bi", Type: "bigint", Key: true}, {Name: "bu", Type: "bigint", Unsigned: true},
		{Name: "e", Type: "enum", Elems: []string{"a", "b"}}, {Name: "bits", Type: "bit"}, {Name: "v", Type: "varchar"}}}
	for i := range tbl.Columns {
		tbl.Columns[i].Nullable = true
	}
	view := &Table{Schema: "s", Name: "t", Columns: []Column{{Name: "v", Type: "varchar"}, {Name: "added", Type: "int"}, {Name: "bu", Type: "bigint", Unsigned: true}, {Name: "mi", Type: "mediumint"}}}
	codec := NewCodec(tbl, tm, nil)
	shapes := TableShapes(tm)
	extremes := []uint64{0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffff, 0x800000, 0xffffff, 0x7fffffff, 0x80000000, 0xffffffff, 1<<63 - 1, 1 << 63, 1<<64 - 1}
	image := func(b []byte) []byte {
		var nulls uint16
		for i := range types {
			if rng.IntN(6) == 0 {
				nulls |= 1 << i
			}
		}
		b = binary.LittleEndian.AppendUint16(b, nulls)
		for i, w := range widths {
			if nulls&(1<<i) != 0 {
				continue
			}
			if w == 0 {
				b = append(b, 3, 'a', 'b', 'c')
				continue
			}
			v := extremes[rng.IntN(len(extremes))]
			if i == 10 {
				v = uint64(1 + rng.IntN(2)) // an ENUM's member
			}
			for k := range w {
				b = append(b, byte(v>>(8*k)))
			}
		}
		return b
	}
	checked := 0
	for range 500 {
		data := image(image(nil))
		all := []byte{0xff, 0x1f}
		re := &replication.RowsEvent{ColumnCount: uint64(len(types)), ColumnBitmap1: all, ColumnBitmap2: all, Table: tm}
		im, err := splitRows(re, shapes, data, true)
		if err != nil {
			t.Fatal(err)
		}
		rc := NewRowChange(codec, Update, 0, im, 0)
		for _, rc := range []RowChange{rc, rc.WithView(view)} {
			for _, after := range []bool{false, true} {
				for i, c := range rc.Table.Columns {
					v, signed, ok := rc.Integer(after, i)
					if c.Type == "enum" || c.Type == "bit" || c.Type == "varchar" {
						if ok {
							t.Fatalf("column %s: Integer %d, ok; want none (Value %#v)", c.Name, v, rc.Value(after, i))
						}
						continue
					}
					switch want := rc.Value(after, i).(type) {
					case int64:
						if !ok || !signed || int64(v) != want {
							t.Fatalf("column %s: Integer %d, signed %v, ok %v; Value %d", c.Name, v, signed, ok, want)
						}
						checked++
					case uint64:
						if !ok || signed || v != want {
							t.Fatalf("column %s: Integer %d, signed %v, ok %v; Value %d", c.Name, v, signed, ok, want)
						}
						checked++
					default:
						if ok || want != nil {
							t.Fatalf("column %s: Integer %d, ok %v; Value %#v", c.Name, v, ok, want)
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no integer compared")
	}
	t.Logf("%d integers compared", checked)
}
