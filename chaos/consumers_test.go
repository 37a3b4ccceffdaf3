package chaos

import (
	"testing"
	"time"
)

func clock() time.Duration { return time.Second }

// TestRecorderKeepsWholeTransactionOverReconnect: a stop between a
// transaction's last message and the next transaction's first keeps the
// transaction (the client acked it: nothing sends it again), and a
// transaction received in part and then again whole is the whole one,
// with no conflict. The old recorder forgot the first (seed 915100).
func TestRecorderKeepsWholeTransactionOverReconnect(t *testing.T) {
	r := newRecorder("native", clock)
	r.add(913, false, "", []string{"I 1 1"}, "")
	r.add(914, false, "", []string{"U 1 2"}, "")
	r.add(914, false, "", []string{"I 2 3"}, "")
	r.reconnected() // 914 was whole, and acked
	r.add(915, false, "", []string{"D 2 3"}, "")
	r.complete(915)
	c := r.consumed()
	if got := c.Txns[914]; got == nil || got.Fingerprint() != "U 1 2, I 2 3" {
		t.Fatalf("seq 914 after a stop at its end: %+v", got)
	}

	r = newRecorder("native", clock)
	r.add(914, false, "", []string{"U 1 2"}, "")
	r.reconnected() // 914 in part: sent again whole
	r.add(914, false, "", []string{"U 1 2"}, "")
	r.add(914, false, "", []string{"I 2 3"}, "")
	r.add(915, false, "", []string{"D 2 3"}, "")
	c = r.consumed()
	if got := c.Txns[914]; got == nil || got.Fingerprint() != "U 1 2, I 2 3" || len(c.Conflicts) != 0 {
		t.Fatalf("seq 914 in part, then whole: %+v, conflicts %v", got, c.Conflicts)
	}

	// A whole transaction received again as another is still a conflict.
	r.add(914, false, "", []string{"U 1 9"}, "")
	r.add(914, false, "", []string{"I 2 3"}, "")
	r.add(916, false, "", []string{"I 3 4"}, "")
	if c = r.consumed(); len(c.Conflicts) != 1 || c.Conflicts[0].Seq != 914 {
		t.Fatalf("seq 914 again as another: conflicts %v", c.Conflicts)
	}
}
