package stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

func seqs(b Batch) []uint64 {
	var out []uint64
	for _, e := range b.Events {
		out = append(out, e.Seq)
	}
	return out
}

func putN(t *testing.T, s *Store, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		var mark *group.Cursor
		if i%2 == 1 {
			mark = &group.Cursor{Seq: uint64(i)} // a transaction boundary every other event
		}
		if err := s.Put(context.Background(), &change.Event{Type: change.EventCommit, Seq: uint64(i)}, mark); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStoreBatches: get hands out events in order, ack confirms batches in
// order, rollback hands the un-acked ones out again, and two clients read
// independently.
func TestStoreBatches(t *testing.T) {
	s := NewStore(Config{})
	s.Subscribe("a")
	s.Subscribe("b")
	putN(t, s, 1, 6)
	ctx := context.Background()
	b1, _ := s.Get(ctx, "a", 2, 0)
	b2, _ := s.Get(ctx, "a", 3, 0)
	if got := seqs(b1); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("first batch %v", got)
	}
	if got := seqs(b2); len(got) != 3 || got[0] != 3 {
		t.Fatalf("second batch %v", got)
	}
	if err := s.Ack("a", b2.ID); !errors.Is(err, ErrUnknownBatch) {
		t.Fatalf("acking the second batch first: %v, want ErrUnknownBatch", err)
	}
	if err := s.Ack("a", 99); !errors.Is(err, ErrUnknownBatch) {
		t.Fatalf("acking an unknown batch: %v", err)
	}
	if err := s.Ack("a", b1.ID); err != nil {
		t.Fatal(err)
	}
	if m := s.Mark("a"); m == nil || m.Seq != 1 {
		t.Errorf("mark after acking events 1-2 = %v, want 1", m)
	}
	if err := s.Rollback("a"); err != nil {
		t.Fatal(err)
	}
	again, _ := s.Get(ctx, "a", 10, 0)
	if got := seqs(again); len(got) != 4 || got[0] != 3 || got[3] != 6 {
		t.Fatalf("after rollback %v, want 3..6", got)
	}
	// Client b has not read anything: it starts at 1.
	bb, _ := s.Get(ctx, "b", 1, 0)
	if got := seqs(bb); len(got) != 1 || got[0] != 1 {
		t.Fatalf("client b %v", got)
	}
	// Nothing ready: an empty batch, ID -1, after the timeout.
	if err := s.Ack("a", again.ID); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	empty, err := s.Get(ctx, "a", 10, 50*time.Millisecond)
	if empty.ID != -1 || len(empty.Events) != 0 || err != nil || time.Since(began) < 50*time.Millisecond {
		t.Fatalf("empty get: %+v %v after %v", empty, err, time.Since(began))
	}
	if st := s.Stats(); st.Events != 6 {
		t.Errorf("%d events held, want 6 (client b acked none)", st.Events)
	}
}

// TestStoreBackpressure: a full store makes Put wait until a client acks;
// nothing is dropped and the bound holds.
func TestStoreBackpressure(t *testing.T) {
	s := NewStore(Config{MaxEvents: 4})
	s.Subscribe("c")
	putN(t, s, 1, 4)
	done := make(chan error, 1)
	go func() { done <- s.Put(context.Background(), &change.Event{Seq: 5}, nil) }()
	select {
	case err := <-done:
		t.Fatalf("Put into a full store returned %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	b, _ := s.Get(context.Background(), "c", 2, 0)
	select {
	case <-done:
		t.Fatalf("Put went on before an ack freed room")
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Ack("c", b.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rest, _ := s.Get(context.Background(), "c", 10, 0)
	if got := seqs(rest); len(got) != 3 || got[0] != 3 || got[2] != 5 {
		t.Fatalf("rest %v, want 3..5", got)
	}
	if st := s.Stats(); st.Events > 4 {
		t.Errorf("%d events held, bound is 4", st.Events)
	}
	// A canceled Put returns.
	ctx, cancel := context.WithCancel(context.Background())
	putN(t, s, 6, 1)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if err := s.Put(ctx, &change.Event{Seq: 7}, nil); err != context.Canceled {
		t.Errorf("canceled Put: %v", err)
	}
}

// TestStoreFill: Fill waits for a whole batch until its timeout, returns
// what there is when the timeout passes, and returns at once when the
// store is full (no more can come before an ack).
func TestStoreFill(t *testing.T) {
	ctx := context.Background()
	s := NewStore(Config{MaxEvents: 5})
	s.Subscribe("a")
	putN(t, s, 1, 2)

	// Two events ready, four wanted: Fill waits for two more.
	got := make(chan Batch, 1)
	go func() {
		b, err := s.Fill(ctx, "a", 4, 0, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case b := <-got:
		t.Fatalf("Fill returned %v with 2 of 4 events before its timeout", seqs(b))
	default:
	}
	putN(t, s, 3, 2)
	if b := <-got; len(b.Events) != 4 {
		t.Fatalf("Fill gave %v, want 4 events", seqs(b))
	}

	// One more event, three wanted: the timeout passes, Fill gives one.
	putN(t, s, 5, 1)
	began := time.Now()
	b, err := s.Fill(ctx, "a", 3, 0, 100*time.Millisecond)
	if err != nil || len(b.Events) != 1 || time.Since(began) < 100*time.Millisecond {
		t.Fatalf("Fill gave %v (err %v) after %v, want one event after the 100ms timeout", seqs(b), err, time.Since(began))
	}

	// The store holds five (its bound) and the producer waits: Fill gives
	// what there is at once.
	s.Subscribe("b")
	put := make(chan error, 1)
	go func() { put <- s.Put(ctx, &change.Event{Type: change.EventCommit, Seq: 6}, nil) }()
	retry.Until(t, 5*time.Second, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.full {
			return errors.New("the producer never waited for room")
		}
		return nil
	})
	began = time.Now()
	b, err = s.Fill(ctx, "b", 100, 0, time.Minute)
	if err != nil || len(b.Events) != 5 || time.Since(began) > 10*time.Second {
		t.Fatalf("Fill of a full store gave %v (err %v) after %v, want its 5 events at once", seqs(b), err, time.Since(began))
	}
	s.Close()
	<-put
}

// TestStoreFillBytes: Fill hands out no more events than add up to its
// byte bound (one at least, however large), and returns at once, without
// waiting for its count, when that many bytes are ready.
func TestStoreFillBytes(t *testing.T) {
	ctx := context.Background()
	s := NewStore(Config{})
	s.Subscribe("a")
	putN(t, s, 1, 10)
	size := (&change.Event{Type: change.EventCommit, Seq: 1}).Size() // every event's

	began := time.Now()
	b, err := s.Fill(ctx, "a", 100, 3*size, time.Minute)
	if err != nil || len(b.Events) != 3 || time.Since(began) > 10*time.Second {
		t.Fatalf("Fill of 3 events' bytes gave %v (err %v) after %v, want 3 events at once", seqs(b), err, time.Since(began))
	}
	if b, _ = s.Fill(ctx, "a", 100, 3*size-1, time.Minute); len(b.Events) != 2 {
		t.Fatalf("Fill of just under 3 events' bytes gave %v, want 2 events", seqs(b))
	}
	if b, _ = s.Fill(ctx, "a", 100, 1, time.Minute); len(b.Events) != 1 {
		t.Fatalf("Fill of 1 byte gave %v, want the one event that does not fit", seqs(b))
	}
	if b, _ = s.Fill(ctx, "a", 2, 100*size, 0); len(b.Events) != 2 {
		t.Fatalf("Fill of 2 events under a large byte bound gave %v, want 2", seqs(b))
	}
}

// TestStoreUnsubscribe: a client that unsubscribes no longer holds events;
// subscribing again starts at the oldest event held then.
func TestStoreUnsubscribe(t *testing.T) {
	ctx := context.Background()
	s := NewStore(Config{})
	s.Subscribe("a")
	s.Subscribe("gone")
	putN(t, s, 1, 4)
	b, _ := s.Get(ctx, "a", 3, 0)
	if err := s.Ack("a", b.ID); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Events; n != 4 {
		t.Fatalf("store holds %d events, want 4 (client gone has acked none)", n)
	}
	s.Unsubscribe("gone")
	if n := s.Stats().Events; n != 1 {
		t.Fatalf("after gone unsubscribed the store holds %d events, want 1 (a acked 3)", n)
	}
	if _, err := s.Get(ctx, "gone", 1, 0); err == nil {
		t.Fatal("Get of an unsubscribed client succeeded")
	}
	s.Subscribe("gone")
	if b, _ := s.Get(ctx, "gone", 10, 0); len(b.Events) != 1 || b.Events[0].Seq != 4 {
		t.Fatalf("resubscribed client got %v, want [4]", seqs(b))
	}
}

// TestStoreSubscribeAfter: a client that has every transaction up to a seq
// gets only later ones, keeps its mark until it acks a newer one, and does
// not hold the skipped events.
func TestStoreSubscribeAfter(t *testing.T) {
	ctx := context.Background()
	s := NewStore(Config{})
	saved := &group.Cursor{Seq: 3}
	s.SubscribeAfter("resumed", 3, saved)
	putN(t, s, 1, 2)
	if b, _ := s.Get(ctx, "resumed", 10, 0); b.ID != -1 {
		t.Fatalf("got %v, want nothing: seqs 1 and 2 are before its cursor", seqs(b))
	}
	if n := s.Stats().Events; n != 0 {
		t.Errorf("store holds %d events it needs for nobody", n)
	}
	if m := s.Mark("resumed"); m != saved {
		t.Errorf("mark %v, want the saved one", m)
	}
	putN(t, s, 3, 3) // 3 is its last; 4 and 5 are new
	b, _ := s.Get(ctx, "resumed", 10, 0)
	if got := seqs(b); len(got) != 2 || got[0] != 4 || got[1] != 5 {
		t.Fatalf("got %v, want [4 5]", got)
	}
	if err := s.Ack("resumed", b.ID); err != nil {
		t.Fatal(err)
	}
	if m := s.Mark("resumed"); m == nil || m.Seq != 5 {
		t.Errorf("mark %v, want 5 (the last acked event's)", m)
	}
}
