package raftstore

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
)

// TestCursorKeepsGTIDsAndServer: a cursor's per-source GTID state and
// server identity come back as saved, on every node, after a snapshot
// and a restart, beside a source that has none. A new owner needs them
// to resume a source that failed over behind its address by GTID; the
// old store kept only file:pos, and the new owner asked the promoted
// server for the old primary's coordinates.
func TestCursorKeepsGTIDsAndServer(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.TrailingLogs = 1 })
	ctx := testCtx(t)
	lead := c.leader()
	if _, err := lead.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	cur := &group.Cursor{Seq: 7, Sources: []group.SourceCursor{
		{Name: "a", Pos: change.Position{File: "bin.000001", Pos: 4534}, Mark: group.Mark{GTIDs: change.GTIDText("0-101-42,1-102-7"),
			Server: &change.Server{ID: 101, Host: "db1:3306", Binlog: "/var/lib/mysql/binlog"}}},
		{Name: "b", Pos: change.Position{File: "bin.000002", Pos: 9}},
		{Name: "c", Pos: change.Position{File: "bin.000003", Pos: 12}, Mark: group.Mark{GTIDs: change.GTIDText("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"),
			Server: &change.Server{ID: 7, UUID: "3e11fa47-71ca-11e1-9e33-c80aa9429562"}}},
	}}
	e, err := lead.Assign(ctx, "shop", lead.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lead.SaveCursors(ctx, "shop", e, []CursorUpdate{{Client: "c1", Cursor: cur}}); err != nil {
		t.Fatal(err)
	}
	c.converged()
	f := c.follower()
	if err := f.Snapshot(); err != nil {
		t.Fatal(err)
	}
	i := c.index(f)
	c.kill(i)
	back := c.restart(i)
	c.converged()
	for _, s := range append(c.live(), back) {
		cursors, err := s.Cursors("shop")
		if err != nil || !reflect.DeepEqual(cursors["c1"].Sources, cur.Sources) {
			t.Fatalf("%s: cursor %+v %v, want %+v", s.ID(), cursors["c1"], err, cur)
		}
	}
}

// TestSnapshotFreshMarkDecodes: a cursor's snapshot progress keeps the
// Mark of the point its chunks read again are fresh at (the GTID state
// there and the server), and progress saved before braid kept it (no
// freshMark) still decodes, with the zero Mark, which compares by
// position as braid did then.
func TestSnapshotFreshMarkDecodes(t *testing.T) {
	old := &cursorRecord{Seq: 3, Sources: []sourceRecord{{Name: "a", File: "bin.000004", Pos: 90}},
		Snapshots: []json.RawMessage{json.RawMessage(`{"chunks":2,"tables":[{"name":"shop_0.orders","after":["40"],"rows":40,"chunks":2}],"freshAt":{"file":"bin.000004","pos":120}}`)}}
	c, err := toCursor("shop", "c1", old, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Sources[0].Snapshot
	if st == nil || st.Chunks != 2 || st.FreshAt != (change.Position{File: "bin.000004", Pos: 120}) || st.FreshMark != (change.Mark{}) {
		t.Fatalf("old progress decoded as %+v", st)
	}

	cur := &group.Cursor{Seq: 4, Sources: []group.SourceCursor{{Name: "a", Pos: change.Position{File: "bin.000001", Pos: 77},
		Mark: change.Mark{GTIDs: change.GTIDText("0-100-21"), Server: &change.Server{ID: 101, Host: "db2:3306"}},
		Snapshot: &change.SnapshotState{Chunks: 2, Tables: []change.SnapshotTable{{Name: "shop_0.orders", After: []string{"40"}, Rows: 40, Chunks: 2}},
			FreshAt: change.Position{File: "bin.000004", Pos: 120}, FreshMark: change.Mark{GTIDs: change.GTIDText("0-100-25"), Server: &change.Server{ID: 100, Host: "db1:3306"}}}}}}
	cmd, _, err := (&Store{}).cursorCommand("shop", 1, []CursorUpdate{{Client: "c1", Cursor: cur}})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := decodeCommand(cmd.encode())
	if err != nil {
		t.Fatal(err)
	}
	back, err := toCursor("shop", "c1", &stored.Cursors[0].Cursor, nil)
	if err != nil || !reflect.DeepEqual(back.Sources, cur.Sources) {
		t.Fatalf("progress with its mark came back as %+v (%v), want %+v", back.Sources[0].Snapshot, err, cur.Sources[0].Snapshot)
	}
}
