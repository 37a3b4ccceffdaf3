package group

import (
	"testing"

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
