package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/kafka"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
	"github.com/braid-cdc/braid/spec"
)

// rowStream is the messages of txns transactions of rows one-row INSERTs
// each on shop.orders (seqs 1 to txns, keys spread over the partitions),
// in store batches of perBatch transactions, as sink.Ordered hands them
// to a publisher.
func rowStream(txns, rows, perBatch int) [][]sink.Message {
	tbl := &change.Table{Schema: "shop_0", Name: "orders", LogicalSchema: "shop", LogicalName: "orders",
		Columns: []change.Column{{Name: "id", Type: "bigint", Key: true}}}
	var out [][]sink.Message
	for s := 1; s <= txns; s++ {
		if (s-1)%perBatch == 0 {
			out = append(out, nil)
		}
		for n := range rows {
			id := int64(s*100 + n)
			rc := change.NewValueRows(tbl, 0, [][]change.Value{{id}})
			out[len(out)-1] = append(out[len(out)-1], sink.Message{Seq: uint64(s), N: n, Source: "s0", Database: "shop", Table: "orders",
				Rows: []*change.RowChange{&rc[0]}, Body: fmt.Appendf(nil, `{"type":"INSERT","data":[{"id":"%d"}]}`, id)})
		}
	}
	return out
}

// pauser is a franz-go hook that, armed, stops the client's goroutine
// that hands out produce results at the first record the brokers acked,
// until released: as a SIGSTOP stops a node between its records' acks
// and the end of its Publish.
type pauser struct {
	armed   atomic.Bool
	paused  chan struct{}
	release chan struct{}
}

func (h *pauser) OnProduceRecordUnbuffered(_ *kgo.Record, err error) {
	if err == nil && h.armed.CompareAndSwap(true, false) {
		close(h.paused)
		<-h.release
	}
}

// TestFencedOwner: a sink's publisher (the destination's owner) is paused
// while the destination moves to another node, whose publisher of the
// same sink resumes from its cursor (behind what the first published),
// then the first goes on. The first must not write again what the second
// did: the second's producer fences it, it fails with ErrFenced and, still
// running, produces nothing more. A read_committed consumer of the topic
// sees every message of the stream once, each partition in stream order.
//
//   - mid: paused inside a Publish, its records acked and not committed
//     (a transaction the second's producer aborts, and then writes
//     itself);
//   - between: paused between two Publishes, everything committed.
func TestFencedOwner(t *testing.T) {
	for _, mid := range []bool{true, false} {
		name := map[bool]string{true: "mid", false: "between"}[mid]
		t.Run(name, func(t *testing.T) { testFencedOwner(t, mid) })
	}
}

func testFencedOwner(t *testing.T, mid bool) {
	kafka.SetFenceWait(t, time.Hour) // the first is stopped long before
	c := startCluster(t, 1, "shop.orders")
	batches := rowStream(48, 4, 4) // 12 store batches of 16 messages
	total := 48 * 4
	ds := spec.Spec{Sinks: []spec.Sink{{Name: "events", Type: "kafka", Brokers: c.ListenAddrs()}}}.WithDefaults()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The first owner's publisher, whose client pauses when armed.
	h := &pauser{paused: make(chan struct{}), release: make(chan struct{})}
	kafka.SetClientOpts(t, kgo.WithHooks(h))
	first, err := kafka.Open(ctx, ds.Sinks[0], "shop")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	kafka.SetClientOpts(t) // the second's client has no hook
	for _, b := range batches[:4] {
		if err := first.Publish(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	firstErr := make(chan error, 1)
	if mid {
		h.armed.Store(true)
		go func() { firstErr <- first.Publish(ctx, batches[4]) }()
		select {
		case <-h.paused:
		case err := <-firstErr:
			t.Fatalf("the first publisher's Publish returned %v before it paused", err)
		}
	}

	// The second owner opens the sink (its producer fences the first's)
	// and resumes from a cursor behind: the stream's start.
	second := takeOver(ctx, t, ds, batches[:8], 4*16)
	defer second.Close()

	// The first resumes and goes on with the next store batches.
	var errs []error
	if mid {
		close(h.release)
		errs = append(errs, <-firstErr)
	} else {
		errs = append(errs, first.Publish(ctx, batches[4]))
	}
	// Fenced, it holds its next Publish (fenceWait) until its context
	// ends, as its node stops the sink.
	ctx5, cancel5 := context.WithTimeout(ctx, 500*time.Millisecond)
	errs = append(errs, first.Publish(ctx5, batches[5]))
	cancel5()
	for _, b := range batches[8:] {
		if err := second.Publish(ctx, b); err != nil {
			t.Fatalf("the second publisher, after the first went on: %v", err)
		}
	}

	recs, parts, err := kafkatest.Read(ctx, c.ListenAddrs(), "shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.Check(recs, parts); err != nil {
		t.Fatalf("read_committed: %v", err)
	}
	if len(recs) != total {
		t.Fatalf("read_committed: %d records, want %d, each message once", len(recs), total)
	}
	for i, r := range kafkatest.InOrder(recs) {
		if want := (kafkatest.Pos{Seq: uint64(i/4 + 1), N: i % 4}); r.Pos != want {
			t.Fatalf("read_committed: message %d of the stream is %s, want %s", i, r.Pos, want)
		}
	}
	if !errors.Is(errs[0], kafka.ErrFenced) {
		t.Errorf("the first publisher going on after the takeover: %v, want ErrFenced", errs[0])
	}
	if !errors.Is(errs[1], context.DeadlineExceeded) {
		t.Errorf("the fenced publisher's next Publish: %v, want it held until its context ended", errs[1])
	}
	t.Logf("fenced: %v", errs[0])
}

// TestFencedStagedTransaction: a publisher stages several store batches
// in one open transaction, as sink.Ordered does between commits, and a
// new owner's producer fences it before it commits. Its Commit fails with
// ErrFenced and none of the staged messages is committed; the new owner,
// resuming from the stream's start, skips only what was committed before
// and publishes the rest: a read_committed consumer sees every message
// once, each partition in stream order.
func TestFencedStagedTransaction(t *testing.T) {
	kafka.SetFenceWait(t, time.Hour) // the first is stopped long before
	c := startCluster(t, 1, "shop.orders")
	batches := rowStream(48, 4, 4) // 12 store batches of 16 messages
	ds := spec.Spec{Sinks: []spec.Sink{{Name: "events", Type: "kafka", Brokers: c.ListenAddrs()}}}.WithDefaults()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	first, err := kafka.Open(ctx, ds.Sinks[0], "shop")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	for _, b := range batches[:2] {
		if err := first.Publish(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range batches[2:6] {
		if err := first.Stage(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if st := first.Stats(); st.Applied != 2*16 || st.Pending != 4*16 {
		t.Errorf("staged: %d records committed and %d pending, want %d and %d", st.Applied, st.Pending, 2*16, 4*16)
	}

	second := takeOver(ctx, t, ds, batches[:8], 2*16)
	defer second.Close()
	if err := first.Commit(ctx); !errors.Is(err, kafka.ErrFenced) {
		t.Errorf("the first publisher's commit after the takeover: %v, want ErrFenced", err)
	}
	for _, b := range batches[8:] {
		if err := second.Publish(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	recs, parts, err := kafkatest.Read(ctx, c.ListenAddrs(), "shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.Check(recs, parts); err != nil {
		t.Fatalf("read_committed: %v", err)
	}
	if len(recs) != 48*4 {
		t.Fatalf("read_committed: %d records, want %d, each message once", len(recs), 48*4)
	}
	for i, r := range kafkatest.InOrder(recs) {
		if want := (kafkatest.Pos{Seq: uint64(i/4 + 1), N: i % 4}); r.Pos != want {
			t.Fatalf("read_committed: message %d of the stream is %s, want %s", i, r.Pos, want)
		}
	}
}

// takeOver opens the sink as a second owner would (its producer fences
// the first's), publishes batches from the stream's start, and checks it
// skipped the committed messages the first publisher left.
func takeOver(ctx context.Context, t *testing.T, ds spec.Spec, batches [][]sink.Message, committed uint64) *kafka.Publisher {
	t.Helper()
	second, err := kafka.Open(ctx, ds.Sinks[0], "shop")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := second.Publish(ctx, b); err != nil {
			second.Close()
			t.Fatal(err)
		}
	}
	if skipped := second.Skipped(); skipped != committed {
		t.Errorf("the second publisher skipped %d messages, want the %d the first committed", skipped, committed)
	}
	return second
}
