package stream_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

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
