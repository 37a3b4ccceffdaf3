package stream_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/stream"
)

// readOn reads client's stream in the background until the test ends,
// as the native API's server does: it takes the next batch before the
// last is acked (its client acks what it was sent as it gets it), and
// acks the last after.
func readOn(t *testing.T, r *reader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		prev := int64(-1)
		for ctx.Err() == nil {
			b, err := r.store.GetTx(ctx, r.client, 256, 100*time.Millisecond)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("client %s: %v", r.client, err)
				}
				return
			}
			r.take(b)
			if prev >= 0 {
				if err := r.store.Ack(r.client, prev); err != nil {
					t.Errorf("client %s: %v", r.client, err)
					return
				}
			}
			prev = b.ID
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestReplayCatchesUpUnderLoad: a client id that starts at earliest
// behind a store whose one other client acks each transaction as it
// comes is served by a replay reader, which reads as fast as the load
// writes and so stays a transaction or two behind the newest: the store
// lets each go as its client acks it, and a replay that only compares
// itself with the moving newest never rejoins. The store keeps what
// comes once the replay has read up to it, and the client rejoins while
// the load goes on, with the same seqs and rows as the live client.
func TestReplayCatchesUpUnderLoad(t *testing.T) {
	srvs, ds := twoShards(t)
	p := start(t, ds, stream.Config{MaxBytes: 64 << 10})
	p.Store.Subscribe("live")
	live := newReader(p.Store, "live")
	readOn(t, live)
	var loads []*mysqltest.Load
	for i, s := range srvs {
		loads = append(loads, mysqltest.StartLoad(t, s.Addr(), fmt.Sprintf("shop_%d", i), "orders", 20*time.Millisecond))
	}
	retry.Until(t, time.Minute, func() error {
		if f := p.Store.Stats().Floor; f < 20 {
			return fmt.Errorf("the store's floor is seq %d, want 20 or more", f)
		}
		return nil
	})
	if err := p.Store.Open(context.Background(), "late", stream.OpenOptions{Start: stream.Start{Kind: stream.StartEarliest}}); err != nil {
		t.Fatal(err)
	}
	if cs := clientStats(p.Store, "late"); !cs.Replaying {
		t.Fatalf("the late client is not served by a replay reader: %+v", cs)
	}
	late := newReader(p.Store, "late")
	readOn(t, late)
	retry.Until(t, time.Minute, func() error {
		if cs := clientStats(p.Store, "late"); cs.Replaying {
			return fmt.Errorf("the late client still replays at seq %d, the store's floor is %d", cs.AckedSeq, p.Store.Stats().Floor)
		}
		return nil
	})
	// It rejoined while the load went on: the load is still writing.
	for _, l := range loads {
		if r := l.Result(); len(r.Committed) == 0 || len(r.Unknown)+len(r.Refused) > 0 {
			t.Fatalf("the load: %+v", r)
		}
	}
	want := 0
	for _, l := range loads {
		want += len(l.Stop().Committed)
	}
	retry.Until(t, time.Minute, func() error {
		live.mu.Lock()
		late.mu.Lock()
		defer live.mu.Unlock()
		defer late.mu.Unlock()
		if a, b := countRows(live.txs), countRows(late.txs); a != want || b != want {
			return fmt.Errorf("the live client has %d rows, the late one %d, the load committed %d", a, b, want)
		}
		return nil
	})
	live.mu.Lock()
	late.mu.Lock()
	defer live.mu.Unlock()
	defer late.mu.Unlock()
	checkDense(t, "live", live.txs, 1)
	for i := range live.txs {
		if late.txs[i].seq != live.txs[i].seq || !slices.Equal(late.txs[i].rows, live.txs[i].rows) {
			t.Fatalf("the late client's transaction %d: %+v, the live client's %+v", i, late.txs[i], live.txs[i])
		}
	}
	if live.dup+late.dup > 0 {
		t.Errorf("events of transactions had whole again: live %d, late %d", live.dup, late.dup)
	}
}
