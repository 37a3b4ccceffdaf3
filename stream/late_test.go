package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// TestReplayKeepsLateTransaction: a transaction that went out late (its
// key below one already out) is kept in the pipeline's placement log, and a
// late client's replay reader emits it where the live run did: every seq
// names the same transaction for the live client and the late one.
func TestReplayKeepsLateTransaction(t *testing.T) {
	srvs, ds := twoShards(t)
	p := start(t, ds, stream.Config{MaxBytes: 64 << 10, MaxReplays: 1})
	first := newReader(p.Store, "1001")
	p.Store.Subscribe("1001")
	time.Sleep(time.Second) // heartbeats: both watermarks are about now - 1s
	at := time.Now().Add(-time.Hour).Unix()
	// s1's (at, 1) goes out at once; s0's (at, 0) then comes below it: late.
	srvs[1].Exec(t, fmt.Sprintf("SET timestamp = %d", at), "INSERT INTO shop_1.orders VALUES (1, 'y')")
	first.until(t, 1, time.Minute)
	srvs[0].Exec(t, fmt.Sprintf("SET timestamp = %d", at), "INSERT INTO shop_0.orders VALUES (2, 'x')")
	if got := first.until(t, 2, time.Minute); !slices.Equal(got[1].rows, []string{"s0:2"}) {
		t.Fatalf("the second transaction: %+v", got[1])
	}
	if log := p.Placements(); len(log) != 1 || !log[0].Late || log[0].Taken != 1 {
		t.Fatalf("the placement log holds %+v; want s0's late transaction at point 1", log)
	}
	write(t, srvs, 100, 100, 5) // enough that the store lets the first go
	want := first.until(t, 202, time.Minute)
	checkDense(t, "1001", want, 1)
	if f := p.Store.Stats().Floor; f == 0 {
		t.Fatalf("the store still holds the first transaction (floor %d): make it smaller", f)
	}

	p.Store.Subscribe("1002") // from the spec's start: a replay
	got := newReader(p.Store, "1002").until(t, 202, time.Minute)
	for i := range want {
		if got[i].seq != want[i].seq || !slices.Equal(got[i].rows, want[i].rows) {
			t.Fatalf("late client's transaction %d: %+v, the live client's %+v", i, got[i], want[i])
		}
	}
}

// TestTakeoverBehindFasterClient: the live run lets s1's transaction out
// at key (at, 1), s0's watermark being above, and stops before s0's at
// (at, 0) comes. A new run (a new owner) resumes from the slow client's
// cursor, before s1's, and up to the fast client's emits what the live
// run emitted: s1's at the seq the fast client saw, then s0's, late.
// Sorted by key instead, s0's would take that seq and the fast client,
// reading on after its cursor, would never see it.
func TestTakeoverBehindFasterClient(t *testing.T) {
	srvs, ds := twoShards(t)
	first, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Serve: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	first.Store.Subscribe("slow")
	first.Store.Subscribe("fast")
	write(t, srvs, 1, 1, 1)
	slow, fast := newReader(first.Store, "slow"), newReader(first.Store, "fast")
	before := slow.until(t, 2, time.Minute)
	fast.until(t, 2, time.Minute)
	time.Sleep(time.Second) // heartbeats: both watermarks are about now - 1s
	at := time.Now().Add(-time.Hour).Unix()
	srvs[1].Exec(t, fmt.Sprintf("SET timestamp = %d", at), "INSERT INTO shop_1.orders VALUES (10, 'y')")
	out := fast.until(t, 3, time.Minute)
	saved := map[string]*group.Cursor{}
	for _, c := range first.Store.Clients() {
		saved[c.ID] = c.Mark
	}
	first.Close()
	if saved["slow"] == nil || saved["fast"] == nil || saved["slow"].Seq != before[1].seq || saved["fast"].Seq != out[2].seq {
		t.Fatalf("cursors slow %v, fast %v: want seqs %d and %d", saved["slow"], saved["fast"], before[1].seq, out[2].seq)
	}
	srvs[0].Exec(t, fmt.Sprintf("SET timestamp = %d", at), "INSERT INTO shop_0.orders VALUES (20, 'x')")

	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Serve: true, Clients: saved,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s1, s0 := out[2].seq, out[2].seq+1
	if got := newReader(p.Store, "fast").until(t, 1, time.Minute); got[0].seq != s0 || !slices.Equal(got[0].rows, []string{"s0:20"}) {
		t.Errorf("the fast client's next transaction: %+v; want s0's at seq %d", got[0], s0)
	}
	got := newReader(p.Store, "slow").until(t, 2, time.Minute)
	if got[0].seq != s1 || !slices.Equal(got[0].rows, []string{"s1:10"}) || got[1].seq != s0 || !slices.Equal(got[1].rows, []string{"s0:20"}) {
		t.Errorf("the slow client got %+v; want s1's at seq %d (as the fast one saw it), then s0's", got, s1)
	}
	if n := p.Dest.Late(); n != 1 {
		t.Errorf("late: %d, want 1 (s0's, below s1's)", n)
	}
}
