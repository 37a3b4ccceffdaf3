package group_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
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
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
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
	ds = ds.WithDefaults()
	keep := &group.MemKeeper{}
	// Live transactions among the chunks, from before the first.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		c := primary.Conn(t)
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
	time.Sleep(50 * time.Millisecond)
	first := collect(t, group.Config{Spec: &ds, Keep: keep})
	waitSnapshotDone(t, first)
	close(stop)
	<-stopped
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
