package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
	txnID   string // the producer's transactional ID (TransactionalID)

	mu     sync.Mutex
	cl     *kgo.Client // nil: connect at the next Publish
	closed bool

	// topics caches each logical table's topic ("database.table" →
	// topic). Publish's alone.
	topics map[string]string
	// ends are the topics written to since the producer was made, with
	// what each partition holds committed; reset after an error, so that
	// the next Publish (with a new producer) reads them again. Publish's
	// alone.
	ends map[string]*topicEnds
	// inited is the client whose producer ID Publish has initialized
	// (producer). Publish's alone.
	inited *kgo.Client
	// fencedAt is when a Publish last found the producer fenced (zero:
	// never). Publish's alone.
	fencedAt time.Time
	// staged counts the records of inited's open transaction (0: none is
	// open). Stage's and Commit's alone.
	staged int

	// applied counts records committed, pending those produced and not
	// yet acked or failed, acked those acked in the open transaction.
	applied, pending, acked, skipped atomic.Uint64
}

var _ sink.Publisher = (*Publisher)(nil)

// ErrFenced is the error of a Publish whose producer another took the
// transactional ID from: another process (a newer owner of the
// destination) publishes the sink now, and what this one produced in its
// open transaction is aborted.
var ErrFenced = errors.New("kafka: fenced: another producer took over the sink's transactional id")

// ErrClosed is the error of a Publish after Close.
var ErrClosed = errors.New("kafka: publisher closed")

// TransactionalID is the transactional ID of the producer of sink name of
// destination dest: the same on every node, so that a new owner's
// producer fences the former owner's.
func TransactionalID(dest, name string) string { return "braid:" + dest + "/" + name }

// Open connects to sink s's brokers. Its transactional producer is
// initialized at the first Publish (which fences any earlier producer of
// the sink), not here: opening the sink to look at it (braid sink verify)
// leaves the running one be. s has spec's defaults.
func Open(ctx context.Context, s spec.Sink, dest string) (*Publisher, error) {
	if len(s.Brokers) == 0 || s.Topic == "" {
		return nil, fmt.Errorf("sink %s: brokers and topic must be set (spec's defaults)", s.Name)
	}
	p := &Publisher{name: s.Name, brokers: s.Brokers, topic: s.Topic, writer: Writer(dest, s.Name), txnID: TransactionalID(dest, s.Name),
		ends: map[string]*topicEnds{}, topics: map[string]string{}}
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

// producer is the producing client, made if there is none, with its
// producer ID initialized: the brokers fence every earlier producer of
// the transactional ID and abort its open transaction, so that what the
// partitions hold committed from now on changes only by this producer's
// commits (until another fences it). Publish's alone.
func (p *Publisher) producer(ctx context.Context) (*kgo.Client, error) {
	cl, err := p.client()
	if err != nil || p.inited == cl {
		return cl, err
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		p.drop(cl)
		return nil, fmt.Errorf("sink %s: brokers %v: initializing transactional producer %s: %w", p.name, p.brokers, p.txnID, err)
	}
	p.inited = cl
	return cl, nil
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
	// Transactional (so idempotent: acks from all in-sync replicas, each
	// partition's records in order, retried without duplicates),
	// partitioned by Record's Partition, which Publish sets.
	opts := []kgo.Opt{kgo.SeedBrokers(p.brokers...),
		kgo.TransactionalID(p.txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(2 * chunk)}
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

// Stats returns the records committed (Applied) and produced and not yet
// committed or failed (Pending: on their way, or acked in the open
// transaction).
func (p *Publisher) Stats() sink.Stats {
	return sink.Stats{Applied: p.applied.Load(), Pending: p.pending.Load() + p.acked.Load()}
}

// Skipped is how many messages Publish found already in their partition
// and did not produce again.
func (p *Publisher) Skipped() uint64 { return p.skipped.Load() }

// Close disconnects: records not yet acked fail, and a Publish waiting
// for them returns. A transaction still open is aborted by the next
// producer of the sink (or by the brokers, at its timeout).
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

// fenceWait is how long a Publish waits, after one found the producer
// fenced, before it makes a producer again (which fences the other): long
// enough for a node that lost the destination to learn it and stop the
// sink first.
var fenceWait = 30 * time.Second

// Publish produces msgs, each to its topic and its key's partition, and
// returns once every one is committed: Stage, then Commit.
func (p *Publisher) Publish(ctx context.Context, msgs []sink.Message) error {
	if err := p.Stage(ctx, msgs); err != nil {
		return err
	}
	return p.Commit(ctx)
}

var _ sink.Stager = (*Publisher)(nil)

// Stage produces msgs, each to its topic and its key's partition, in the
// producer's open transaction (begun if none is), and returns once every
// record is acked: they are in their partitions, invisible to a
// read_committed consumer until Commit. A transaction that reaches chunk
// records is committed on the way. A message its partition already holds
// committed (its (seq, n) at or before the partition's last) is skipped,
// unless it is of a snapshot chunk read again whose seq the partition ends
// in: that chunk's rows under those n may be others than the first time,
// so its rows are published again (at least once). After an error the
// open transaction is left for the next producer to abort, and the next
// call makes that producer and reads the partitions' ends again; after
// ErrFenced it first waits fenceWait.
func (p *Publisher) Stage(ctx context.Context, msgs []sink.Message) (err error) {
	if !p.fencedAt.IsZero() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(p.fencedAt.Add(fenceWait))):
		}
	}
	cl, err := p.producer(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			p.failed(cl, err)
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
	for start := 0; start < len(recs); {
		if p.staged >= chunk {
			if err := p.commit(ctx, cl); err != nil {
				return err
			}
		}
		part := recs[start:min(start+chunk-p.staged, len(recs))]
		k, err := p.produce(ctx, cl, part)
		if err != nil {
			if fenced(err) {
				return p.fencedError(err)
			}
			if k < 0 {
				return fmt.Errorf("sink %s: produce messages %s to %s: %w", p.name, PosOf(&msgs[from[start]]), PosOf(&msgs[from[start+len(part)-1]]), err)
			}
			r := part[k]
			return fmt.Errorf("sink %s: produce message %s to topic %s partition %d: %w", p.name, PosOf(&msgs[from[start+k]]), r.Topic, r.Partition, err)
		}
		start += len(part)
	}
	return nil
}

// Commit commits the open transaction, if Stage left one: every record
// staged since the last commit becomes visible to read_committed
// consumers, and is what the partitions' ends say from then on. After an
// error nothing of it is committed (or, for a commit whose answer was
// lost, maybe all of it: the next producer reads the ends again).
func (p *Publisher) Commit(ctx context.Context) (err error) {
	if p.staged == 0 {
		return nil
	}
	cl := p.inited
	if cl == nil {
		return fmt.Errorf("sink %s: commit: %w", p.name, ErrClosed)
	}
	if err := p.commit(ctx, cl); err != nil {
		p.failed(cl, err)
		return err
	}
	return nil
}

// commit commits cl's open transaction (staged records).
func (p *Publisher) commit(ctx context.Context, cl *kgo.Client) error {
	n := p.staged
	p.staged = 0
	defer p.acked.Store(0)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		if fenced(err) {
			return p.fencedError(err)
		}
		return fmt.Errorf("sink %s: commit the transaction of %d records: %w", p.name, n, err)
	}
	p.applied.Add(uint64(n))
	return nil
}

func (p *Publisher) fencedError(err error) error {
	return fmt.Errorf("sink %s: %w (%v): this process stops producing; it tries again in %v if it still runs the sink", p.name, ErrFenced, err, fenceWait)
}

// failed forgets what a Stage or Commit that returned err leaves: the
// open transaction (for the next producer to abort) and what the
// partitions hold, read again after a new producer is made.
func (p *Publisher) failed(cl *kgo.Client, err error) {
	p.staged = 0
	p.acked.Store(0)
	clear(p.ends)
	p.drop(cl)
	if errors.Is(err, ErrFenced) {
		p.fencedAt = time.Now()
	}
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

// chunk is how many records one transaction holds at most.
const chunk = 8192

// produce produces recs in cl's open transaction (beginning one if none
// is open) and waits until every record is acked. On an error it returns
// the index of the first record that failed, or -1 if beginning the
// transaction did: the transaction is never committed then (it stays
// open, for the next producer to abort). When ctx ends while records are
// on their way, produce closes cl, which fails them.
func (p *Publisher) produce(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) (int, error) {
	if p.staged == 0 {
		if err := cl.BeginTransaction(); err != nil {
			return -1, err
		}
	}
	p.staged += len(recs)
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	wg.Add(len(recs))
	p.pending.Add(uint64(len(recs)))
	for k, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			errs[k] = err
			p.pending.Add(^uint64(0))
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cl.Flush(context.WithoutCancel(ctx)) // waits for every record, as wg does
		wg.Wait()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// The transaction will not be committed: what was sent is
		// failed by closing the client, and aborted by the next
		// producer.
		p.drop(cl)
		<-done
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	for k, err := range errs {
		if err != nil {
			return k, err
		}
	}
	p.acked.Add(uint64(len(recs)))
	return 0, nil
}

// fenced reports whether err says the producer's epoch is not the
// transactional ID's latest: another producer of the ID was initialized
// since. INVALID_TXN_STATE answers a commit whose transaction such a
// producer aborted; it also answers one the brokers aborted at its
// timeout (a Publish that ran longer than a transaction may), which is
// then taken for fencing too and costs a fenceWait.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidTxnState)
}

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
