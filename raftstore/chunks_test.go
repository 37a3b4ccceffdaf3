package raftstore

import (
	"errors"
	"reflect"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
)

// TestChunksFencedAndKept: snapshot chunks are appended by the owner
// only, read in order on every node, survive a snapshot and restart;
// a cursor's snapshot progress comes back as it was saved.
func TestChunksFencedAndKept(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.TrailingLogs = 1 })
	ctx := testCtx(t)
	lead := c.leader()
	if _, err := lead.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	chunk := func(src, i int, through ...string) group.Placement {
		return group.Placement{Source: src, Index: i, Table: "shop_0.orders", After: []string{"10"}, Through: through,
			At: change.Position{File: "bin.000001", Pos: uint32(100 + i)}, Time: int64(1000 + i)}
	}
	if err := lead.SavePlacement(ctx, "shop", 0, chunk(0, 0)); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("chunk of an unowned destination: %v", err)
	}
	owner := c.follower()
	e1, err := lead.Assign(ctx, "shop", owner.ID())
	if err != nil {
		t.Fatal(err)
	}
	want := []group.Placement{chunk(0, 0, "20"), chunk(1, 0), chunk(0, 1, "-5")}
	for _, ch := range want {
		if err := owner.SavePlacement(ctx, "shop", e1, ch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lead.Assign(ctx, "shop", lead.ID()); err != nil {
		t.Fatal(err)
	}
	if err := owner.SavePlacement(ctx, "shop", e1, chunk(1, 1)); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("chunk of a deposed owner: %v", err)
	}
	cur := &group.Cursor{Seq: 7, Sources: []group.SourceCursor{{Name: "a", Pos: change.Position{File: "bin.000001", Pos: 4}},
		{Name: "b", Pos: change.Position{File: "bin.000002", Pos: 9}, Snapshot: &change.SnapshotState{Chunks: 2,
			Tables: []change.SnapshotTable{{Name: "shop_1.orders", After: []string{"99"}, Rows: 5, Chunks: 2}}}}}}
	e2, _ := lead.Assign(ctx, "shop", lead.ID())
	if _, err := lead.SaveCursors(ctx, "shop", e2, []CursorUpdate{{Client: "c1", Cursor: cur}}); err != nil {
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
		got, err := s.Placements("shop")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: chunks %+v %v, want %+v", s.ID(), got, err, want)
		}
		cursors, err := s.Cursors("shop")
		if err != nil || !reflect.DeepEqual(cursors["c1"].Sources, cur.Sources) {
			t.Fatalf("%s: cursor %+v %v, want %+v", s.ID(), cursors["c1"], err, cur)
		}
	}
}
