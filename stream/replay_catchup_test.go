package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
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
	p, live, loads := liveUnderLoad(t, srvs, ds, 20*time.Millisecond)
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
	sameAsLive(t, want, live, late, "late")
}

// TestPinnedReplayLetGo: a client whose replay has read up to the store
// (pinned: the store keeps what comes for it) and that then stops reading
// holds the store full; after consumers.detach_after it is let go, the
// live client reads on, and the idle one, reading again, gets the whole
// stream from its replay.
func TestPinnedReplayLetGo(t *testing.T) {
	srvs, ds := twoShards(t)
	ds.Consumers.DetachAfter = spec.Duration(2 * time.Second)
	p, live, loads := liveUnderLoad(t, srvs, ds, 10*time.Millisecond)
	if err := p.Store.Open(context.Background(), "idle", stream.OpenOptions{Start: stream.Start{Kind: stream.StartEarliest}}); err != nil {
		t.Fatal(err)
	}
	// One event a read: pinned long before it could reach the store.
	idle := newReader(p.Store, "idle")
	retry.Until(t, time.Minute, func() error {
		b, err := p.Store.Get(context.Background(), "idle", 1, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		idle.take(b)
		if b.ID >= 0 {
			if err := p.Store.Ack("idle", b.ID); err != nil {
				t.Fatal(err)
			}
		}
		if cs := clientStats(p.Store, "idle"); !cs.Pinned {
			if !cs.Replaying {
				t.Fatalf("the idle client rejoined the store before it was pinned: %+v", cs)
			}
			return errors.New("not pinned yet")
		}
		return nil
	})
	retry.Until(t, time.Minute, func() error {
		if st := p.Store.Stats(); !slices.Contains(st.BlockedBy, "idle") {
			return fmt.Errorf("the store is blocked by %v, want idle among them", st.BlockedBy)
		}
		return nil
	})
	retry.Until(t, time.Minute, func() error {
		if cs := clientStats(p.Store, "idle"); cs.Pinned || !cs.Replaying {
			return fmt.Errorf("the idle client: %+v; want it let go, on its replay", cs)
		}
		if st := p.Store.Stats(); slices.Contains(st.BlockedBy, "idle") {
			return fmt.Errorf("the store is still blocked by %v", st.BlockedBy)
		}
		return nil
	})
	want := 0
	for _, l := range loads {
		want += len(l.Stop().Committed)
	}
	readOn(t, idle)
	sameAsLive(t, want, live, idle, "idle")
}

// sameAsLive waits until the live client and the other hold the want
// rows the loads committed, then checks that the live client's seqs are
// dense and that the other got the same transactions at the same seqs,
// none of them whole twice.
func sameAsLive(t *testing.T, want int, live, other *reader, name string) {
	t.Helper()
	retry.Until(t, time.Minute, func() error {
		live.mu.Lock()
		other.mu.Lock()
		defer live.mu.Unlock()
		defer other.mu.Unlock()
		if a, b := countRows(live.txs), countRows(other.txs); a != want || b != want {
			return fmt.Errorf("the live client has %d rows, the %s one %d, the load committed %d", a, name, b, want)
		}
		return nil
	})
	live.mu.Lock()
	other.mu.Lock()
	defer live.mu.Unlock()
	defer other.mu.Unlock()
	checkDense(t, "live", live.txs, 1)
	for i := range live.txs {
		if other.txs[i].seq != live.txs[i].seq || !slices.Equal(other.txs[i].rows, live.txs[i].rows) {
			t.Fatalf("the %s client's transaction %d: %+v, the live client's %+v", name, i, other.txs[i], live.txs[i])
		}
	}
	if live.dup+other.dup > 0 {
		t.Errorf("events of transactions had whole again: live %d, %s %d", live.dup, name, other.dup)
	}
}

// liveUnderLoad starts ds's pipeline with a small store, a client "live"
// reading it, and a load on every shard writing every interval, and
// returns once the store has let go of its first 20 seqs.
func liveUnderLoad(t *testing.T, srvs []*mysqltest.Server, ds *spec.Spec, every time.Duration) (*stream.Pipeline, *reader, []*mysqltest.Load) {
	t.Helper()
	p := start(t, ds, stream.Config{MaxBytes: 64 << 10})
	p.Store.Subscribe("live")
	live := newReader(p.Store, "live")
	readOn(t, live)
	var loads []*mysqltest.Load
	for i, s := range srvs {
		loads = append(loads, mysqltest.StartLoad(t, s.Addr(), fmt.Sprintf("shop_%d", i), "orders", every))
	}
	retry.Until(t, time.Minute, func() error {
		if f := p.Store.Stats().Floor; f < 20 {
			return fmt.Errorf("the store's floor is seq %d, want 20 or more", f)
		}
		return nil
	})
	return p, live, loads
}
