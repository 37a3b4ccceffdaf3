// Package keeptest is the one test suite every group.Keeper passes:
// group.FileKeeper, group.MemKeeper and raftstore.FencedKeeper each run
// Run from their own package's tests.
package keeptest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/group"
)

// Open opens the keeper under test on what was kept before: the first
// call on an empty store, each later one after the keeper before it was
// closed, as a restarted process opens its store again.
type Open func() group.Keeper

// Run runs the suite; newStore returns the Open of a new, empty store of
// one destination, cleaned up with t.
func Run(t *testing.T, newStore func(t *testing.T) Open) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open Open)
	}{
		{"CursorsRoundTrip", cursorsRoundTrip},
		{"DecisionsInOrder", decisionsInOrder},
		{"PlacementsInOrder", placementsInOrder},
		{"ReopenKeepsAll", reopenKeepsAll},
		{"Concurrent", concurrent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

// opened opens a keeper and closes it when t ends.
func opened(t *testing.T, open Open) group.Keeper {
	t.Helper()
	k := open()
	t.Cleanup(func() { k.Close() })
	return k
}

// same fails t unless got and want have one JSON form (how every keeper
// but memory stores them).
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// cursorsOf, decisionsOf and placementsOf read k, failing t on an error.
func cursorsOf(t *testing.T, k group.Keeper) map[string]*group.Cursor {
	t.Helper()
	return must(t, k.Cursors)
}

func decisionsOf(t *testing.T, k group.Keeper) []group.DDLDecision {
	t.Helper()
	return must(t, k.Decisions)
}

func placementsOf(t *testing.T, k group.Keeper) []group.Placement {
	t.Helper()
	return must(t, k.Placements)
}

func must[T any](t *testing.T, read func() (T, error)) T {
	t.Helper()
	v, err := read()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// history is a schema history of db.t with one ALTER.
func history(t *testing.T) *change.SchemaSnapshot {
	t.Helper()
	tr := schema.NewTracker()
	if err := tr.LoadCreate(change.Position{File: "binlog.000001", Pos: 100}, "db", "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))"); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.ApplyDDL(change.Position{File: "binlog.000001", Pos: 300}, "db", "ALTER TABLE t ADD COLUMN b INT", 0); err != nil {
		t.Fatal(err)
	}
	snap := tr.Snapshot()
	return &snap
}

// cursor is a cursor at seq with every part a cursor can carry.
func cursor(seq uint64, hist *change.SchemaSnapshot) *group.Cursor {
	return &group.Cursor{Seq: seq, Taken: seq + 3, Sources: []group.SourceCursor{
		{Name: "a", Pos: change.Position{File: "binlog.000003", Pos: uint32(1000 + seq)}, LastKey: int64(1_700_000_000_000_000 + seq), Schema: hist},
		{Name: "b", Pos: change.Position{File: "binlog.000007", Pos: uint32(4 + seq)}, LastKey: -5,
			Snapshot: &change.SnapshotState{Chunks: 2, Tables: []change.SnapshotTable{{Name: "shop_1.orders", After: []string{"99"}, Rows: 5, Chunks: 2}}}},
	}, ShardDDL: &group.ShardDDLState{Shards: map[string][]string{"shop.orders": {"a:shop_0.orders", "b:shop_1.orders"}}, LastLock: 2}}
}

// placement is the i-th of a log: chunks, every third a late
// transaction, the fourth a loss an operator accepted, the sixth where
// its LOST marker went out.
func placement(i int) group.Placement {
	loss := &change.Loss{Lost: "domain 1 seq 5 to 1-1-5 (the server is at 1-1-4)", From: "0-1-9,1-1-5", Server: "server_id 2 at db2:3306"}
	switch i {
	case 3:
		return group.Placement{Source: 1, Lost: loss}
	case 5:
		return group.Placement{Source: 1, Lost: loss, MarkerSeq: 13, Cursor: cursor(12, nil), Taken: 15, At: change.Position{File: "binlog.000007", Pos: 16},
			AtMark: group.Mark{GTIDs: change.GTIDText("0-1-9,1-1-5")}, Time: 3000}
	}
	if i%3 == 2 {
		return group.Placement{Source: 1, At: change.Position{File: "binlog.000002", Pos: uint32(500 + i)}, Taken: uint64(10 + i), Time: int64(2000 + i), Late: true, GTID: fmt.Sprintf("0-1-%d", 40+i)}
	}
	return group.Placement{Source: i % 2, Index: i / 2, Table: "shop_0.orders", After: []string{fmt.Sprint(10 * i)}, Through: []string{fmt.Sprint(10*i + 9)},
		At: change.Position{File: "binlog.000001", Pos: uint32(100 + i)}, Taken: uint64(10 + i), Time: int64(1000 + i)}
}

// decision is the i-th of a log.
func decision(i int) group.DDLDecision {
	action := group.DecisionUnlock
	if i%2 == 1 {
		action = group.DecisionSkip
	}
	return group.DDLDecision{Lock: i + 1, Action: action, AfterSeq: uint64(40 + i), Taken: uint64(50 + i)}
}

// cursorsRoundTrip: a new store keeps no cursor; what is saved comes back
// whole, a later save replaces it, a forgotten one is gone, the others
// stay.
func cursorsRoundTrip(t *testing.T, open Open) {
	k := opened(t, open)
	if got := cursorsOf(t, k); len(got) != 0 {
		t.Fatalf("a new store holds cursors: %v", got)
	}
	hist := history(t)
	want := map[string]*group.Cursor{"capture": cursor(7, hist), "sink:warehouse": cursor(5, nil), "app": cursor(9, hist)}
	for id, c := range want {
		if err := k.SaveCursor(id, c); err != nil {
			t.Fatal(err)
		}
	}
	// What was saved is the keeper's: the caller may reuse its own.
	reused := cursor(7, hist)
	if err := k.SaveCursor("reused", reused); err != nil {
		t.Fatal(err)
	}
	reused.Seq, reused.Sources[0].LastKey = 1, 1
	want["reused"] = cursor(7, hist)
	same(t, "cursors saved", cursorsOf(t, k), want)
	if err := k.ForgetCursor("reused"); err != nil {
		t.Fatal(err)
	}
	delete(want, "reused")
	want["capture"] = cursor(12, nil)
	want["capture"].Detached = true
	if err := k.SaveCursor("capture", want["capture"]); err != nil {
		t.Fatal(err)
	}
	if err := k.ForgetCursor("app"); err != nil {
		t.Fatal(err)
	}
	delete(want, "app")
	same(t, "cursors after a save and a forget", cursorsOf(t, k), want)
	// A cursor read is the caller's: changing it changes nothing kept.
	got := cursorsOf(t, k)
	got["capture"].Seq = 1
	same(t, "cursors after the caller changed its copy", cursorsOf(t, k), want)
}

// decisionsInOrder: decisions come back in the order kept.
func decisionsInOrder(t *testing.T, open Open) {
	k := opened(t, open)
	if got := decisionsOf(t, k); len(got) != 0 {
		t.Fatalf("a new store holds decisions: %v", got)
	}
	var want []group.DDLDecision
	for i := range 5 {
		d := decision(i)
		if err := k.KeepDecision(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		want = append(want, d)
		same(t, fmt.Sprintf("decisions after %d", i+1), decisionsOf(t, k), want)
	}
}

// placementsInOrder: placements come back in the order kept, chunks and
// late transactions alike.
func placementsInOrder(t *testing.T, open Open) {
	k := opened(t, open)
	if got := placementsOf(t, k); len(got) != 0 {
		t.Fatalf("a new store holds placements: %v", got)
	}
	var want []group.Placement
	for i := range 7 {
		p := placement(i)
		if err := k.KeepPlacement(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		want = append(want, placement(i))
		// What was kept is the keeper's: the caller may reuse its own.
		if len(p.After) > 0 {
			p.After[0] = "reused"
		}
	}
	same(t, "placements", placementsOf(t, k), want)
	// A placement read is the caller's.
	got := placementsOf(t, k)
	got[0].After[0] = "changed"
	same(t, "placements after the caller changed its copy", placementsOf(t, k), want)
}

// reopenKeepsAll: what one keeper kept, the next one opened on the store
// finds, and goes on from.
func reopenKeepsAll(t *testing.T, open Open) {
	k := open()
	hist := history(t)
	cursors := map[string]*group.Cursor{"capture": cursor(3, hist), "sink:cache": cursor(2, hist)}
	for id, c := range cursors {
		if err := k.SaveCursor(id, c); err != nil {
			t.Fatal(err)
		}
	}
	decisions := []group.DDLDecision{decision(0), decision(1)}
	placements := []group.Placement{placement(0), placement(1), placement(2)}
	for _, d := range decisions {
		if err := k.KeepDecision(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range placements {
		if err := k.KeepPlacement(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	again := open()
	same(t, "cursors after reopening", cursorsOf(t, again), cursors)
	same(t, "decisions after reopening", decisionsOf(t, again), decisions)
	same(t, "placements after reopening", placementsOf(t, again), placements)
	// It goes on where the first left off.
	cursors["capture"] = cursor(8, nil)
	if err := again.SaveCursor("capture", cursors["capture"]); err != nil {
		t.Fatal(err)
	}
	decisions = append(decisions, decision(2))
	if err := again.KeepDecision(t.Context(), decision(2)); err != nil {
		t.Fatal(err)
	}
	placements = append(placements, placement(3))
	if err := again.KeepPlacement(t.Context(), placement(3)); err != nil {
		t.Fatal(err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}

	third := opened(t, open)
	same(t, "cursors after reopening twice", cursorsOf(t, third), cursors)
	same(t, "decisions after reopening twice", decisionsOf(t, third), decisions)
	same(t, "placements after reopening twice", placementsOf(t, third), placements)
}

// concurrent: clients saving cursors and writers keeping placements and
// decisions at once lose nothing, and each writer's own order holds.
func concurrent(t *testing.T, open Open) {
	k := opened(t, open)
	const writers, each = 6, 8
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			err := func() error {
				client := fmt.Sprintf("c%d", w)
				for i := range each {
					if err := k.SaveCursor(client, cursor(uint64(i+1), nil)); err != nil {
						return err
					}
					p := placement(0)
					p.Source, p.Index = w, i
					if err := k.KeepPlacement(ctx, p); err != nil {
						return err
					}
					if i == 0 {
						if err := k.KeepDecision(ctx, group.DDLDecision{Lock: w + 1, Action: group.DecisionSkip, AfterSeq: uint64(w)}); err != nil {
							return err
						}
					}
					if _, err := k.Cursors(); err != nil {
						return err
					}
				}
				return nil
			}()
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cursors := cursorsOf(t, k)
	for w := range writers {
		same(t, fmt.Sprintf("cursor of c%d", w), cursors[fmt.Sprintf("c%d", w)], cursor(each, nil))
	}
	next := make([]int, writers)
	for _, p := range placementsOf(t, k) {
		if p.Index != next[p.Source] {
			t.Fatalf("writer %d's placement %d came after its %d", p.Source, p.Index, next[p.Source]-1)
		}
		next[p.Source]++
	}
	for w, n := range next {
		if n != each {
			t.Errorf("writer %d: %d placements kept, want %d", w, n, each)
		}
	}
	locks := map[int]bool{}
	for _, d := range decisionsOf(t, k) {
		locks[d.Lock] = true
	}
	if len(locks) != writers {
		t.Errorf("decisions of %d writers kept, want %d", len(locks), writers)
	}
}
