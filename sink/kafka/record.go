package kafka

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// The record headers braid writes on every record.
const (
	HeaderSeq    = "seq"    // the message's transaction seq, decimal
	HeaderN      = "n"      // the message's place in its transaction, from 0, decimal
	HeaderSource = "source" // the source that wrote the change
	HeaderWriter = "writer" // the sink that wrote the record, "dest/sink"
)

// ErrNoPosition is the error of a record whose headers do not name a
// (seq, n): one braid did not write.
var ErrNoPosition = errors.New("kafka: record has no seq and n headers")

// Pos is a message's place in the stream: its transaction's seq and its
// place N among that transaction's messages.
type Pos struct {
	Seq uint64
	N   int
}

// Before reports whether p comes before q.
func (p Pos) Before(q Pos) bool {
	return p.Seq < q.Seq || p.Seq == q.Seq && p.N < q.N
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Seq, p.N) }

// PosOf is message m's place.
func PosOf(m *sink.Message) Pos { return Pos{Seq: m.Seq, N: m.N} }

// Topic is the topic of logical table database.table under template tmpl
// ({database} and {table} replaced; a template of neither is one topic).
func Topic(tmpl, database, table string) string {
	return strings.NewReplacer("{database}", database, "{table}", table).Replace(tmpl)
}

// Key is message m's record key. A row's is the JSON array of its primary
// key's values (every column's, for a table without one) in the key's
// column order, each value as text in canal's string form (the flat
// message's), SQL NULL as null: ["1001"], ["7","2024-01-02"]. The values
// come from the after image of an INSERT or UPDATE and from the before
// image of a DELETE (sink.Ordered hands a publisher of MaxRows 1 a key change
// as a DELETE and an INSERT, each under its own key). A DDL's key is its logical
// table, "database.table". m must carry one row (MaxRows 1) or be a DDL.
func Key(m *sink.Message) []byte {
	if m.DDL || len(m.Rows) == 0 {
		return []byte(m.Database + "." + m.Table)
	}
	rc := m.Rows[0]
	after := rc.Kind != change.Delete
	b := []byte{'['}
	for j, i := range sink.KeyColumns(rc.Table) {
		if j > 0 {
			b = append(b, ',')
		}
		n := len(b)
		var null bool
		if b, null = rc.AppendJSON(b, after, i); null {
			b = append(b[:n], "null"...)
		}
	}
	return append(b, ']')
}

// Partition is the partition of key among n: Kafka's default
// partitioner's, murmur2 of the key, its sign bit cleared, modulo n.
func Partition(key []byte, n int32) int32 {
	return int32(murmur2(key)&0x7fffffff) % n
}

// murmur2 is Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2),
// as franz-go's default partitioner has it.
func murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[3])<<24 | uint32(b[2])<<16 | uint32(b[1])<<8 | uint32(b[0])
		b = b[4:]
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// Record is message m's record for topic, partition part: key Key(m),
// value its body, headers seq, n, source and writer (Writer).
func Record(m *sink.Message, topic string, part int32, key, writer []byte) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: part,
		Key:       key,
		Value:     m.Body,
		Headers: []kgo.RecordHeader{
			{Key: HeaderSeq, Value: strconv.AppendUint(nil, m.Seq, 10)},
			{Key: HeaderN, Value: strconv.AppendInt(nil, int64(m.N), 10)},
			{Key: HeaderSource, Value: []byte(m.Source)},
			{Key: HeaderWriter, Value: writer},
		},
	}
}

// RecordPos is the place a record's seq and n headers name
// (ErrNoPosition: it has none).
func RecordPos(r *kgo.Record) (Pos, error) {
	var (
		p              Pos
		haveSeq, haveN bool
	)
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderSeq:
			v, err := strconv.ParseUint(string(h.Value), 10, 64)
			if err != nil {
				return Pos{}, fmt.Errorf("%w: seq %q", ErrNoPosition, h.Value)
			}
			p.Seq, haveSeq = v, true
		case HeaderN:
			v, err := strconv.Atoi(string(h.Value))
			if err != nil || v < 0 {
				return Pos{}, fmt.Errorf("%w: n %q", ErrNoPosition, h.Value)
			}
			p.N, haveN = v, true
		}
	}
	if !haveSeq || !haveN {
		return Pos{}, ErrNoPosition
	}
	return p, nil
}

// Writer is the writer header of the records of sink name of destination
// dest: "dest/sink".
func Writer(dest, name string) []byte { return []byte(dest + "/" + name) }

// ErrForeign is the error of a partition whose last record another
// writer wrote: the sink cannot tell from it what of its own is there.
var ErrForeign = errors.New("kafka: the topic's last record is another writer's")

// recordWriter is r's writer header ("" when it has none).
func recordWriter(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == HeaderWriter {
			return string(h.Value)
		}
	}
	return ""
}
