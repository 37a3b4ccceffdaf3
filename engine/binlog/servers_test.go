package binlog

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestRetryWaitEndsAtFailoverAfter: with several addresses the reader
// connects again when failover_after ends for the server it lost, not a
// doubled backoff later (which made a 2 s failover_after take 3.1 s);
// with one address, or before any loss, the backoff is kept.
func TestRetryWaitEndsAtFailoverAfter(t *testing.T) {
	list, err := NewReader(Config{Destination: "d", Source: spec.Source{Name: "a", Address: "127.0.0.1:1,127.0.0.1:2", FailoverAfter: spec.Duration(2 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	one, err := NewReader(Config{Destination: "d", Source: spec.Source{Name: "a", Address: "127.0.0.1:1", FailoverAfter: spec.Duration(2 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := list.retryWait(1600 * time.Millisecond); got != 1600*time.Millisecond {
		t.Errorf("before a loss: wait %v, want the backoff", got)
	}
	down := time.Now().Add(-1500 * time.Millisecond)
	list.live.DownSince, one.live.DownSince = down, down
	if got := list.retryWait(1600 * time.Millisecond); got <= 0 || got > 500*time.Millisecond {
		t.Errorf("list, 1.5 s into a 2 s failover_after: wait %v, want at most the 500 ms left", got)
	}
	if got := list.retryWait(200 * time.Millisecond); got != 200*time.Millisecond {
		t.Errorf("list, backoff shorter than what is left: wait %v, want it", got)
	}
	if got := one.retryWait(1600 * time.Millisecond); got != 1600*time.Millisecond {
		t.Errorf("one address: wait %v, want the backoff", got)
	}
	list.live.DownSince = time.Now().Add(-3 * time.Second)
	if got := list.retryWait(1600 * time.Millisecond); got != 1600*time.Millisecond {
		t.Errorf("list, past failover_after: wait %v, want the backoff (passes over the list)", got)
	}
	if list.spec.Address != "127.0.0.1:1" || len(list.addrs) != 2 || list.lagLimit != 2*time.Second {
		t.Errorf("list reader: address %q, addrs %q, lag limit %v", list.spec.Address, list.addrs, list.lagLimit)
	}
}

// TestSnapshotReadsTheReadersServer: a source's initial snapshot reads
// the server its reader starts on, whose binlog positions are the
// chunks' watermarks: with read_from: replica the listed replica, not
// the first listed server (the primary), whose positions mean nothing
// in the replica's binlog.
func TestSnapshotReadsTheReadersServer(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	src := spec.Source{Name: "a", User: "root", Address: primary.Addr() + "," + replica.Addr(), ReadFrom: spec.ReadFromReplica}
	c, err := OpenSnapshot(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.p.spec.Address != replica.Addr() {
		t.Fatalf("snapshot reads %s, want the replica %s (the reader's server)", c.p.spec.Address, replica.Addr())
	}
	src.ReadFrom = spec.ReadFromPrimary
	c2, err := OpenSnapshot(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.p.spec.Address != primary.Addr() {
		t.Fatalf("snapshot reads %s, want the primary %s", c2.p.spec.Address, primary.Addr())
	}
}
