package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Publisher produces a sink's messages to Kafka topics (see the package
// doc).
type Publisher struct {
	name    string
	brokers []string
	topic   string // the template
	writer  []byte // every record's writer header (Writer)

	mu     sync.Mutex
	cl     *kgo.Client // nil: connect at the next Publish
	closed bool

	// topics caches each logical table's topic ("database.table" →
	// topic). Publish's alone.
	topics map[string]string
	// ends are the topics written to since the partition ends were last
	// read, with what each partition holds; reset after an error, so that
	// the next Publish reads them again. Publish's alone.
	ends map[string]*topicEnds
	// broken, once set, is returned by every Publish: a partition lost a
	// message that the sink cannot write again in its place.
	broken error
	// placing follows the chunk produce is producing, until each of its
	// records is in its partition's buffer (placedHook).
	placing atomic.Pointer[placement]

	applied, pending, skipped atomic.Uint64
}

var _ sink.Publisher = (*Publisher)(nil)

// ErrGap is the error of a partition where a message failed and a later
// one was written: writing the failed one again would put it out of
// order, so the publisher stops.
var ErrGap = errors.New("kafka: a partition has a gap")

// ErrClosed is the error of a Publish after Close.
var ErrClosed = errors.New("kafka: publisher closed")

// Open connects to sink s's brokers. s has spec's defaults.
func Open(ctx context.Context, s spec.Sink, dest string) (*Publisher, error) {
	if len(s.Brokers) == 0 || s.Topic == "" {
		return nil, fmt.Errorf("sink %s: brokers and topic must be set (spec's defaults)", s.Name)
	}
	p := &Publisher{name: s.Name, brokers: s.Brokers, topic: s.Topic, writer: Writer(dest, s.Name), ends: map[string]*topicEnds{}, topics: map[string]string{}}
	cl, err := p.client()
	if err != nil {
		return nil, err
	}
	if err := cl.Ping(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("sink %s: brokers %v: %w", s.Name, s.Brokers, err)
	}
	return p, nil
}

// client is the producing client, made if there is none.
func (p *Publisher) client() (*kgo.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if p.cl != nil {
		return p.cl, nil
	}
	// Idempotent (franz-go's default: acks from all in-sync replicas,
	// each partition's records in order, retried without duplicates),
	// partitioned by Record's Partition, which Publish sets. Records are
	// sent when Publish flushes, once every record of a chunk is in its
	// partition's buffer (placement): a partition's batch that fails then
	// fails every record after it in the chunk too (franz-go fails all
	// the partition's buffered records, and the brokers take no later
	// batch in flight past the failed one, its sequence not next), so no
	// later record is written past a failed one. A sequence the brokers
	// lost (OUT_OF_ORDER_SEQUENCE) fails too, rather than being sent
	// again out of order: Publish reads the partition ends again and
	// sends what is missing, in order.
	opts := []kgo.Opt{kgo.SeedBrokers(p.brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ManualFlushing(),
		kgo.MaxBufferedRecords(2 * chunk),
		kgo.StopProducerOnDataLossDetected(),
		kgo.WithHooks(placedHook{p})}
	cl, err := kgo.NewClient(append(opts, clientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", p.name, err)
	}
	p.cl = cl
	return cl, nil
}

// clientOpts are added to the producing client's options: a test's
// hooks, logger or partitioner (SetClientOpts).
var clientOpts []kgo.Opt

// MaxRows is 1: a record carries one row, keyed by its primary key.
func (p *Publisher) MaxRows() int { return 1 }

// Stats returns the records confirmed (Applied) and produced and not yet
// confirmed (Pending).
func (p *Publisher) Stats() sink.Stats {
	return sink.Stats{Applied: p.applied.Load(), Pending: p.pending.Load()}
}

// Skipped is how many messages Publish found already in their partition
// and did not produce again.
func (p *Publisher) Skipped() uint64 { return p.skipped.Load() }

// Close disconnects: records not yet acked fail, and a Publish waiting
// for them returns.
func (p *Publisher) Close() error {
	p.mu.Lock()
	cl := p.cl
	p.cl, p.closed = nil, true
	p.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
	return nil
}

// Publish produces msgs, each to its topic and its key's partition, and
// returns once the brokers have acked every one. A message its partition
// already holds (its (seq, n) at or before the partition's last) is
// skipped, unless it is of a snapshot chunk read again whose seq the
// partition ends in: that chunk's rows under those n may be others than
// the first time, so its rows are published again (at least once). After an error the next call reads the partitions' ends again.
func (p *Publisher) Publish(ctx context.Context, msgs []sink.Message) (err error) {
	if p.broken != nil {
		return p.broken
	}
	cl, err := p.client()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// What the partitions hold is read again, by a client of
			// its own (a producer ID of its own).
			clear(p.ends)
			p.drop(cl)
		}
	}()
	recs := make([]*kgo.Record, 0, len(msgs))
	from := make([]int, 0, len(msgs)) // recs[k] is msgs[from[k]]'s
	for i := range msgs {
		m := &msgs[i]
		topic := p.topicOf(m)
		t := p.ends[topic]
		if t == nil {
			if t, err = learn(ctx, cl, p.brokers, topic, p.writer); err != nil {
				return fmt.Errorf("sink %s: %w", p.name, err)
			}
			p.ends[topic] = t
		}
		key := Key(m)
		part := Partition(key, int32(len(t.last)))
		pos := PosOf(m)
		if t.written(part, pos) && !(m.Reread && t.last[part].Seq == pos.Seq) {
			p.skipped.Add(1)
			continue
		}
		if !t.written(part, pos) {
			t.last[part], t.has[part] = pos, true
		}
		recs = append(recs, Record(m, topic, part, key, p.writer))
		from = append(from, i)
	}
	if len(recs) == 0 {
		return nil
	}
	errs := p.produce(ctx, cl, recs)
	return p.check(msgs, recs, errs, func(k int) int { return from[k] })
}

// topicOf is message m's topic.
func (p *Publisher) topicOf(m *sink.Message) string {
	logical := m.Database + "." + m.Table
	t, ok := p.topics[logical]
	if !ok {
		t = Topic(p.topic, m.Database, m.Table)
		p.topics[logical] = t
	}
	return t
}

// chunk is how many records Publish buffers before it flushes them.
const chunk = 8192

// produce produces recs, a chunk at a time, and waits for every one's ack
// or failure: with an idempotent producer a record is failed only when
// the brokers do not hold it, so once produce returns nothing of recs is
// still on its way. A chunk is produced only if every record before it
// was written. errs[k] is recs[k]'s failure, nil for one not produced.
func (p *Publisher) produce(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) []error {
	errs := make([]error, len(recs))
	idx := make(map[*kgo.Record]int, len(recs))
	for k, r := range recs {
		idx[r] = k
	}
	var (
		wg     sync.WaitGroup
		failed bool
	)
	defer p.placing.Store(nil)
	promise := func(r *kgo.Record, err error) {
		// Promises run one at a time, on the client's goroutine.
		p.placing.Load().place(r) // failed before it was buffered, maybe
		errs[idx[r]] = err
		failed = failed || err != nil
		p.pending.Add(^uint64(0))
		if err == nil {
			p.applied.Add(1)
		}
		wg.Done()
	}
	for start := 0; start < len(recs); start += chunk {
		part := recs[start:min(start+chunk, len(recs))]
		pl := newPlacement(idx, start, len(part))
		p.placing.Store(pl)
		wg.Add(len(part))
		p.pending.Add(uint64(len(part)))
		for _, r := range part {
			cl.Produce(ctx, r, promise)
		}
		p.await(ctx, cl, &wg, pl.all)
		if failed {
			for k := start + len(part); k < len(recs); k++ {
				errs[k] = errNotProduced
			}
			break
		}
	}
	return errs
}

// abandonAfter is how long a Publish whose ctx ended waits for records
// already sent before it closes its client.
var abandonAfter = 10 * time.Second

// placement follows a chunk's records until each is in its partition's
// buffer, or failed before it got there.
//
// franz-go holds the records of a topic the client has no metadata of
// yet (every topic, for the client a Publish after an error makes) until
// the metadata comes, then buffers them one by one. A Flush begun before
// then sends a partition's first records alone, and if that batch fails,
// franz-go fails what the partition has buffered so far and sends the
// records buffered after as a new sequence, which the brokers write: a
// record written past a failed one (ErrGap). So a chunk is flushed only
// once all of it is placed.
type placement struct {
	idx    map[*kgo.Record]int // every record of the Publish, at its index
	start  int                 // the chunk's first record's index
	placed []atomic.Bool       // by index from start
	left   atomic.Int64        // how many are not yet placed
	all    chan struct{}       // closed once none is left
}

func newPlacement(idx map[*kgo.Record]int, start, n int) *placement {
	pl := &placement{idx: idx, start: start, placed: make([]atomic.Bool, n), all: make(chan struct{})}
	pl.left.Store(int64(n))
	return pl
}

// place marks record r placed, if it is of the chunk (pl may be nil).
func (pl *placement) place(r *kgo.Record) {
	if pl == nil {
		return
	}
	k, ok := pl.idx[r]
	k -= pl.start
	if ok && k >= 0 && k < len(pl.placed) && pl.placed[k].CompareAndSwap(false, true) && pl.left.Add(-1) == 0 {
		close(pl.all)
	}
}

// placedHook marks each record franz-go puts in its partition's buffer
// placed.
type placedHook struct{ p *Publisher }

var _ kgo.HookProduceRecordPartitioned = placedHook{}

func (h placedHook) OnProduceRecordPartitioned(r *kgo.Record, _ int32) {
	h.p.placing.Load().place(r)
}

// await waits until placed is closed, then flushes cl and waits for every
// promise of wg. Not cut short by ctx at once: the records not yet sent
// fail as soon as ctx ends, but those sent are waited for (their outcome
// is what the next Publish must know); if the brokers still have not
// answered abandonAfter after ctx ended (they are down), the client is
// closed, which fails them. A record sent then may still be written if a
// broker had read it: the next Publish, or the next process, reads the
// partition ends again.
func (p *Publisher) await(ctx context.Context, cl *kgo.Client, wg *sync.WaitGroup, placed <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Not cut short either: records still held for their topic's
		// metadata fail when ctx ends, or when the client is closed.
		<-placed
		cl.Flush(context.WithoutCancel(ctx))
		wg.Wait()
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	select {
	case <-done:
	case <-time.After(abandonAfter):
		p.drop(cl)
		<-done
	}
}

// errNotProduced marks a record produce did not produce, after a failure
// of one before it.
var errNotProduced = errors.New("kafka: not produced after an earlier failure")

// drop closes cl, the producing client, if it still is: the next Publish
// makes a new one.
func (p *Publisher) drop(cl *kgo.Client) {
	p.mu.Lock()
	mine := p.cl == cl
	if mine {
		p.cl = nil
	}
	p.mu.Unlock()
	if mine {
		cl.Close() // else Close has
	}
}

// check turns produce's failures into Publish's error: the first failure,
// or ErrGap (sticky) if a record of a partition was written after one of
// the same partition failed. msg(k) is recs[k]'s index in msgs.
func (p *Publisher) check(msgs []sink.Message, recs []*kgo.Record, errs []error, msg func(k int) int) error {
	type tp struct {
		topic string
		part  int32
	}
	failed := map[tp]int{} // the first failed record of each partition
	var first error
	for k, r := range recs {
		at := tp{r.Topic, r.Partition}
		if errs[k] != nil {
			if _, ok := failed[at]; !ok {
				failed[at] = k
			}
			if first == nil {
				m := &msgs[msg(k)]
				first = fmt.Errorf("sink %s: produce message %s to topic %s partition %d: %w", p.name, PosOf(m), r.Topic, r.Partition, errs[k])
			}
			continue
		}
		if f, ok := failed[at]; ok {
			p.broken = fmt.Errorf("sink %s: topic %s partition %d: message %s failed (%v) and message %s after it was written: %w",
				p.name, r.Topic, r.Partition, PosOf(&msgs[msg(f)]), errs[f], PosOf(&msgs[msg(k)]), ErrGap)
			return p.broken
		}
	}
	return first
}
