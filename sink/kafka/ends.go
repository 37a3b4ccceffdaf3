package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNoTopic is the error of a topic that does not exist and that the
// brokers did not create when asked for its metadata.
var ErrNoTopic = errors.New("kafka: topic does not exist")

// topicEnds is what the publisher knows of a topic it writes to: its
// partitions, and each partition's last message committed (has false:
// none).
type topicEnds struct {
	last []Pos
	has  []bool
}

// written reports whether the message at pos already is in partition part:
// at or before its last message.
func (t *topicEnds) written(part int32, pos Pos) bool {
	return t.has[part] && !t.last[part].Before(pos)
}

// learn reads topic's partitions and the place of each one's last
// committed record: a read_committed consumer's last record. A missing
// topic is asked for with auto-creation allowed, so the brokers create it
// if they are set to (auto.create.topics.enable).
//
// Each partition's last record must be writer's: another's (two
// destinations whose sinks share a topic, one recreated under its name)
// has seqs of another stream, and skipping by them would lose messages.
func learn(ctx context.Context, cl *kgo.Client, brokers []string, topic string, writer []byte) (*topicEnds, error) {
	n, err := partitions(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	starts, err := listOffsets(ctx, cl, topic, n, -2, 0) // earliest
	if err != nil {
		return nil, err
	}
	ends, err := listOffsets(ctx, cl, topic, n, -1, 1) // the last stable offset
	if err != nil {
		return nil, err
	}
	recs, err := lastCommitted(ctx, brokers, topic, starts, ends)
	if err != nil {
		return nil, err
	}
	t := &topicEnds{last: make([]Pos, n), has: make([]bool, n)}
	for p, r := range recs {
		pos, err := RecordPos(r)
		if err == nil && recordWriter(r) != string(writer) {
			err = fmt.Errorf("%w (%q, not this sink's %q)", ErrForeign, recordWriter(r), writer)
		}
		if err != nil {
			return nil, fmt.Errorf("topic %s partition %d offset %d (its last record): %w: a kafka sink's topic must be written by the sink alone: give the sink a topic of its own (spec key topic), or delete the topic's records", topic, p, r.Offset, err)
		}
		t.last[p], t.has[p] = pos, true
	}
	return t, nil
}

// partitions is how many partitions topic has, asking the brokers to
// create it if missing (which they do if set to), and waiting up to 10 s
// for a topic being created to have leaders. A topic still unknown after
// 2 s (time for a broker to hear of one another created) is ErrNoTopic.
func partitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	start := time.Now()
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, fmt.Errorf("topic %s: metadata: %w", topic, err)
		}
		if len(resp.Topics) != 1 {
			return 0, fmt.Errorf("topic %s: metadata: %d topics in the answer", topic, len(resp.Topics))
		}
		t := resp.Topics[0]
		err = kerr.ErrorForCode(t.ErrorCode)
		if err == nil && len(t.Partitions) > 0 {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					err = e
				}
			}
			if err == nil {
				return int32(len(t.Partitions)), nil
			}
		}
		unknown := errors.Is(err, kerr.UnknownTopicOrPartition)
		retry := err == nil || errors.Is(err, kerr.LeaderNotAvailable) || unknown
		if waited := time.Since(start); !retry || waited > 10*time.Second || unknown && waited > 2*time.Second {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return 0, fmt.Errorf("topic %s: %w and the brokers do not create topics: create it, with the partitions it should have", topic, ErrNoTopic)
			}
			return 0, fmt.Errorf("topic %s: metadata: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// listOffsets is each of topic's n partitions' offset at timestamp ts: -2
// its log start, -1 its end, as isolation level iso reads it (0
// read_uncommitted: the high watermark; 1 read_committed: the last stable
// offset, before which every transaction is committed or aborted).
func listOffsets(ctx context.Context, cl *kgo.Client, topic string, n int32, ts int64, iso int8) ([]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("topic %s: list offsets: %w", topic, err)
	}
	out := make([]int64, n)
	seen := make([]bool, n)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("topic %s partition %d: list offsets: %w", topic, p.Partition, err)
			}
			if p.Partition >= 0 && p.Partition < n {
				out[p.Partition], seen[p.Partition] = p.Offset, true
			}
		}
	}
	for p, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("topic %s partition %d: list offsets: no answer", topic, p)
		}
	}
	return out, nil
}

// lastCommitted finds, for each partition p of topic holding records in
// [starts[p], ends[p]) (ends: last stable offsets), its last record a
// read_committed consumer reads: not a transaction's marker, nor a record
// of an aborted transaction. Each partition is read back from its end, in
// windows that grow 16 times each round, until one holds such a record or
// the partition's start is reached (none: the map has no entry for it).
func lastCommitted(ctx context.Context, brokers []string, topic string, starts, ends []int64) (map[int32]*kgo.Record, error) {
	got := map[int32]*kgo.Record{}
	to := map[int32]int64{} // partitions still searched, and their window's end
	for p := range ends {
		if ends[p] > starts[p] {
			to[int32(p)] = ends[p]
		}
	}
	for back := int64(16); len(to) > 0; back *= 16 {
		spans := map[int32]span{}
		for p, end := range to {
			spans[p] = span{from: max(starts[p], end-back), to: end}
		}
		recs, err := readSpans(ctx, brokers, topic, spans)
		if err != nil {
			return nil, err
		}
		for p, s := range spans {
			if r := recs[p]; r != nil {
				got[p] = r
				delete(to, p)
			} else if s.from == starts[p] {
				delete(to, p) // no committed record left
			} else {
				to[p] = s.from
			}
		}
	}
	return got, nil
}

// span is the offsets [from, to) of a partition.
type span struct{ from, to int64 }

// readSpans reads each partition's span of topic, with a read_committed
// consumer of its own that keeps transaction markers (so that it sees
// each offset up to the span's end, a marker or a record, even when no
// committed record is there), and returns the last committed record of
// each span that holds one.
func readSpans(ctx context.Context, brokers []string, topic string, spans map[int32]span) (map[int32]*kgo.Record, error) {
	offs := map[int32]kgo.Offset{}
	for p, s := range spans {
		offs[p] = kgo.NewOffset().At(s.from)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got := map[int32]*kgo.Record{}
	done := map[int32]bool{}
	for len(done) < len(spans) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("topic %s: reading the last committed records of %d partitions, %d read: %w", topic, len(spans), len(done), ctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			ferr = fmt.Errorf("topic %s partition %d: reading its last committed record: %w", topic, p, err)
		})
		if ferr != nil {
			return nil, ferr
		}
		// A partition's records come in offset order: once one at or
		// past the span's last offset has come, every record of the
		// span has.
		fs.EachRecord(func(r *kgo.Record) {
			s, ok := spans[r.Partition]
			if !ok || done[r.Partition] {
				return
			}
			if r.Offset < s.to && !r.Attrs.IsControl() {
				got[r.Partition] = r
			}
			if r.Offset >= s.to-1 {
				done[r.Partition] = true
			}
		})
	}
	return got, nil
}
