package main

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// lineWrites records each write to it and how many lines it held.
type lineWrites struct {
	mu    sync.Mutex
	lines []int
}

func (w *lineWrites) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, bytes.Count(b, []byte{'\n'}))
	return len(b), nil
}

// TestCaptureBacklogFirstLinesEarly: with a backlog in the store,
// capture writes its first lines once a few events are formatted, not
// after a whole batch of batchEvents (a catch-up's first batch held
// the first row back a fifth of a second), and then every line of the
// backlog, once, in batches that grow.
func TestCaptureBacklogFirstLinesEarly(t *testing.T) {
	store := stream.NewStore(stream.Config{})
	store.Subscribe(printerID)
	const n = 3 * batchEvents
	at := time.Unix(1_700_000_000, 0)
	for i := range n {
		ev := &change.Event{Type: change.EventDDL, Seq: uint64(i + 1), Source: "a", CommitTime: at,
			DDL: &change.DDL{Schema: "shop", SQL: "CREATE TABLE t (id INT)"}}
		if err := store.Put(t.Context(), ev, nil); err != nil {
			t.Fatal(err)
		}
	}
	w := &lineWrites{}
	if err := printStream(t.Context(), &stream.Pipeline{Store: store}, w, n, &group.MemKeeper{}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	for _, l := range w.lines {
		total += l
	}
	if total != n {
		t.Fatalf("%d lines written, want %d", total, n)
	}
	if len(w.lines) < 2 || w.lines[0] > firstBatch {
		t.Fatalf("first write held %d lines of %d (writes %v): want at most %d, the first batch's", w.lines[0], n, w.lines, firstBatch)
	}
}
