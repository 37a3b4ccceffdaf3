// Package kafkatest reads a kafka sink's topic back as a read_committed
// consumer does and checks what the sink promises of it: every message
// once, each partition in stream order, each key on its hash's partition,
// and rows that a consumer rebuilds from the messages equal to the
// sources'. The sink's
// own tests (sink/kafka) and braid's crash test (cmd/braid) assert with
// it; it returns errors rather than failing a test, so it imports no
// testing.
//
//	recs, parts, err := kafkatest.Read(ctx, []string{addr}, "shop.orders")
//	err = kafkatest.Check(recs, parts)
//	rows, err := kafkatest.Rows(recs, "id", []string{"id", "code", "amount", "note", "c"})
//
// # Concurrency
//
// Read makes a client of its own and closes it before it returns; the
// rest are pure functions. It reads the records with franz-go alone, not
// with package kafka (the layering keeps a sink package from importing
// another), which makes it a second reading of the format: a record's
// place is parsed from its headers here, and its partition is checked
// against franz-go's own Kafka partitioner.
package kafkatest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pos is a message's place: its transaction's seq, its place n in it.
type Pos struct {
	Seq uint64
	N   int
}

// Before reports whether p comes before q.
func (p Pos) Before(q Pos) bool { return p.Seq < q.Seq || p.Seq == q.Seq && p.N < q.N }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Seq, p.N) }

// recordPos is the place r's seq and n headers name.
func recordPos(r *kgo.Record) (Pos, error) {
	var (
		p      Pos
		seq, n error = errNoHeader, errNoHeader
		intN   int64
	)
	for _, h := range r.Headers {
		switch h.Key {
		case "seq":
			p.Seq, seq = strconv.ParseUint(string(h.Value), 10, 64)
		case "n":
			intN, n = strconv.ParseInt(string(h.Value), 10, 32)
			p.N = int(intN)
		}
	}
	if err := cmp.Or(seq, n); err != nil {
		return Pos{}, fmt.Errorf("headers seq and n: %w", err)
	}
	return p, nil
}

var errNoHeader = errors.New("no such header")

// Record is a record of a sink's topic as a consumer reads it.
type Record struct {
	Partition int32
	Offset    int64
	Key       string
	// Pos is the place its headers name.
	Pos     Pos
	Message Message
}

// Message is what the checks read of a canal flat message: each row's
// columns as text, nil for NULL.
type Message struct {
	Type  string               `json:"type"`
	IsDDL bool                 `json:"isDdl"`
	Data  []map[string]*string `json:"data"`
	Old   []map[string]*string `json:"old"`
}

// Read reads every record of topic as a read_committed consumer does
// (isolation.level=read_committed: no record of an aborted or open
// transaction), from the start of each partition to at least its last
// stable offset when called, and returns them with the topic's partition
// count.
func Read(ctx context.Context, brokers []string, topic string) ([]Record, int32, error) {
	// Transaction markers are kept, to follow each partition's offset to
	// its end, and left out of what Read returns.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	ends, err := endOffsets(ctx, cl, topic)
	if err != nil {
		return nil, 0, err
	}
	next := make([]int64, len(ends))
	behind := func() bool {
		for p := range next {
			if next[p] < ends[p] {
				return true
			}
		}
		return false
	}
	var out []Record
	for behind() { // records produced meanwhile may come too
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return nil, 0, fmt.Errorf("reading %s: %w (read up to offsets %v of %v)", topic, err, next, ends)
		}
		var rerr error
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() || rerr != nil {
				return
			}
			pos, err := recordPos(r)
			if err != nil {
				rerr = fmt.Errorf("partition %d offset %d: %w", r.Partition, r.Offset, err)
				return
			}
			rec := Record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Pos: pos}
			if err := json.Unmarshal(r.Value, &rec.Message); err != nil {
				rerr = fmt.Errorf("partition %d offset %d: %w", r.Partition, r.Offset, err)
				return
			}
			out = append(out, rec)
		})
		if rerr != nil {
			return nil, 0, rerr
		}
	}
	return out, int32(len(ends)), nil
}

// endOffsets is each partition of topic's last stable offset: its end,
// as a read_committed consumer reads it.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) ([]int64, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("topic %s: %d topics in the metadata", topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	n := len(mresp.Topics[0].Partitions)
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = int32(p), -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ends := make([]int64, n)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("topic %s partition %d: %w", topic, p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	return ends, nil
}

// Check checks that recs, a topic of partitions partitions, hold each
// message once (no (seq, n) twice, and each transaction's n from 0 with
// none missing before the highest), each partition in stream order (so
// each key's changes in order) and each key on the partition of its
// hash by Kafka's default partitioner.
func Check(recs []Record, partitions int32) error {
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("")
	seen := map[Pos]Record{}
	last := map[int32]Pos{}
	for _, r := range recs {
		if d, dup := seen[r.Pos]; dup {
			return fmt.Errorf("message %s is in the topic twice: partition %d offset %d, partition %d offset %d", r.Pos, d.Partition, d.Offset, r.Partition, r.Offset)
		}
		seen[r.Pos] = r
		if l, ok := last[r.Partition]; ok && !l.Before(r.Pos) {
			return fmt.Errorf("partition %d: message %s at offset %d after %s", r.Partition, r.Pos, r.Offset, l)
		}
		last[r.Partition] = r.Pos
		if p := int32(kp.Partition(&kgo.Record{Key: []byte(r.Key)}, int(partitions))); p != r.Partition {
			return fmt.Errorf("key %s in partition %d, its hash's is %d", r.Key, r.Partition, p)
		}
	}
	sorted := InOrder(recs)
	for i, r := range sorted {
		if r.Pos.N > 0 && (i == 0 || sorted[i-1].Pos != Pos{Seq: r.Pos.Seq, N: r.Pos.N - 1}) {
			return fmt.Errorf("message %s is in the topic without the one before it", r.Pos)
		}
	}
	return nil
}

// InOrder is recs in stream order, by (seq, n).
func InOrder(recs []Record) []Record {
	sorted := slices.Clone(recs)
	slices.SortFunc(sorted, func(a, b Record) int { return cmp.Or(cmp.Compare(a.Pos.Seq, b.Pos.Seq), cmp.Compare(a.Pos.N, b.Pos.N)) })
	return sorted
}

// Rows rebuilds the rows of a table keyed by column key alone from its
// messages recs, applied in stream order as a consumer would (an UPDATE
// whose "old" holds the key moves the row), and returns them as columns
// joined by spaces, NULL (or a column a row never had) written NULL,
// sorted, as sinktest prints rows. It checks each record's key is the
// JSON array of the row's key value.
func Rows(recs []Record, key string, columns []string) ([]string, error) {
	rows := map[string]map[string]*string{}
	for _, r := range InOrder(recs) {
		m := r.Message
		if m.IsDDL {
			continue
		}
		if len(m.Data) != 1 {
			return nil, fmt.Errorf("message %s holds %d rows, want 1", r.Pos, len(m.Data))
		}
		row := m.Data[0]
		if row[key] == nil {
			return nil, fmt.Errorf("message %s: no %s", r.Pos, key)
		}
		id := *row[key]
		if want, _ := json.Marshal([]string{id}); r.Key != string(want) {
			return nil, fmt.Errorf("message %s (%s of %s %s) has key %s, want %s", r.Pos, m.Type, key, id, r.Key, want)
		}
		switch m.Type {
		case "INSERT":
			rows[id] = row
		case "UPDATE":
			if len(m.Old) == 1 && m.Old[0][key] != nil {
				delete(rows, *m.Old[0][key])
			}
			rows[id] = row
		case "DELETE":
			delete(rows, id)
		default:
			return nil, fmt.Errorf("message %s: type %q", r.Pos, m.Type)
		}
	}
	out := make([]string, 0, len(rows))
	for _, row := range rows {
		cols := make([]string, len(columns))
		for i, c := range columns {
			cols[i] = "NULL"
			if row[c] != nil {
				cols[i] = *row[c]
			}
		}
		out = append(out, strings.Join(cols, " "))
	}
	slices.Sort(out)
	return out, nil
}

// FirstDiff describes the first row where got and want differ ("none").
func FirstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("topic %q, sources %q", g, w)
		}
	}
	return "none"
}
