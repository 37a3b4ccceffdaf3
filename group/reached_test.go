package group

import (
	"testing"

	"github.com/braid-cdc/braid/engine/change"
)

// TestReachedAcrossMarkers: around a marker of lost transactions a
// source's cursor holds a GTID state and no position, and the marker
// itself the former server's position; the furthest-cursor checks
// (pastReached, atReached) compare GTID states there. Compared by
// position (zero, or another server's), every later transaction of the
// source looked past the point, which held the source and let the
// others take its seqs, and a run right after a marker never saw
// itself at the point.
func TestReachedAcrossMarkers(t *testing.T) {
	newServer := &change.Server{ID: 2}
	afterMarker := SourceCursor{Mark: Mark{GTIDs: change.GTIDText("0-1-48")}} // lost 0-1-49, 0-1-50
	d := &Destination{reached: &Cursor{Taken: 10, Sources: []SourceCursor{afterMarker}}, reachedHeld: make([]bool, 1)}
	d.cursor.Sources = make([]SourceCursor, 1)

	marker := &change.Event{Type: change.EventBegin, Lost: "0-1-49,0-1-50", Pos: change.Position{File: "binlog.000007", Pos: 900}, GTIDs: change.GTIDText("0-1-48")}
	if d.pastReached(0, marker) {
		t.Error("the marker the point is right after counts as past it")
	}
	next := &change.Event{Type: change.EventBegin, GTID: "0-2-49", Server: newServer, Pos: change.Position{File: "binlog.000001", Pos: 300}}
	if !d.pastReached(0, next) {
		t.Error("the promoted server's first transaction, after the point, does not count as past it")
	}
	old := &change.Event{Type: change.EventBegin, GTID: "0-1-47", Server: &change.Server{ID: 1}, Pos: change.Position{File: "binlog.000007", Pos: 500}}
	if d.pastReached(0, old) {
		t.Error("a transaction before the marker counts as past the point")
	}

	d.cursor.Sources[0] = SourceCursor{Mark: Mark{GTIDs: change.GTIDText("0-1-47")}}
	if d.atReached(0) {
		t.Error("a cursor short of the point's GTID state is at it")
	}
	d.cursor.Sources[0] = afterMarker
	if !d.atReached(0) {
		t.Error("the run's cursor right after the same marker is not at the point")
	}
	d.cursor.Sources[0] = SourceCursor{Pos: change.Position{File: "binlog.000001", Pos: 700}, Mark: Mark{GTIDs: change.GTIDText("0-2-52"), Server: newServer}}
	if !d.atReached(0) {
		t.Error("a cursor past the point on the promoted server is not at it")
	}
}
