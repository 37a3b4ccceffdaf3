package main

import (
	"strings"
	"testing"

	"github.com/braid-cdc/braid/api/wire"
)

// TestSnapshotText: a source's snapshot progress reads as one line, with
// the rate and the time left only once they are known.
func TestSnapshotText(t *testing.T) {
	for _, c := range []struct {
		sn   *wire.SnapshotState
		want string
	}{
		{nil, "-"},
		{&wire.SnapshotState{Tables: 6, TablesDone: 3, Rows: 120000, EstimatedRows: 660000, RowsPerSecond: 45000.4, EtaSeconds: 12}, "3/6 tables, 120,000 rows, 45,000 rows/s, eta 12s"},
		{&wire.SnapshotState{Tables: 1, Rows: 1234567, RowsPerSecond: 999.6, EtaSeconds: 89.2}, "0/1 tables, 1,234,567 rows, 1,000 rows/s, eta 1m30s"},
		{&wire.SnapshotState{}, "0/0 tables, 0 rows"}, // its reader has not found the tables yet
		{&wire.SnapshotState{Tables: 2, TablesDone: 2, Rows: 500, Done: true}, "done"},
	} {
		if got := snapshotText(c.sn); got != c.want {
			t.Errorf("snapshotText(%+v) = %q, want %q", c.sn, got, c.want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", -1234567: "-1,234,567"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestShowDestinationSnapshot: braid destination show has a SNAPSHOT
// column when a source has a snapshot, and none for a spec without one.
func TestShowDestinationSnapshot(t *testing.T) {
	info := wire.DestinationInfo{Name: "shop", Owner: "n1", Epoch: 2, Seq: 9, Spec: []byte(`{"name":"shop"}`), Sources: []wire.SourceState{
		{Name: "a", Pos: "binlog.000001:4", Snapshot: &wire.SnapshotState{Tables: 6, TablesDone: 3, Rows: 120000, RowsPerSecond: 45000, EtaSeconds: 12}},
		{Name: "b", Pos: "binlog.000001:4", Snapshot: &wire.SnapshotState{Done: true}},
	}}
	var out strings.Builder
	showDestination(&out, info)
	lines := strings.Split(out.String(), "\n")
	row := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line starting %q in\n%s", prefix, out.String())
		return ""
	}
	if h := row("SOURCE"); !strings.HasSuffix(h, "SNAPSHOT") {
		t.Errorf("header %q has no SNAPSHOT column", h)
	}
	if a := row("a "); !strings.HasSuffix(a, "3/6 tables, 120,000 rows, 45,000 rows/s, eta 12s") {
		t.Errorf("source a: %q", a)
	}
	if b := row("b "); !strings.HasSuffix(b, "done") {
		t.Errorf("source b: %q", b)
	}

	for i := range info.Sources {
		info.Sources[i].Snapshot = nil
	}
	out.Reset()
	showDestination(&out, info)
	if strings.Contains(out.String(), "SNAPSHOT") {
		t.Errorf("a SNAPSHOT column without a snapshot:\n%s", out.String())
	}
}
