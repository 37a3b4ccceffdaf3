package group_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
	"github.com/braid-cdc/braid/spec"
)

// TestSnapshotReplayAfterFailover: a destination restarted from a cursor
// early in its initial snapshot, after its source failed over to the
// replica (whose binlog files are numbered below the old primary's),
// emits the kept chunks where the first run emitted them, among the
// same live transactions with the same seqs. A chunk's point is the
// boundary it followed, a file:pos of the old primary; the old code
// compared it with the promoted replica's positions, never reached it,
// and the snapshot stopped there.
func TestSnapshotReplayAfterFailover(t *testing.T) {
	tp, vip, ds := snapshotFailoverSetup(t)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	keep := &group.MemKeeper{}
	// Live transactions among the chunks, from before the first.
	halt := startUpdates(t, primary)
	time.Sleep(50 * time.Millisecond)
	first := collect(t, group.Config{Spec: &ds, Keep: keep})
	waitSnapshotDone(t, first)
	halt()
	first.stop(t)
	events := first.snapshot()
	end := lastWhole(events)
	cursor, at := first.cursorMidSnapshot(t, end/3)

	tp.FailOver(t, vip, replica)
	second := collect(t, group.Config{Spec: &ds, Resume: cursor, Keep: keep})
	waitSnapshotDone(t, second)
	second.waitTxs(t, int(end-at), 60*time.Second)
	want, got := txShapes(events, at, end), txShapes(second.snapshot(), at, end)
	if len(got) != len(want) {
		t.Fatalf("seqs %d..%d: %d transactions first, %d after the failover", at+1, end, len(want), len(got))
	}
	for seq := at + 1; seq <= end; seq++ {
		if got[seq] != want[seq] {
			t.Fatalf("seq %d: first %q, after the failover %q", seq, want[seq], got[seq])
		}
	}
	t.Logf("replayed seqs %d..%d on the promoted replica", at+1, end)
}

// snapshotFailoverSetup starts a primary and a replica whose binlog
// files are numbered below the primary's (the primary flushed its logs,
// which is not replicated), 3000 rows in shop_0.orders on both, a
// virtual IP in front of the primary, and the spec of a destination
// reading them through it with an initial snapshot of 20-row chunks.
func snapshotFailoverSetup(t *testing.T) (*mysqltest.Topology, *tcpproxy.Proxy, spec.Spec) {
	tp := mysqltest.StartTopology(t, 1)
	primary := tp.Primary()
	for range 3 {
		primary.FlushLogs(t) // not replicated: the replica stays on its first file
	}
	primary.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id BIGINT PRIMARY KEY, note VARCHAR(40))",
		"INSERT INTO shop_0.orders SELECT seq, CONCAT('n', seq) FROM seq.seq_1_to_3000")
	tp.WaitCaughtUp(t)
	vip := tcpproxy.Start(t, primary.Addr())
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Ordering: "strict",
		Heartbeat: spec.Duration(100 * time.Millisecond), Snapshot: spec.SnapshotInitial, SnapshotChunkRows: 20,
		Sources: []spec.Source{{Name: "a", Address: vip.Addr(), Start: spec.Start{Kind: spec.StartLatest}}}}
	return tp, vip, ds.WithDefaults()
}

// startUpdates updates rows of shop_0.orders on s, one a transaction,
// until the returned halt is called.
func startUpdates(t *testing.T, s *mysqltest.Server) (halt func()) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		c := s.Conn(t)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Execute(fmt.Sprintf("UPDATE shop_0.orders SET note = 'u%d' WHERE id = %d", i, 1+i*37%3000)); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() { close(stop); <-stopped }
}

// TestSnapshotFreshAcrossFailover: a chunk read again holds its rows as
// they are when it is read, so the source's changes before that point,
// which follow it in the stream, say they may find their rows already
// so (Event.FreshAt), and those after it do not. Chunks read again on
// the primary make that point a file:pos of the primary; after a
// failover the changes are read from the promoted replica, whose binlog
// files are numbered below the primary's. The old code compared the
// two: every change after the failover was before the point, for good
// (a sink took a duplicate INSERT for one read again). Resumed from a
// cursor while chunks are still to be read again, and from one after
// the last, the changes written on the promoted replica after the
// snapshot say nothing, and changes before the point still do.
func TestSnapshotFreshAcrossFailover(t *testing.T) {
	tp, vip, ds := snapshotFailoverSetup(t)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	keep := &group.MemKeeper{}
	halt := startUpdates(t, primary)
	time.Sleep(50 * time.Millisecond)
	first := collect(t, group.Config{Spec: &ds, Keep: keep})
	waitSnapshotDone(t, first)
	early, _ := first.cursorMidSnapshot(t, lastWhole(first.snapshot())/3)
	first.stop(t)

	// Read again on the primary, the kept chunks after the cursor are
	// fresh at the primary's end of binlog, past the cursors after them.
	second := collect(t, group.Config{Spec: &ds, Resume: early, Keep: keep})
	waitSnapshotDone(t, second)
	halt()
	second.stop(t)
	mid, _ := second.cursorMidSnapshot(t, lastWhole(second.snapshot()))
	var done *group.Cursor // at the last chunk
	second.mu.Lock()
	for _, cur := range second.cursors {
		if st := cur.Sources[0].Snapshot; st != nil && st.Done && (done == nil || cur.Seq < done.Seq) {
			done = cur
		}
	}
	second.mu.Unlock()
	for _, cur := range []*group.Cursor{mid, done} {
		sc := cur.Sources[0]
		if sc.Snapshot.FreshAt.IsZero() || sc.Pos.Compare(sc.Snapshot.FreshAt) >= 0 {
			t.Fatalf("cursor at seq %d: position %s, chunks read again fresh at %s: want it before that point", cur.Seq, sc.Pos, sc.Snapshot.FreshAt)
		}
	}

	tp.FailOver(t, vip, replica)
	for i, from := range []*group.Cursor{mid, done} {
		run := collect(t, group.Config{Spec: &ds, Resume: from, Keep: keep})
		waitSnapshotDone(t, run)
		id := 5001 + i
		replica.Exec(t, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 'after')", id))
		retry.Until(t, 30*time.Second, func() error {
			for _, x := range run.txs(t) {
				if slices.Contains(x.ids, int64(id)) {
					return nil
				}
			}
			return fmt.Errorf("row %d not out yet", id)
		})
		run.stop(t)
		fresh, after := 0, 0
		for _, ev := range run.snapshot() {
			if ev.Type != change.EventRows || ev.Snapshot {
				continue
			}
			for j := range ev.Rows {
				rc := &ev.Rows[j]
				if k := rc.After()[0].(int64); k > 5000 {
					after++
					if !ev.FreshAt.IsZero() {
						t.Fatalf("resumed at seq %d: row %d, written on the promoted replica after the snapshot, may exist already (fresh at %s)", from.Seq, k, ev.FreshAt)
					}
				}
			}
			if !ev.FreshAt.IsZero() {
				fresh++
			}
		}
		if fresh == 0 || after < 1+i {
			t.Fatalf("resumed at seq %d: %d changes before the point the chunks were read at, %d rows after it", from.Seq, fresh, after)
		}
		t.Logf("resumed at seq %d on the promoted replica: %d changes before the chunks' point, %d after", from.Seq, fresh, after)
	}
}
