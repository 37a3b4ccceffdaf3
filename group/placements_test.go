package group

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
)

// A late marker of lost transactions is found again by what it names,
// never by position: its position is the old server's boundary, which a
// transaction of the new server may share (its binlog files are named
// alike), and a late transaction is never taken for a marker.
func TestLateMarkerFoundByWhatItNames(t *testing.T) {
	at := change.Position{File: "binlog.000001", Pos: 1207}
	marker := Placement{At: at, GTID: lostGTID + "0-1-5", Late: true}
	late := Placement{At: at, GTID: "0-2-9", Late: true}
	for _, c := range []struct {
		name string
		k    Placement
		ev   *change.Event
		want bool
	}{
		{"the marker", marker, &change.Event{Pos: at, Lost: "0-1-5"}, true},
		{"another marker", marker, &change.Event{Pos: at, Lost: "0-1-6"}, false},
		{"a transaction at its position", marker, &change.Event{Pos: at, GTID: "0-2-9"}, false},
		{"a transaction without GTID at its position", marker, &change.Event{Pos: at}, false},
		{"a marker at a late one's position", late, &change.Event{Pos: at, Lost: "0-1-5"}, false},
		{"the late one", late, &change.Event{Pos: change.Position{File: "binlog.000009", Pos: 4}, GTID: "0-2-9"}, true},
	} {
		if got := c.k.isTx(c.ev); got != c.want {
			t.Errorf("%s: isTx = %v, want %v", c.name, got, c.want)
		}
	}
}

// A replay reader waiting for its live run's next snapshot chunk
// (awaitRecord) counts the source's chunks alone, as a run's start does
// (splitLate): a late transaction of the source, an accepted loss and
// where its marker went out, kept in the same log, are no chunks. The
// old code took them for chunks: the chunk expected next was a late
// transaction's placement, and the replay went on with no chunk kept.
func TestAwaitRecordCountsChunksOnly(t *testing.T) {
	keep := &MemKeeper{}
	loss := &change.Loss{Lost: "0-1-5", From: "0-1-5"}
	for _, p := range []Placement{
		{Source: 0, Index: 0, Table: "shop.orders", Taken: 1},
		{Source: 0, Late: true, GTID: "0-1-3", Taken: 2},
		{Source: 0, Lost: loss},
		{Source: 0, Lost: loss, MarkerSeq: 4, Cursor: &Cursor{Seq: 3}},
		{Source: 1, Index: 0, Table: "shop.orders", Taken: 5},
	} {
		if err := keep.KeepPlacement(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	g := &sourceSnapshot{d: &Destination{cfg: Config{Keep: keep, Clock: Real}}, src: 0, state: &change.SnapshotState{Chunks: 1}}
	waited := make(chan error, 1)
	go func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		waited <- g.awaitRecord(t.Context())
	}()
	select {
	case err := <-waited:
		rec, _ := g.nextRecorded()
		t.Fatalf("awaitRecord returned (%v) with one chunk kept and one read; the next one it took: %+v", err, rec)
	case <-time.After(300 * time.Millisecond): // waits, as it should
	}
	if err := keep.KeepPlacement(t.Context(), Placement{Source: 0, Index: 1, Table: "shop.orders", Taken: 6}); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if rec, ok := g.nextRecorded(); !ok || rec.Index != 1 || rec.Late || rec.Lost != nil {
		t.Fatalf("the next chunk: %+v %v; want chunk 1", rec, ok)
	}
}
