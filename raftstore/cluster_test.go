package raftstore

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// TestClusterReplicatesEveryCommand: every kind of write, made on the
// leader or on a follower, is applied on all three nodes, and each node's
// local reads then agree.
func TestClusterReplicatesEveryCommand(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := testCtx(t)
	lead, fol := c.leader(), c.follower()

	d, err := lead.CreateDestination(ctx, testSpec("shop"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fol.CreateDestination(ctx, testSpec("billing")); err != nil {
		t.Fatal(err)
	}
	if _, err := fol.CreateDestination(ctx, testSpec("doomed")); err != nil {
		t.Fatal(err)
	}
	upd := testSpec("shop")
	upd.Ordering = "per-source"
	d2, err := fol.UpdateDestination(ctx, upd)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Version <= d.Version {
		t.Fatalf("version %d after update, was %d", d2.Version, d.Version)
	}
	if err := lead.DeleteDestination(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	epoch, err := fol.Assign(ctx, "shop", fol.ID())
	if err != nil {
		t.Fatal(err)
	}
	schema := testSchema(t, 200)
	if _, err := fol.SaveCursors(ctx, "shop", epoch, []CursorUpdate{
		{Client: "c1", Cursor: testCursor(5, schema)},
		{Client: "c2", Cursor: testCursor(7, schema)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.Assign(ctx, "billing", lead.ID()); err != nil {
		t.Fatal(err)
	}

	c.converged()
	for _, s := range c.live() {
		ds := s.Destinations()
		if len(ds) != 2 || ds[0].Spec.Name != "billing" || ds[1].Spec.Name != "shop" {
			t.Fatalf("%s: destinations %v", s.ID(), ds)
		}
		if ds[1].Spec.Ordering != "per-source" || ds[1].Version != d2.Version || !reflect.DeepEqual(ds[1].Spec, d2.Spec) {
			t.Fatalf("%s: shop = %+v, want %+v", s.ID(), ds[1], d2)
		}
		if _, err := s.Destination("doomed"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: deleted destination: %v", s.ID(), err)
		}
		if a, _ := s.Assignment("shop"); a.Owner != fol.ID() || a.Epoch != epoch {
			t.Fatalf("%s: assignment %+v", s.ID(), a)
		}
		got, err := s.Cursor("shop", "c2")
		if err != nil {
			t.Fatal(err)
		}
		if want := testCursor(7, schema); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: cursor\n got %+v\nwant %+v", s.ID(), got, want)
		}
		if h, err := s.SchemaHistory("shop", "a"); err != nil || len(h) != 1 || !reflect.DeepEqual(&h[0], schema) {
			t.Fatalf("%s: schema history %v %v", s.ID(), h, err)
		}
	}
	st := fol.Stats()
	if st.ForwardedOut == 0 || st.Destinations != 2 || st.Cursors != 2 || st.SchemaHistories != 1 || len(st.Servers) != 3 {
		t.Fatalf("follower stats %+v", st)
	}
	// Errors travel back from the leader as the same sentinels.
	if _, err := fol.CreateDestination(ctx, testSpec("shop")); !errors.Is(err, ErrExists) {
		t.Fatalf("create twice via follower: %v", err)
	}
	if err := fol.DeleteDestination(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete missing via follower: %v", err)
	}
}

// TestFollowerWriteRefusedWithLeader: with forwarding off, a follower
// refuses writes and linearizable reads with the leader's id and address.
func TestFollowerWriteRefusedWithLeader(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.NoForward = true })
	ctx := testCtx(t)
	lead, fol := c.leader(), c.follower()
	_, err := fol.CreateDestination(ctx, testSpec("shop"))
	var nl *NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower write: %v", err)
	}
	if nl.LeaderID != lead.ID() || nl.LeaderAddr != lead.Addr() {
		t.Fatalf("follower names %s at %s, leader is %s at %s", nl.LeaderID, nl.LeaderAddr, lead.ID(), lead.Addr())
	}
	if err := fol.Consistent(ctx); !errors.As(err, &nl) {
		t.Fatalf("follower linearizable read: %v", err)
	}
	if err := fol.AddVoter(ctx, "n9", "127.0.0.1:1"); !errors.As(err, &nl) {
		t.Fatalf("follower AddVoter: %v", err)
	}
	// The leader takes the write.
	if _, err := lead.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	c.converged()
}

// TestLeaderFailover: the leader dies; a new one is elected within a few
// seconds, has every write that was acknowledged, takes new ones, and the
// old leader, restarted from its data directory, catches up.
func TestLeaderFailover(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := testCtx(t)
	old := c.leader()
	writer := c.follower() // writes through forwarding, so it survives the kill
	if _, err := writer.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	epoch, err := writer.Assign(ctx, "shop", writer.ID())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := 1; i <= n; i++ {
		if _, err := writer.SaveCursors(ctx, "shop", epoch, []CursorUpdate{{Client: fmt.Sprintf("c%d", i%5), Cursor: testCursor(uint64(i), nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	oldIdx := c.index(old)
	killed := time.Now()
	c.kill(oldIdx)
	lead := c.leader()
	took := time.Since(killed)
	t.Logf("new leader %s after %v", lead.ID(), took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Fatalf("new leader after %v", took)
	}
	// Linearizable reads on both survivors see every acknowledged write.
	for _, s := range c.live() {
		if err := s.Consistent(ctx); err != nil {
			t.Fatalf("%s: %v", s.ID(), err)
		}
		for i := n - 4; i <= n; i++ {
			got, err := s.Cursor("shop", fmt.Sprintf("c%d", i%5))
			if err != nil || got == nil || got.Seq != uint64(i) {
				t.Fatalf("%s: c%d = %+v %v, want seq %d", s.ID(), i%5, got, err, i)
			}
		}
	}
	// Writes go on with two of three.
	if _, err := writer.SaveCursors(ctx, "shop", epoch, []CursorUpdate{{Client: "late", Cursor: testCursor(99, testSchema(t, 300))}}); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.CreateDestination(ctx, testSpec("after")); err != nil {
		t.Fatal(err)
	}
	// The old leader comes back from its data directory and catches up.
	back := c.restart(oldIdx)
	if err := back.Bootstrap(nil); !errors.Is(err, raft.ErrCantBootstrap) {
		t.Fatalf("bootstrap of a node with state: %v", err)
	}
	c.converged()
	if got, _ := back.Cursor("shop", "late"); got == nil || got.Seq != 99 || got.Sources[0].Schema == nil {
		t.Fatalf("restarted node: cursor %+v", got)
	}
	if _, err := back.Destination("after"); err != nil {
		t.Fatalf("restarted node: %v", err)
	}
}

// TestFencing: after a reassignment the deposed owner's cursor writes are
// rejected with ErrStaleEpoch, its FencedCursors stops, and the new owner
// (a follower) reads the last cursor the old one committed.
func TestFencing(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := testCtx(t)
	lead := c.leader()
	var fols []*Store
	for _, s := range c.live() {
		if s != lead {
			fols = append(fols, s)
		}
	}
	oldOwner, newOwner := fols[0], fols[1]
	if _, err := lead.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	e1, err := lead.Assign(ctx, "shop", oldOwner.ID())
	if err != nil {
		t.Fatal(err)
	}
	// The old owner's cursor store: a long interval, flushed by hand.
	cs := oldOwner.CursorStore("shop", e1, time.Hour)
	defer cs.Close()
	var _ group.CursorStore = cs
	if got, err := cs.Load("shop", "c1"); err != nil || got != nil {
		t.Fatalf("first load: %+v %v", got, err)
	}
	schema := testSchema(t, 200)
	for seq := uint64(1); seq <= 10; seq++ {
		if err := cs.Save("shop", "c1", testCursor(seq, schema)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Save("shop", "c2", testCursor(3, nil)); err != nil {
		t.Fatal(err)
	}
	if got, _ := cs.Load("shop", "c1"); got == nil || got.Seq != 10 {
		t.Fatalf("pending load: %+v", got)
	}
	before := lead.Stats().LastIndex
	if err := cs.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if entries := lead.Stats().LastIndex - before; entries != 1 {
		t.Fatalf("11 saves of 2 clients took %d log entries, want 1", entries)
	}

	// The planner moves the destination, checking the epoch it read.
	if _, err := lead.AssignIf(ctx, "shop", newOwner.ID(), e1-1); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("AssignIf with an old epoch: %v", err)
	}
	e2, err := lead.AssignIf(ctx, "shop", newOwner.ID(), e1)
	if err != nil {
		t.Fatal(err)
	}
	if e2 <= e1 {
		t.Fatalf("epoch %d after %d", e2, e1)
	}
	// A write with the old epoch is rejected, whoever sends it.
	for _, s := range []*Store{oldOwner, lead} {
		_, err := s.SaveCursors(ctx, "shop", e1, []CursorUpdate{{Client: "c1", Cursor: testCursor(11, nil)}})
		if !errors.Is(err, ErrStaleEpoch) {
			t.Fatalf("%s: stale write: %v", s.ID(), err)
		}
	}
	// The deposed owner's store fails on its next flush and stays failed.
	if err := cs.Save("shop", "c1", testCursor(12, schema)); err != nil {
		t.Fatal(err)
	}
	if err := cs.Flush(ctx); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("flush after reassignment: %v", err)
	}
	if err := cs.Save("shop", "c1", testCursor(13, schema)); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("save after fencing: %v", err)
	}
	if _, err := cs.Load("shop", "c1"); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("load after fencing: %v", err)
	}
	// The new owner, a follower, reads the last committed cursor at takeover.
	ns := newOwner.CursorStore("shop", e2, 0)
	defer ns.Close()
	got, err := ns.Load("shop", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if want := testCursor(10, schema); !reflect.DeepEqual(got, want) {
		t.Fatalf("takeover cursor\n got %+v\nwant %+v", got, want)
	}
	// Its own saves flush by themselves on the interval.
	if err := ns.Save("shop", "c1", testCursor(20, nil)); err != nil {
		t.Fatal(err)
	}
	retry.Until(t, 5*time.Second, func() error {
		if got, _ := lead.Cursor("shop", "c1"); got == nil || got.Seq != 20 {
			return fmt.Errorf("new owner's cursor not flushed: %+v", got)
		}
		return nil
	})
	// A consumer that unsubscribed is forgotten with the next batch.
	if err := ns.Forget("c2"); err != nil {
		t.Fatal(err)
	}
	if got, err := ns.Load("shop", "c2"); err != nil || got != nil {
		t.Fatalf("load of a forgotten client before the flush: %+v %v", got, err)
	}
	if err := ns.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := lead.Cursor("shop", "c2"); got != nil || (err != nil && !errors.Is(err, ErrNotFound)) {
		t.Fatalf("forgotten client's cursor still stored: %+v %v", got, err)
	}
	// Its history of schema a is gone (no cursor names it); c2 still does not.
	if h, _ := lead.SchemaHistory("shop", "a"); len(h) != 0 {
		t.Fatalf("schema histories left: %d", len(h))
	}
	// Reading with the old epoch is refused too.
	if _, err := oldOwner.OwnedCursor(ctx, "shop", "c1", e1); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("OwnedCursor with the old epoch: %v", err)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Save("shop", "c1", testCursor(21, nil)); err == nil {
		t.Fatal("save after close succeeded")
	}
}

// TestConsistentReads: after Consistent returns, a local read on any node
// sees every write acknowledged before it started.
func TestConsistentReads(t *testing.T) {
	// Followers learn of commits late: without Consistent their reads lag.
	c := newCluster(t, 3, func(cfg *Config) { cfg.CommitTimeout = 200 * time.Millisecond })
	ctx := testCtx(t)
	lead := c.leader()
	if _, err := lead.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		epoch, err := lead.Assign(ctx, "shop", fmt.Sprintf("n%d", i%3+1))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.live() {
			if err := s.Consistent(ctx); err != nil {
				t.Fatalf("%s: %v", s.ID(), err)
			}
			if a, _ := s.Assignment("shop"); a.Epoch != epoch {
				t.Fatalf("%s: epoch %d after Consistent, want %d", s.ID(), a.Epoch, epoch)
			}
		}
	}
}

// TestSnapshotsCompactLog: under steady cursor traffic snapshots compact
// the log on every node; a node restarted from its data directory restores
// from its snapshot; a node that joins after compaction is sent a
// snapshot; a dead node is removed.
func TestSnapshotsCompactLog(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotThreshold = 64
		cfg.TrailingLogs = 16
		cfg.SnapshotInterval = 50 * time.Millisecond
	})
	ctx := testCtx(t)
	lead := c.leader()
	if _, err := lead.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	epoch, err := lead.Assign(ctx, "shop", lead.ID())
	if err != nil {
		t.Fatal(err)
	}
	schema := testSchema(t, 200)
	const writes = 400
	for i := 1; i <= writes; i++ {
		if _, err := lead.SaveCursors(ctx, "shop", epoch, []CursorUpdate{{Client: fmt.Sprintf("c%d", i%7), Cursor: testCursor(uint64(i), schema)}}); err != nil {
			t.Fatal(err)
		}
	}
	retry.Until(t, 10*time.Second, func() error {
		for _, s := range c.live() {
			if st := s.Stats(); st.LastSnapshotIndex == 0 || st.FirstIndex <= 1 || st.LastIndex-st.FirstIndex >= writes/2 {
				return fmt.Errorf("%s: log not compacted: %+v", s.ID(), st)
			}
		}
		return nil
	})
	for _, s := range c.live() {
		st := s.Stats()
		t.Logf("%s: log %d..%d, snapshot at %d", s.ID(), st.FirstIndex, st.LastIndex, st.LastSnapshotIndex)
	}
	want := c.converged()

	// Restart a follower: it restores its snapshot, replays the log's tail.
	f := c.index(c.follower())
	c.kill(f)
	back := c.restart(f)
	if got := c.converged(back, lead); string(got) != string(want) {
		t.Fatal("restarted node's state differs")
	}

	// A fourth node joins after compaction: it is sent a snapshot.
	j := c.add()
	joiner := c.nodes[j]
	if joiner.HadState() {
		t.Fatal("new node has state")
	}
	if err := lead.AddVoter(ctx, joiner.ID(), joiner.Addr()); err != nil {
		t.Fatal(err)
	}
	if got := c.converged(joiner, lead); string(got) != string(want) {
		t.Fatal("joined node's state differs")
	}
	// One node dies for good and is removed; the other three carry on.
	dead := c.index(c.follower())
	deadID := c.nodes[dead].ID()
	c.kill(dead)
	if err := c.leader().RemoveServer(ctx, deadID); err != nil {
		t.Fatal(err)
	}
	servers, err := c.leader().Servers()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 3 {
		t.Fatalf("servers after removal: %+v", servers)
	}
	for _, sv := range servers {
		if sv.ID == deadID {
			t.Fatalf("%s still a member", deadID)
		}
	}
	if _, err := joiner.SaveCursors(ctx, "shop", epoch, []CursorUpdate{{Client: "last", Cursor: testCursor(writes+1, nil)}}); err != nil {
		t.Fatal(err)
	}
	c.converged()
}

// TestWholeClusterRestart: all three nodes stop and start again from their
// data directories; they elect a leader from their stored configuration
// and hold the same state as before.
func TestWholeClusterRestart(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := testCtx(t)
	lead := c.leader()
	if _, err := lead.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	epoch, err := lead.Assign(ctx, "shop", "n2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lead.SaveCursors(ctx, "shop", epoch, []CursorUpdate{{Client: "c1", Cursor: testCursor(3, testSchema(t, 200))}}); err != nil {
		t.Fatal(err)
	}
	if err := lead.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.SaveCursors(ctx, "shop", epoch, []CursorUpdate{{Client: "c1", Cursor: testCursor(4, testSchema(t, 200))}}); err != nil {
		t.Fatal(err)
	}
	want := c.converged()
	for i := range c.nodes {
		c.kill(i)
	}
	for i := range c.nodes {
		c.restart(i)
	}
	lead = c.leader()
	if err := lead.Consistent(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.converged(); string(got) != string(want) {
		t.Fatalf("state after restart:\n%s\nwant\n%s", got, want)
	}
	if got, _ := c.nodes[1].OwnedCursor(ctx, "shop", "c1", epoch); got == nil || got.Seq != 4 {
		t.Fatalf("cursor after restart: %+v", got)
	}
}
