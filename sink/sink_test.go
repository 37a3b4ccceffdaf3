package sink_test

import (
	"testing"

	"github.com/braid-cdc/braid/sink"
)

// TestCausality: a change goes to its primary key's worker; one whose
// key (a unique value, an old primary key, its own primary key moved
// there by an UPDATE) is held on another worker waits for that worker's
// ticket; Prune forgets what is applied.
func TestCausality(t *testing.T) {
	c := sink.NewCausality(8)
	// Two primary keys on different workers.
	a, b := "t\x001", ""
	for i := 2; ; i++ {
		b = "t\x00" + string(rune('0'+i))
		if c.Worker(b) != c.Worker(a) {
			break
		}
	}
	wa, wb := c.Worker(a), c.Worker(b)
	if waits := c.Waits(wa, a, []string{"t#0\x00x"}); len(waits) != 0 {
		t.Fatalf("first change waits for %v", waits)
	}
	c.Hold(wa, 1, a, []string{"t#0\x00x"})
	if waits := c.Waits(wa, a, []string{"t#0\x00y"}); len(waits) != 0 {
		t.Fatalf("the same key on its own worker waits for %v", waits)
	}
	c.Hold(wa, 2, a, []string{"t#0\x00y"})
	// b takes a's old unique value x: it waits for a's worker's first change.
	if waits := c.Waits(wb, b, []string{"t#0\x00x"}); len(waits) != 1 || waits[0] != (sink.Ticket{Worker: wa, N: 1}) {
		t.Fatalf("a unique value held on another worker: waits %v", waits)
	}
	c.Hold(wb, 1, b, []string{"t#0\x00x"})
	// An UPDATE moves b's key to a: it goes to a's worker and waits for
	// b's (the old key); then a later change of key b (on b's worker)
	// waits for the move.
	if waits := c.Waits(wa, a, []string{b}); len(waits) != 1 || waits[0].Worker != wb {
		t.Fatalf("the old key held on another worker: waits %v", waits)
	}
	c.Hold(wa, 3, a, []string{b})
	if waits := c.Waits(wb, b, nil); len(waits) != 1 || waits[0] != (sink.Ticket{Worker: wa, N: 3}) {
		t.Fatalf("a change of a key moved away: waits %v", waits)
	}
	applied := make([]uint64, 8)
	applied[wa], applied[wb] = 3, 1
	c.Prune(applied)
	if c.Len() != 0 {
		t.Fatalf("%d keys held after everything was applied", c.Len())
	}
}
