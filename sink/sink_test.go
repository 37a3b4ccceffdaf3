package sink_test

import (
	"errors"
	"strings"
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

// TestSQLCheckpoints: what a SQL target's checkpoint rows say, beside the
// real targets' TestWorkersKept: the workers' points; a new sink (no
// rows) routes by range and records it with its count; an older braid's
// rows (points, no count) route by key and record that; a kept count and
// routing are read back; a count or a worker beyond n is refused, naming
// both counts; a failed record and a failed read are errors.
func TestSQLCheckpoints(t *testing.T) {
	rows := func(rs ...sink.CheckpointRow) func() (sink.CheckpointRow, bool, error) {
		return func() (sink.CheckpointRow, bool, error) {
			if len(rs) == 0 {
				return sink.CheckpointRow{}, false, nil
			}
			r := rs[0]
			rs = rs[1:]
			return r, true, nil
		}
	}
	var recorded []sink.Routing
	record := func(r sink.Routing) error { recorded = append(recorded, r); return nil }
	count := func(n int, r sink.Routing) sink.CheckpointRow {
		return sink.CheckpointRow{Worker: sink.WorkersRow, Seq: uint64(n), Idx: int(r)}
	}

	pts, routing, err := sink.SQLCheckpoints("s", 4, "here", rows(), record)
	if err != nil || len(pts) != 4 || routing != sink.RouteByWideRange || len(recorded) != 1 || recorded[0] != sink.RouteByWideRange {
		t.Errorf("a new sink: %v, %v, %v, recorded %v; want 4 zero points, by wide range, recorded", pts, routing, err, recorded)
	}
	// Its count row holds the routing above the count, so that a braid
	// that does not know it reads another count and stops; this one
	// reads it back.
	if seq := sink.WorkersRowSeq(4, sink.RouteByWideRange); seq == 4 || seq&(1<<32-1) != 4 {
		t.Errorf("the count row of 4 workers by wide range: seq %#x; want 4 in the low bits and more above", seq)
	}
	if sink.WorkersRowSeq(4, sink.RouteByRange) != 4 || sink.WorkersRowSeq(4, sink.RouteByKey) != 4 {
		t.Errorf("the count row of the older routings changed: %d, %d", sink.WorkersRowSeq(4, sink.RouteByRange), sink.WorkersRowSeq(4, sink.RouteByKey))
	}
	wide := sink.CheckpointRow{Worker: sink.WorkersRow, Seq: sink.WorkersRowSeq(4, sink.RouteByWideRange), Idx: int(sink.RouteByWideRange)}
	recorded = nil
	pts, routing, err = sink.SQLCheckpoints("s", 4, "here", rows(wide, sink.CheckpointRow{Worker: 3, Seq: 5}), record)
	if err != nil || pts[3].Seq != 5 || routing != sink.RouteByWideRange || len(recorded) != 0 {
		t.Errorf("kept rows by wide range: %v, %v, %v, recorded %v; want worker 3 at 5, by wide range, nothing recorded", pts, routing, err, recorded)
	}
	// A routing a newer braid wrote is refused, not taken for another.
	newer := sink.CheckpointRow{Worker: sink.WorkersRow, Seq: 4 | 9<<32, Idx: 9}
	if _, _, err := sink.SQLCheckpoints("s", 4, "here", rows(newer), record); err == nil || !strings.Contains(err.Error(), "newer braid") {
		t.Errorf("a count row of an unknown routing: %v; want an error naming a newer braid", err)
	}
	recorded = nil
	pts, routing, err = sink.SQLCheckpoints("s", 4, "here", rows(sink.CheckpointRow{Worker: 2, Seq: 7, Idx: 3}), record)
	if err != nil || pts[2] != (sink.Point{Seq: 7, Idx: 3}) || routing != sink.RouteByKey || len(recorded) != 1 || recorded[0] != sink.RouteByKey {
		t.Errorf("an older braid's rows: %v, %v, %v, recorded %v; want worker 2 at 7/3, by key, recorded", pts, routing, err, recorded)
	}
	recorded = nil
	pts, routing, err = sink.SQLCheckpoints("s", 4, "here", rows(count(4, sink.RouteByRange), sink.CheckpointRow{Worker: 1, Seq: 9}), record)
	if err != nil || pts[1].Seq != 9 || routing != sink.RouteByRange || len(recorded) != 0 {
		t.Errorf("kept rows: %v, %v, %v, recorded %v; want worker 1 at 9, by range, nothing recorded", pts, routing, err, recorded)
	}
	for name, rs := range map[string][]sink.CheckpointRow{
		"a kept count of 8": {count(8, sink.RouteByRange)},
		"a row of worker 7": {{Worker: 7, Seq: 1}},
	} {
		if _, _, err := sink.SQLCheckpoints("s", 4, "here", rows(rs...), record); err == nil || !strings.Contains(err.Error(), "the spec has 4") || !strings.Contains(err.Error(), "delete here") {
			t.Errorf("%s for 4 workers: %v; want the counts and what to delete", name, err)
		}
	}
	if _, _, err := sink.SQLCheckpoints("s", 4, "here", rows(), func(sink.Routing) error { return errors.New("read-only") }); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a failed record: %v", err)
	}
	failing := func() (sink.CheckpointRow, bool, error) {
		return sink.CheckpointRow{}, false, errors.New("connection lost")
	}
	if _, _, err := sink.SQLCheckpoints("s", 4, "here", failing, record); err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Errorf("a failed read: %v", err)
	}
}
