package group_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/group/grouptest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// TestReplicaOwnWritesKeepTheOrder: a shard read from its primary and
// from a replica must give the same stream. A replica's binlog also holds
// transactions of its own (a table braid does not select, in the
// replica's own GTID domain), stamped by its clock: a second past the
// next transaction it replicates when it runs less than a second behind
// across a second's boundary. Such a transaction reaches the merge as a
// progress event; had its commit time been taken as the source's
// watermark, the other shard's transaction of the same second would go
// out before the replicated one that follows, which would then come
// late: another order, other seqs, than from the primary, whose binlog
// has no such transaction. A progress event promises what a heartbeat
// does: its time less max_clock_skew.
func TestReplicaOwnWritesKeepTheOrder(t *testing.T) {
	type out struct {
		source string
		ids    []int64
		seq    uint64
	}
	read := func(fromReplica bool) ([]out, group.Stats) {
		ds := scriptSpec(2, spec.ShardDDLPassthrough)
		srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
		s0, s1 := srcs.Log("s0"), srcs.Log("s1")
		d := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock})
		t0 := scriptT0
		s0.Tx(t0, orders("shop_0"), row(1, "a"))
		if fromReplica {
			s0.Tx(t0.Add(time.Second), orders("local_0"), row(1, "the replica's own"))
		}
		s1.Tx(t0, orders("shop_1"), row(10, "b"))
		got := []scriptedTx{d.next(t)}
		// Wait until the merge has either sent s1's transaction or
		// stopped to wait for s0 (the stall tick publishes its stats).
		retry.Until(t, 10*time.Second, func() error {
			clock.Advance(5 * time.Second)
			if st := d.d.Stats(); st.Seq < 2 && !st.Sources[0].Waiting {
				return errors.New("the merge has not decided on s1's transaction yet")
			}
			return nil
		})
		s0.Tx(t0, orders("shop_0"), row(2, "c")) // replicated after the replica's own
		s0.Heartbeat(false)                      // idle since: s1's may go
		got = append(got, d.next(t), d.next(t))
		st := d.d.Stats()
		d.none(t)
		var o []out
		for _, x := range got {
			o = append(o, out{x.source, x.ids, x.seq})
		}
		return o, st
	}
	primary, _ := read(false)
	replica, st := read(true)
	if !slices.EqualFunc(primary, replica, func(a, b out) bool {
		return a.source == b.source && a.seq == b.seq && slices.Equal(a.ids, b.ids)
	}) {
		t.Errorf("from the primary %v, from the replica %v: want the same", primary, replica)
	}
	if st.Late != 0 {
		t.Errorf("from the replica %d transactions went out late; want none", st.Late)
	}
}

// TestLateReplayedFromReplica: a late transaction is kept with its
// place in the stream; a replay that reads its source from another
// server (a replica, whose file:pos differ, its own write first) finds
// it by its GTID and gives every transaction the seq the first run gave
// it. Found by position, it would be missed: the replay would sort it
// by key, or stop on a chunk log that matches nothing.
func TestLateReplayedFromReplica(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	at := scriptT0.Add(-2 * time.Second)
	// history writes the two shards' binlogs into srcs; the replica's
	// binlog of s0 begins with a transaction of its own.
	history := func(srcs *grouptest.Sources, replica bool) (s0, s1 *grouptest.Log) {
		s0, s1 = srcs.Log("s0"), srcs.Log("s1")
		s1.GTIDs("0-2")
		if replica {
			s0.GTIDs("1-3")
			s0.Tx(scriptT0.Add(-20*time.Second), orders("local_0"), row(1, "the replica's own"))
		}
		s0.GTIDs("0-1")
		return s0, s1
	}
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, s1 := history(srcs, false)
	keep := &group.MemKeeper{}
	first := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Keep: keep})
	s0.Heartbeat(false) // stamped now: every watermark is now - 1s
	s1.Heartbeat(false)
	s0.Tx(scriptT0.Add(-10*time.Second), orders("shop_0"), row(1, "a"))
	want := []scriptedTx{first.next(t)}
	s1.Tx(at, orders("shop_1"), row(2, "b")) // (at, 1): out, s0's watermark being above
	want = append(want, first.next(t))
	s0.Tx(at, orders("shop_0"), row(3, "c")) // (at, 0) < (at, 1): late
	want = append(want, first.next(t))
	first.none(t)
	if want[2].source != "s0" || first.d.Late() != 1 {
		t.Fatalf("went out %v with %d late; want s0's last, late", want, first.d.Late())
	}

	// The same history from s0's replica, with the first run's placements.
	rsrcs := grouptest.NewSources()
	r0, r1 := history(rsrcs, true)
	r0.Tx(scriptT0.Add(-10*time.Second), orders("shop_0"), row(1, "a"))
	r1.Tx(at, orders("shop_1"), row(2, "b"))
	r0.Tx(at, orders("shop_0"), row(3, "c"))
	again := runScripted(t, group.Config{Spec: ds, Sources: rsrcs, Clock: clock, Keep: keep})
	for _, w := range want {
		if x := again.next(t); x.seq != w.seq || x.source != w.source || !slices.Equal(x.ids, w.ids) {
			t.Errorf("from the replica %s; from the primary %s", x, w)
		}
	}
	again.none(t)
}
