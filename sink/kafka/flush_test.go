package kafka_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/braid-cdc/braid/sink/kafka"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
)

// TestNoRecordPastAFailedOne: a new client knows no topic, so franz-go
// holds a Publish's records until the topic's metadata comes, then puts
// them in their partitions' buffers one by one. Here the metadata comes
// only once the Publish flushes, and the first produce request (the
// partition's first record alone) fails with INVALID_RECORD before the
// second record is buffered. No record after it may be committed (the
// transaction is not): the Publish fails with INVALID_RECORD, and the next
// one writes every message once, in order, as a read_committed consumer
// reads them.
func TestNoRecordPastAFailedOne(t *testing.T) {
	const n = 20 // DDLs of one table: one key, one partition
	c := startCluster(t, 1, "shop.orders")

	var (
		flushOnce sync.Once
		flushing  = make(chan struct{})
		pub       *kafka.Publisher
		first     sync.Once
		pacing    atomic.Bool // in the first Publish
	)
	kafka.SetClientOpts(t,
		// Flush logs "flushing" once it has begun.
		kgo.WithLogger(logFunc(func(msg string) {
			if msg == "flushing" {
				flushOnce.Do(func() { close(flushing) })
			}
		})),
		// In the first Publish, each record after the first is
		// partitioned, once Flush has begun, only after the first has
		// failed (its promise ran).
		kgo.RecordPartitioner(pacedPartitioner{kgo.ManualPartitioner(), func(*kgo.Record) {
			isFirst := false
			first.Do(func() { isFirst = true })
			if !pacing.Load() {
				return
			}
			select {
			case <-flushing:
			default:
				return
			}
			for deadline := time.Now().Add(5 * time.Second); !isFirst && pub.Stats().Pending == n && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}}),
	)
	// The producing client's first metadata of the topic (not the
	// publisher's own lookup, which allows auto-creation) is answered
	// once the Publish flushes, or after a second: a Publish that waits
	// for its records to be buffered before it flushes never does.
	var held atomic.Bool
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mr := req.(*kmsg.MetadataRequest)
		if mr.AllowAutoTopicCreation || len(mr.Topics) == 0 || mr.Topics[0].Topic == nil || *mr.Topics[0].Topic != "shop.orders" || held.Swap(true) {
			return nil, nil, false
		}
		c.SleepControl(func() {
			select {
			case <-flushing:
			case <-time.After(time.Second):
			}
		})
		return nil, nil, false
	})
	// The first produce request fails outright, nothing written.
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		return invalidRecord(req.(*kmsg.ProduceRequest)), nil, true
	})

	pub = openTo(t, c, "")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	msgs := ddls(n)
	pacing.Store(true)
	err := pub.Publish(ctx, msgs)
	pacing.Store(false)
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("Publish with its first produce request failed: %v, want INVALID_RECORD", err)
	}
	if err := pub.Publish(ctx, msgs); err != nil {
		t.Fatalf("Publish again: %v", err)
	}
	recs, parts, err := kafkatest.Read(ctx, c.ListenAddrs(), "shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.Check(recs, parts); err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("%d records in the topic, want %d", len(recs), n)
	}
}

// invalidRecord is the answer to pr that fails every partition of it with
// INVALID_RECORD.
func invalidRecord(pr *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range pr.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.InvalidRecord.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// logFunc is a kgo.Logger that hands f each message of level info and
// above.
type logFunc func(msg string)

func (logFunc) Level() kgo.LogLevel                        { return kgo.LogLevelInfo }
func (f logFunc) Log(_ kgo.LogLevel, msg string, _ ...any) { f(msg) }

// pacedPartitioner is kgo.Partitioner p that calls before with each record
// it partitions, first.
type pacedPartitioner struct {
	p      kgo.Partitioner
	before func(*kgo.Record)
}

func (pp pacedPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return pacedTopicPartitioner{pp.p.ForTopic(topic), pp.before}
}

type pacedTopicPartitioner struct {
	kgo.TopicPartitioner
	before func(*kgo.Record)
}

func (tp pacedTopicPartitioner) Partition(r *kgo.Record, n int) int {
	tp.before(r)
	return tp.TopicPartitioner.Partition(r, n)
}
