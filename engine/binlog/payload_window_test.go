package binlog

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// TestParserStartsSlow: a connection's parser is let startAhead events
// ahead of the reader at first, not the whole read-ahead; each event
// the reader takes lets it two further until the window is the full
// read-ahead, then one, and from there the queue's room alone bounds it
// (no credit an event).
func TestParserStartsSlow(t *testing.T) {
	const ahead = 64
	p := &Reader{}
	ep := p.newEventParser(ahead, nil)
	var handed atomic.Int64
	go func() {
		for {
			// Too short to parse: queued as a parse error, which is
			// all this test needs of an event.
			if err := ep.HandleEvent(&replication.BinlogEvent{RawData: []byte{1}}); err == errParserStopped {
				return
			}
			handed.Add(1)
		}
	}()
	defer ep.stop()
	// waitHanded waits until n events are queued and the parser has no
	// room left: its next HandleEvent waits for the reader.
	waitHanded := func(n int64) {
		t.Helper()
		if err := retry.Wait(t.Context(), 30*time.Second, func() error {
			if got := handed.Load(); got != n || !ep.opened.Load() && len(ep.credit) != 0 {
				return fmt.Errorf("handed %d (room %d), want %d and no room", got, len(ep.credit), n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitHanded(startAhead)
	q := &eventQueue{ep: ep, out: ep.out, errc: make(chan error, 1), stop: func() {}}
	took := int64(0)
	take := func(k int) {
		for range k {
			if _, err := q.next(context.Background()); err != nil {
				t.Fatal(err)
			}
			took++
		}
	}
	take(10) // window 16 → 26
	waitHanded(took + 26)
	if ep.opened.Load() {
		t.Fatal("open before the window is the full read-ahead")
	}
	take(ahead - 26) // window full
	waitHanded(took + ahead)
	if !ep.opened.Load() {
		t.Fatal("still taking credits with the window full")
	}
	take(5) // one for one from here
	waitHanded(took + ahead)
}
