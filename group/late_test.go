package group_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/group"
)

// TestRestartAfterLateTransaction: a transaction whose commit time is
// below a watermark its source's heartbeats already promised (a source
// clock behind, a heartbeat read behind a full queue, a slow commit: here
// SET timestamp) goes out late, after another source's larger key, and is
// kept in the placement log first. A restart from a cursor before both, with
// that log, gives each the seq it had; without it the replay sorts them
// by key and the seqs name other transactions.
func TestRestartAfterLateTransaction(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	srvs := shards(t, base)
	spec := shopSpec(srvs, earliest, "strict")
	keep := &group.MemKeeper{}
	first := collect(t, group.Config{Spec: spec, Keep: keep})
	first.waitTxs(t, 6, 30*time.Second) // the six CREATE TABLEs
	time.Sleep(time.Second)             // heartbeats: every watermark is about now - 1s
	at := base.Add(10 * time.Second).Unix()
	// s1's, key (at, 1): out at once, the others' watermarks being far above.
	srvs[1].Exec(t, fmt.Sprintf("SET timestamp = %d", at), "INSERT INTO shop_1.orders VALUES (1, 'y')")
	first.waitTxs(t, 7, 10*time.Second)
	// s0's, key (at, 0) < (at, 1): late.
	srvs[0].Exec(t, fmt.Sprintf("SET timestamp = %d", at), "INSERT INTO shop_0.orders VALUES (2, 'x')")
	all := first.waitTxs(t, 8, 10*time.Second)
	if n := first.dest.Late(); n != 1 {
		t.Fatalf("late: %d, want 1", n)
	}
	first.mu.Lock()
	cursor := first.cursors[6]
	first.mu.Unlock()
	first.stop(t)
	log, _ := keep.Placements()
	if len(log) != 1 || !log[0].Late || log[0].Source != 0 || log[0].Taken != cursor.Taken+1 || log[0].At != all[7].pos {
		t.Fatalf("the placement log holds %+v; want the late transaction of s0 at %s, point %d", log, all[7].pos, cursor.Taken+1)
	}

	second := collect(t, group.Config{Spec: spec, Resume: cursor, Keep: keep})
	for i, x := range second.waitTxs(t, 2, 30*time.Second) {
		if w := all[6+i]; x.seq != w.seq || x.source != w.source || !slices.Equal(x.ids, w.ids) || x.pos != w.pos {
			t.Errorf("after restart, seq %d is %s %v at %s; the first run gave seq %d to %s %v at %s",
				x.seq, x.source, x.ids, x.pos, w.seq, w.source, w.ids, w.pos)
		}
	}
	// More transactions after it go on in order.
	srvs[0].Exec(t, "INSERT INTO shop_0.orders VALUES (3, 'z')")
	if got := second.waitTxs(t, 3, 30*time.Second); got[2].seq != all[7].seq+1 || !slices.Equal(got[2].ids, []int64{3}) {
		t.Errorf("after the late transaction: %+v", got[2])
	}
}

// TestStaleHeartbeats: while the consumer stalls, the sources' heartbeats
// pile up in the queues, the read-ahead and the socket, and are read
// seconds after they were sent. One with binlog right behind it must
// promise nothing (the reader marks it Stale): the transactions written
// after it (x on s0, y on s1) come in above their source's watermark, not
// below it (Undercut: one race from going out late), and go out in order.
func TestStaleHeartbeats(t *testing.T) {
	srvs := shards(t, time.Now().Add(-time.Hour))
	spec := shopSpec(srvs, earliest, "strict")
	// Small queues, so that the heartbeats of a few seconds fill them.
	d, err := group.New(group.Config{Spec: spec, QueueEvents: 4, ReadAhead: 8, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string // the sources of the transactions after the six CREATE TABLEs
	done := make(chan error, 1)
	go func() {
		done <- d.Run(ctx, func(ev *change.Event) error {
			if ev.Type != change.EventBegin || ev.Seq <= 6 {
				return nil
			}
			if ev.Seq == 7 {
				<-release // the consumer stalls at the first
			}
			mu.Lock()
			order = append(order, ev.Source)
			mu.Unlock()
			return nil
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("destination stopped with %v", err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for d.Stats().Seq < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("the six CREATE TABLEs did not go out in 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	srvs[1].Exec(t, "INSERT INTO shop_1.orders VALUES (1, 'stall')") // seq 7: the consumer stalls
	time.Sleep(2 * time.Second)
	srvs[0].Exec(t, "INSERT INTO shop_0.orders VALUES (2, 'x')")
	time.Sleep(2 * time.Second)
	srvs[1].Exec(t, "INSERT INTO shop_1.orders VALUES (3, 'y')")
	time.Sleep(2 * time.Second)
	close(release)
	for {
		mu.Lock()
		got := slices.Clone(order)
		mu.Unlock()
		// Stats are published by the merge loop, which the heartbeats
		// keep turning.
		if st := d.Stats(); len(got) == 3 && st.Seq >= 9 {
			if !slices.Equal(got, []string{"s1", "s0", "s1"}) || st.Late != 0 || st.Undercut != 0 {
				t.Errorf("transactions went out from %v, %d late, %d below their source's watermark; want s1 (the stall), s0 (x), s1 (y), none late or below",
					got, st.Late, st.Undercut)
			}
			return
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("after the stall, transactions from %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
