package sink_test

import (
	"testing"

	"github.com/braid-cdc/braid/sink"
)

// TestCausality: a change goes to its primary key's worker; one whose
// key (a unique value, an old primary key, its own primary key moved
// there by an UPDATE) is held on another worker waits for that worker's
// ticket; a key-changing UPDATE waits for its old key's worker; primary
// keys alone are not held; Prune forgets what is applied.
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
	change := func(pk string, others ...string) *sink.Change {
		return &sink.Change{PK: pk, Others: others}
	}
	if waits := c.Waits(wa, change(a, "t#0\x00x")); len(waits) != 0 {
		t.Fatalf("first change waits for %v", waits)
	}
	c.Hold(wa, 1, change(a, "t#0\x00x"))
	if waits := c.Waits(wa, change(a, "t#0\x00y")); len(waits) != 0 {
		t.Fatalf("the same key on its own worker waits for %v", waits)
	}
	c.Hold(wa, 2, change(a, "t#0\x00y"))
	// b takes a's old unique value x: it waits for a's worker's first change.
	if waits := c.Waits(wb, change(b, "t#0\x00x")); len(waits) != 1 || waits[0] != (sink.Ticket{Worker: wa, N: 1}) {
		t.Fatalf("a unique value held on another worker: waits %v", waits)
	}
	c.Hold(wb, 1, change(b, "t#0\x00x"))
	// Changes of a primary key alone hold nothing: its worker orders them.
	held := c.Len()
	c.Hold(wb, 2, change(b))
	if c.Len() != held {
		t.Fatalf("a primary key alone was held: %d keys, %d before", c.Len(), held)
	}
	// An UPDATE moves b's key to a: it goes to a's worker and waits for
	// everything handed to b's worker (b's earlier changes); then a later
	// change of key b (on b's worker) waits for the move.
	move := &sink.Change{PK: a, Others: []string{b}, Moved: true, OldRoute: uint32(wb)}
	if waits := c.Waits(wa, move); len(waits) != 1 || waits[0] != (sink.Ticket{Worker: wb, N: 2}) {
		t.Fatalf("the old key's worker: waits %v", waits)
	}
	c.Hold(wa, 3, move)
	if waits := c.Waits(wb, change(b)); len(waits) != 1 || waits[0] != (sink.Ticket{Worker: wa, N: 3}) {
		t.Fatalf("a change of a key moved away: waits %v", waits)
	}
	applied := make([]uint64, 8)
	applied[wa], applied[wb] = 3, 2
	c.Prune(applied)
	if c.Len() != 0 {
		t.Fatalf("%d keys held after everything was applied", c.Len())
	}
}
