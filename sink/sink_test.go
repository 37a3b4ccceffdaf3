package sink_test

import (
	"testing"

	"github.com/braid-cdc/braid/sink"
)

// TestCausality: a change goes to its primary key's worker; one whose
// other key (a unique value, an old primary key) is pending on another
// worker needs a barrier first, and after Reset goes through.
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
	wa, barrier := c.Add(a, "t#0\x00x")
	if barrier || wa != c.Worker(a) {
		t.Fatalf("first change: worker %d barrier %v", wa, barrier)
	}
	if w, barrier := c.Add(a, "t#0\x00y"); barrier || w != wa {
		t.Fatalf("the same key again: worker %d barrier %v, want %d and none", w, barrier, wa)
	}
	// b takes a's old unique value x: it must wait for a's worker.
	if _, barrier := c.Add(b, "t#0\x00x"); !barrier {
		t.Fatal("a unique value pending on another worker needs no barrier")
	}
	c.Reset()
	if w, barrier := c.Add(b, "t#0\x00x"); barrier || w != c.Worker(b) {
		t.Fatalf("after the barrier: worker %d barrier %v", w, barrier)
	}
	// An UPDATE moving b's key to a: a's key is pending on its worker only
	// if a's worker is another one.
	if _, barrier := c.Add(a, b); !barrier {
		t.Fatal("the old key pending on another worker needs no barrier")
	}
}
