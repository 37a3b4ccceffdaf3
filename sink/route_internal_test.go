package sink

import (
	"encoding/binary"
	"hash/fnv"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
)

// testCodec reads rows of shop_0.orders (id BIGINT PRIMARY KEY, note
// VARCHAR(20)) or, with a text key, of shop_0.codes (code VARCHAR(20)
// PRIMARY KEY, note VARCHAR(20)).
func testCodec(textKey bool) *change.Codec {
	tb := &change.Table{Schema: "shop_0", Name: "orders", LogicalSchema: "shop", LogicalName: "orders",
		Columns: []change.Column{
			{Name: "id", Type: "bigint", RawType: "bigint(20)", Key: true},
			{Name: "note", Type: "varchar", RawType: "varchar(20)", Nullable: true},
		}}
	types := []byte{mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR}
	if textKey {
		tb.Name, tb.LogicalName = "codes", "codes"
		tb.Columns[0] = change.Column{Name: "code", Type: "varchar", RawType: "varchar(20)", Key: true}
		types[0] = mysql.MYSQL_TYPE_VARCHAR
	}
	return change.NewCodec(tb, &replication.TableMapEvent{ColumnType: types, ColumnMeta: []uint16{0, 80}}, nil)
}

// routeOf is the Route the keyer gives an INSERT of key.
func routeOf(k *keyer, codec *change.Codec, source string, key any) (uint32, string) {
	im := &change.Images{Decoded: [][]any{{key, "n"}}}
	rc := change.NewRowChange(codec, change.Insert, 0, im, 0)
	c := k.change(&change.Event{Source: source, Seq: 1}, &rc)
	return c.Route, c.PK
}

// TestRouting: by range, neighbouring integer keys of a shard table share
// a route, and the next range or another shard table (with an origin
// column) has another (by wide range, the same with ranges 16 times as
// wide); a key-changing UPDATE goes by its new key and
// names its old key's route; a text key routes by its hash. By key, a route is
// the key's hash, as before braid had routings, so that checkpoints
// written then are read as they were written.
func TestRouting(t *testing.T) {
	ints, texts := testCodec(false), testCodec(true)
	byRange := newKeyer(true, RouteByRange)
	first, _ := routeOf(byRange, ints, "a", int64(1024))
	for _, id := range []int64{1025, 1500, 2047} {
		if r, _ := routeOf(byRange, ints, "a", id); r != first {
			t.Errorf("key %d: route %d, key 1024's %d", id, r, first)
		}
	}
	if r, _ := routeOf(byRange, ints, "a", int64(2048)); r == first {
		t.Errorf("key 2048 routes with 1024")
	}
	if r, _ := routeOf(byRange, ints, "b", int64(1024)); r == first {
		t.Errorf("source b's key 1024 routes with source a's")
	}
	if r, pk := routeOf(byRange, texts, "a", "x"); r != routeHash(pk) {
		t.Errorf("a text key routes by %d, its hash is %d", r, routeHash(pk))
	}
	// The hash is FNV-1a, as Worker always used.
	for _, s := range []string{"", "t\x001", "a/shop_0.orders>shop.orders\x0042"} {
		h := fnv.New32a()
		h.Write([]byte(s))
		if routeHash(s) != h.Sum32() {
			t.Errorf("routeHash(%q) = %d, FNV-1a %d", s, routeHash(s), h.Sum32())
		}
	}
	// An UPDATE that moves key 1024 to 5000 goes by 5000's range, and
	// names 1024's as its old route.
	im := &change.Images{Decoded: [][]any{{int64(1024), "n"}, {int64(5000), "n"}}}
	rc := change.NewRowChange(ints, change.Update, 0, im, 0)
	moved := byRange.change(&change.Event{Source: "a", Seq: 2}, &rc)
	if to, _ := routeOf(byRange, ints, "a", int64(5000)); !moved.Moved || moved.Route != to || moved.OldRoute != first {
		t.Errorf("a key moved 1024 → 5000: moved %v, route %d (5000's %d), old route %d (1024's %d)", moved.Moved, moved.Route, to, moved.OldRoute, first)
	}
	// By wide range, as by range with ranges 16 times as wide.
	byWide := newKeyer(true, RouteByWideRange)
	wideFirst, _ := routeOf(byWide, ints, "a", int64(WideRangeKeys))
	for _, id := range []int64{WideRangeKeys + 1, WideRangeKeys + RangeKeys, 2*WideRangeKeys - 1} {
		if r, _ := routeOf(byWide, ints, "a", id); r != wideFirst {
			t.Errorf("by wide range, key %d: route %d, key %d's %d", id, r, WideRangeKeys, wideFirst)
		}
	}
	if r, _ := routeOf(byWide, ints, "a", int64(2*WideRangeKeys)); r == wideFirst {
		t.Errorf("by wide range, key %d routes with %d", 2*WideRangeKeys, WideRangeKeys)
	}
	byKey := newKeyer(true, RouteByKey)
	c := NewCausality(16)
	for _, id := range []int64{1024, 1025, 7} {
		r, pk := routeOf(byKey, ints, "a", id)
		if c.WorkerOf(r) != c.Worker(pk) {
			t.Errorf("by key, key %d goes to worker %d, its hash's worker is %d", id, c.WorkerOf(r), c.Worker(pk))
		}
	}
}

// TestKeysOfRawImages: a change read from the binlog's raw row images
// (whose integer key is read without a Value, change.RowChange.Integer)
// has the key and the route of the same row decoded, by every routing.
func TestKeysOfRawImages(t *testing.T) {
	ints := testCodec(false)
	tm := &replication.TableMapEvent{ColumnCount: 2, ColumnType: []byte{mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR}, ColumnMeta: []uint16{0, 80}}
	for _, id := range []int64{-5, 0, 7, 1024, 5000, 1 << 40, -1 << 63} {
		data := binary.LittleEndian.AppendUint64([]byte{0}, uint64(id)) // no NULLs, the id
		data = append(data, 1, 'n')                                     // the note
		re := &replication.RowsEvent{ColumnCount: 2, ColumnBitmap1: []byte{0x03}, Table: tm}
		im, err := change.SplitRows(re, change.TableShapes(tm), 0, data)
		if err != nil {
			t.Fatal(err)
		}
		raw := change.NewRowChange(ints, change.Insert, 0, im, 0)
		if _, _, ok := raw.Integer(true, 0); !ok {
			t.Fatal("the raw image's key is not read as an integer")
		}
		for _, routing := range []Routing{RouteByKey, RouteByRange, RouteByWideRange} {
			k := newKeyer(true, routing)
			got := k.change(&change.Event{Source: "a", Seq: 1}, &raw)
			route, pk := routeOf(k, ints, "a", id)
			if got.PK != pk || got.Route != route {
				t.Errorf("routing %d, key %d: raw images give key %q route %d, decoded %q route %d", routing, id, got.PK, got.Route, pk, route)
			}
		}
	}
}
