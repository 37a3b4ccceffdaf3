package kafka_test

import (
	"math/rand/v2"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/kafka"
)

// TestPartitionIsKafkas: the partition Publish picks for a key is the one
// Kafka's default partitioner (franz-go's StickyKeyPartitioner, murmur2)
// picks, for random keys of every length and partition counts, so a
// consumer or another producer agrees on where a key lives. The seed is
// logged.
func TestPartitionIsKafkas(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for range 5000 {
		key := make([]byte, rng.IntN(40))
		for i := range key {
			key[i] = byte(rng.UintN(256))
		}
		n := int32(1 + rng.IntN(64))
		if got, want := kafka.Partition(key, n), int32(kp.Partition(&kgo.Record{Key: key}, int(n))); got != want {
			t.Fatalf("key %x of %d partitions: partition %d, Kafka's %d", key, n, got, want)
		}
	}
	// Kafka's own test vectors (Utils.murmur2 in its UtilsTest).
	for key, want := range map[string]int32{"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, "abc": 479470107} {
		if got := int32(kafka.Murmur2([]byte(key))); got != want {
			t.Errorf("murmur2(%q) = %d, Kafka's %d", key, got, want)
		}
	}
}

// orders is a table (id BIGINT, code VARCHAR, note VARCHAR) keyed by id
// and code, with a change of each kind.
func orders(t *testing.T) (ins, upd, del *change.RowChange) {
	t.Helper()
	tbl := &change.Table{Schema: "shop_0", Name: "orders", LogicalSchema: "shop", LogicalName: "orders", Columns: []change.Column{
		{Name: "id", Type: "bigint", RawType: "bigint(20)", Key: true},
		{Name: "note", Type: "varchar", RawType: "varchar(20)", Nullable: true},
		{Name: "code", Type: "varchar", RawType: "varchar(20)", Key: true, Nullable: true},
	}}
	tm := &replication.TableMapEvent{ColumnType: []byte{mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VARCHAR},
		ColumnMeta: []uint16{0, 80, 80}}
	codec := change.NewCodec(tbl, tm, nil)
	im := &change.Images{Decoded: [][]any{
		{int64(7), "n", `a"b`},  // inserted
		{int64(7), "n", `a"b`},  // updated: before
		{int64(8), "m", nil},    // after: a new key, code NULL
		{int64(9), "x", "gone"}, // deleted
	}}
	i := change.NewRowChange(codec, change.Insert, 0, im, 0)
	u := change.NewRowChange(codec, change.Update, 1, im, 1)
	d := change.NewRowChange(codec, change.Delete, 2, im, 3)
	return &i, &u, &d
}

// TestKey: a row's key is the JSON array of its key columns' text in key
// order, from the after image (an UPDATE that moves the key goes under
// its new key) or, for a DELETE, the before image; NULL is null and
// strings are escaped. A DDL's key is its logical table.
func TestKey(t *testing.T) {
	ins, upd, del := orders(t)
	for _, tc := range []struct {
		m    sink.Message
		want string
	}{
		{sink.Message{Rows: []*change.RowChange{ins}}, `["7","a\"b"]`},
		{sink.Message{Rows: []*change.RowChange{upd}}, `["8",null]`},
		{sink.Message{Rows: []*change.RowChange{del}}, `["9","gone"]`},
		{sink.Message{DDL: true, Database: "shop", Table: "orders"}, `shop.orders`},
	} {
		if got := string(kafka.Key(&tc.m)); got != tc.want {
			t.Errorf("key %s, want %s", got, tc.want)
		}
	}
}

// TestRecordPos: the headers a record is written with name its place,
// and a record without them (not braid's) is ErrNoPosition.
func TestRecordPos(t *testing.T) {
	m := sink.Message{Seq: 1 << 40, N: 3, Source: "s1", Body: []byte("{}")}
	r := kafka.Record(&m, "shop.orders", 2, []byte(`["1"]`), kafka.Writer("shop", "events"))
	if p, err := kafka.RecordPos(r); err != nil || p != (kafka.Pos{Seq: 1 << 40, N: 3}) {
		t.Fatalf("pos %v, %v", p, err)
	}
	if r.Partition != 2 || r.Topic != "shop.orders" || string(r.Value) != "{}" {
		t.Fatalf("record %+v", r)
	}
	if _, err := kafka.RecordPos(&kgo.Record{Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte("5")}}}); err == nil {
		t.Fatal("a record without n has a place")
	}
	if !(kafka.Pos{Seq: 5, N: 9}).Before(kafka.Pos{Seq: 6}) || (kafka.Pos{Seq: 6, N: 1}).Before(kafka.Pos{Seq: 6, N: 1}) {
		t.Fatal("Before")
	}
}
