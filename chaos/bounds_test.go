package chaos

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestBoundsAreBraids: the memory bound the run holds nodes to is the
// one braid sets, group.MemoryBound for the run's destination (three
// sources, snapshot: initial, the default store) plus the node's
// overhead, so that a change of braid's bounds shows here.
func TestBoundsAreBraids(t *testing.T) {
	ds := &spec.Spec{Snapshot: spec.SnapshotInitial}
	want := group.MemoryBound(len(sourceNames), group.Config{Spec: ds}, stream.DefaultBytes)
	if got := memoryBound - nodeOverheadBytes; got != want {
		t.Fatalf("the run's destination bound is %d bytes, braid's group.MemoryBound %d", got, want)
	}
	if memoryBound != 188<<20 {
		t.Errorf("memoryBound is %d MiB; docs/chaos.md says 188", memoryBound>>20)
	}
}

// TestCheckMemory: a node whose memory went over its bound is named, with
// the value, the bound and when; one within it is not.
func TestCheckMemory(t *testing.T) {
	o := clean()
	o.Memory = []Memory{{Node: "n1", Peak: 120 << 20, At: 3 * time.Second, Bound: memoryBound}}
	if vs := Check(o); len(vs) != 0 {
		t.Fatalf("a node within its bound: %v", vs)
	}
	o.Memory = append(o.Memory, Memory{Node: "n2", Peak: 200 << 20, At: 40 * time.Second, Bound: memoryBound})
	vs := Check(o)
	reported(t, vs, InvMemory, "node n2", "200.0 MiB", "bound of 188.0 MiB")
	if vs[0].At != 40*time.Second {
		t.Errorf("at %v, want the peak's 40s", vs[0].At)
	}
}

// TestCheckFollow: a failover braid followed later than the bound, or
// not at all, is named with its source, the time and the bound.
func TestCheckFollow(t *testing.T) {
	o := clean()
	o.Follows = []Follow{{Source: "a", At: 10 * time.Second, After: 1200 * time.Millisecond, Bound: followBound}}
	if vs := Check(o); len(vs) != 0 {
		t.Fatalf("a failover followed in 1.2s: %v", vs)
	}
	o.Follows = []Follow{{Source: "b", At: 20 * time.Second, After: 14 * time.Second, Bound: followBound}}
	vs := Check(o)
	reported(t, vs, InvFollow, "source b", "14s after the failover", "bound of 10s")
	if vs[0].At != 20*time.Second {
		t.Errorf("at %v, want the move's 20s", vs[0].At)
	}
	o.Follows = []Follow{{Source: "c", At: 30 * time.Second, After: -1, Bound: followBound}}
	reported(t, Check(o), InvFollow, "source c", "did not read the promoted server within 1m0s")
}
