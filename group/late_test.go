package group_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/group/grouptest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// TestRestartAfterLateTransaction: a transaction whose commit time is
// below a watermark its source's heartbeats already promised (a source
// clock behind, a heartbeat read behind a full queue, a slow commit: here
// SET timestamp) goes out late, after another source's larger key, and is
// kept in the placement log first. A restart from a cursor before both, with
// that log, gives each the seq it had; without it the replay sorts them
// by key and the seqs name other transactions.
func TestRestartAfterLateTransaction(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	srvs := shards(t, base)
	spec := shopSpec(srvs, earliest, "strict")
	keep := &group.MemKeeper{}
	first := collect(t, group.Config{Spec: spec, Keep: keep})
	first.waitTxs(t, 6, 30*time.Second) // the six CREATE TABLEs
	// A heartbeat from every source since: every watermark is about
	// now - 1s, far above the commit times below.
	mark := time.Now()
	retry.Until(t, 30*time.Second, func() error {
		for _, s := range first.dest.Stats().Sources {
			if !s.LastSeen.After(mark) {
				return fmt.Errorf("no heartbeat from %s since %s", s.Name, mark.Format(time.TimeOnly))
			}
		}
		return nil
	})
	at := base.Add(10 * time.Second).Unix()
	// s1's, key (at, 1): out at once, the others' watermarks being far above.
	srvs[1].Exec(t, fmt.Sprintf("SET timestamp = %d", at), "INSERT INTO shop_1.orders VALUES (1, 'y')")
	first.waitTxs(t, 7, 10*time.Second)
	// s0's, key (at, 0) < (at, 1): late.
	srvs[0].Exec(t, fmt.Sprintf("SET timestamp = %d", at), "INSERT INTO shop_0.orders VALUES (2, 'x')")
	all := first.waitTxs(t, 8, 10*time.Second)
	if n := first.dest.Late(); n != 1 {
		t.Fatalf("late: %d, want 1", n)
	}
	first.mu.Lock()
	cursor := first.cursors[6]
	first.mu.Unlock()
	first.stop(t)
	log, _ := keep.Placements()
	if len(log) != 1 || !log[0].Late || log[0].Source != 0 || log[0].Taken != cursor.Taken+1 || log[0].At != all[7].pos {
		t.Fatalf("the placement log holds %+v; want the late transaction of s0 at %s, point %d", log, all[7].pos, cursor.Taken+1)
	}

	second := collect(t, group.Config{Spec: spec, Resume: cursor, Keep: keep})
	for i, x := range second.waitTxs(t, 2, 30*time.Second) {
		if w := all[6+i]; x.seq != w.seq || x.source != w.source || !slices.Equal(x.ids, w.ids) || x.pos != w.pos {
			t.Errorf("after restart, seq %d is %s %v at %s; the first run gave seq %d to %s %v at %s",
				x.seq, x.source, x.ids, x.pos, w.seq, w.source, w.ids, w.pos)
		}
	}
	// More transactions after it go on in order.
	srvs[0].Exec(t, "INSERT INTO shop_0.orders VALUES (3, 'z')")
	if got := second.waitTxs(t, 3, 30*time.Second); got[2].seq != all[7].seq+1 || !slices.Equal(got[2].ids, []int64{3}) {
		t.Errorf("after the late transaction: %+v", got[2])
	}
}

// TestLateKeptAndReplayed is TestRestartAfterLateTransaction's logic on
// scripted sources: s1's transaction goes out at key (t, 1), then s0's at
// (t, 0) comes below it, goes out late and is kept first; a restart from
// a cursor before both, with the placement log, gives each its seq, and
// one without the log sorts them by key instead.
func TestLateKeptAndReplayed(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, s1 := srcs.Log("s0"), srcs.Log("s1")
	keep := &group.MemKeeper{}
	first := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Keep: keep})
	s0.Heartbeat(false) // stamped now: every watermark is now - 1s
	s1.Heartbeat(false)
	s0.Tx(scriptT0.Add(-10*time.Second), orders("shop_0"), row(1, "a"))
	a := first.next(t)
	at := scriptT0.Add(-2 * time.Second)
	s1.Tx(at, orders("shop_1"), row(2, "b")) // (at, 1): out, s0's watermark being above
	b := first.next(t)
	late := s0.Tx(at, orders("shop_0"), row(3, "c")) // (at, 0) < (at, 1): late
	c := first.next(t)
	if b.source != "s1" || c.source != "s0" || c.pos != late || first.d.Late() != 1 {
		t.Fatalf("went out %s, %s with %d late; want s1's, then s0's late", b, c, first.d.Late())
	}
	first.none(t)
	log, _ := keep.Placements()
	if len(log) != 1 || !log[0].Late || log[0].Source != 0 || log[0].At != late || log[0].Taken != a.cursor.Taken+1 {
		t.Fatalf("the placement log holds %+v; want s0's late transaction at %s, point %d", log, late, a.cursor.Taken+1)
	}

	again := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Resume: a.cursor, Keep: keep})
	for _, want := range []scriptedTx{b, c} {
		if x := again.next(t); x.seq != want.seq || x.source != want.source || x.pos != want.pos || !slices.Equal(x.ids, want.ids) {
			t.Errorf("after restart %s; the first run gave it %s", x, want)
		}
	}
	// More transactions go on in order after it.
	clock.Advance(2 * time.Second)
	s1.Heartbeat(false)
	s0.Tx(scriptT0, orders("shop_0"), row(4, "d"))
	if x := again.next(t); x.seq != c.seq+1 || !slices.Equal(x.ids, []int64{4}) {
		t.Errorf("after the late transaction: %s, want seq %d with id 4", x, c.seq+1)
	}
	again.none(t)

	// Without the log the replay orders them by key: the seqs differ.
	bare := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Resume: a.cursor})
	if x := bare.next(t); x.source != "s0" || x.seq != b.seq {
		t.Errorf("a replay without the placement log emitted %s first; want s0's at seq %d (key order)", x, b.seq)
	}
}

// TestStaleHeartbeats: a heartbeat read with binlog right behind it (the
// reader marks it Stale: sent long before it was read, while the
// consumer stalled) must promise nothing. Were it stamped with the
// clock at reading, s0's watermark would pass the commit time of the
// transaction right behind it, which would come in below its own
// source's watermark (Undercut: one race from going out late).
func TestStaleHeartbeats(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, s1 := srcs.Log("s0"), srcs.Log("s1")
	d := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock})
	// Heartbeats promise t0 - 1s (max_clock_skew), then s0's t0.
	s0.Heartbeat(false)
	s1.Heartbeat(false)
	clock.Advance(time.Second)
	s0.Heartbeat(false)
	s1.Tx(scriptT0.Add(-time.Second), orders("shop_1"), row(1, "stall"))
	var got []scriptedTx
	got = append(got, d.next(t))
	clock.Advance(5 * time.Second) // the consumer stalled; heartbeats piled up
	s0.Heartbeat(true)             // read now, the binlog right behind it: x, written at t0 + 1s
	s0.Tx(scriptT0.Add(time.Second), orders("shop_0"), row(2, "x"))
	s1.Heartbeat(false) // not stale: s1 promises t0 + 5s
	got = append(got, d.next(t))
	s1.Tx(scriptT0.Add(5*time.Second), orders("shop_1"), row(3, "y"))
	clock.Advance(time.Second) // (and the merge publishes its stats)
	s0.Heartbeat(false)
	got = append(got, d.next(t))
	d.none(t)
	var order []string
	for _, x := range got {
		order = append(order, x.source)
	}
	if st := d.d.Stats(); !slices.Equal(order, []string{"s1", "s0", "s1"}) || st.Late != 0 || st.Undercut != 0 {
		t.Errorf("transactions went out from %v, %d late, %d below their source's watermark; want s1 (the stall), s0 (x), s1 (y), none late or below",
			order, st.Late, st.Undercut)
	}
}

// TestLateAfterRestart: s1's transaction goes out at key (t, 1), s0's
// watermark being above t; the destination stops before s0's
// transaction at (t, 0) comes. The run from the cursor after s1's must
// still see it as late (below a key out before the restart) and keep
// it, or a replay from before both sorts them by key and gives their
// seqs to each other.
func TestLateAfterRestart(t *testing.T) {
	w := passOnWatermark(t)
	ds, srcs, clock, s0, keep, a, b, at := w.ds, w.srcs, w.clock, w.s0, w.keep, w.a, w.b, w.at

	second := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Resume: b.cursor, Keep: keep})
	late := s0.Tx(at, orders("shop_0"), row(3, "c")) // (at, 0) < (at, 1), out before the restart
	c := second.next(t)
	if c.source != "s0" || c.pos != late || c.seq != b.seq+1 || second.d.Late() != 1 {
		t.Fatalf("after the restart %s went out with %d late; want s0's at seq %d, late", c, second.d.Late(), b.seq+1)
	}
	second.none(t)
	log, _ := keep.Placements()
	if len(log) != 1 || !log[0].Late || log[0].Source != 0 || log[0].At != late || log[0].Taken != b.cursor.Taken {
		t.Fatalf("the placement log holds %+v; want s0's late transaction at %s, point %d", log, late, b.cursor.Taken)
	}

	replay := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Resume: a.cursor, Keep: keep})
	for _, want := range []scriptedTx{b, c} {
		if x := replay.next(t); x.seq != want.seq || x.source != want.source || x.pos != want.pos || !slices.Equal(x.ids, want.ids) {
			t.Errorf("a replay from before both emitted %s; the stream had %s", x, want)
		}
	}
}

// TestRestartBeforeLateTransaction: s1's transaction goes out at key
// (t, 1), s0's watermark being above t, and the destination stops before
// s0's transaction at (t, 0) comes. A run from a cursor before s1's (a
// slow consumer's) with the furthest cursor known (Config.Reached: a
// faster consumer's, after s1's) emits what the first run emitted up
// to there, s1's, before s0's, which comes late: without it, the run
// sorts them by key, and the faster consumer, which skips to its
// cursor, never sees s0's.
func TestRestartBeforeLateTransaction(t *testing.T) {
	w := passOnWatermark(t)
	ds, srcs, clock, s0, keep, a, b, at := w.ds, w.srcs, w.clock, w.s0, w.keep, w.a, w.b, w.at
	late := s0.Tx(at, orders("shop_0"), row(3, "c")) // (at, 0) < (at, 1), out before the restart

	second := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Resume: a.cursor, Reached: b.cursor, Keep: keep})
	if x := second.next(t); x.seq != b.seq || x.source != b.source || x.pos != b.pos {
		t.Fatalf("after the restart %s went out first; the first run gave seq %d to %s", x, b.seq, b)
	}
	c := second.next(t)
	if c.source != "s0" || c.pos != late || c.seq != b.seq+1 || second.d.Late() != 1 {
		t.Fatalf("then %s went out with %d late; want s0's at seq %d, late", c, second.d.Late(), b.seq+1)
	}
	second.none(t)
	if log, _ := keep.Placements(); len(log) != 1 || !log[0].Late || log[0].At != late || log[0].Taken != b.cursor.Taken {
		t.Fatalf("the placement log holds %+v; want s0's late transaction at %s, point %d", log, late, b.cursor.Taken)
	}
}

// replayKeeper reads what its live run keeps and keeps nothing itself, as
// a replay reader's keeper does (package stream).
type replayKeeper struct{ *group.MemKeeper }

func (replayKeeper) KeepPlacement(context.Context, group.Placement) error  { return nil }
func (replayKeeper) KeepDecision(context.Context, group.DDLDecision) error { return nil }

// TestReplayFollowsLiveOrder: the live run lets s1's transaction out at
// key (t, 1), s0's watermark being above t, and is held up before it
// reads s0's transaction at (t, 0). A replay reader beside it reads
// both: sorted by key it would take s0's first, at the point the live
// run gave s1's, and s0's would go late there only after. Following the
// live run's order (Config.LiveOrder) it takes s1's, waits for the live
// run to take the next point, learns that s0's went late there, and
// takes it: the same seqs.
func TestReplayFollowsLiveOrder(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, s1 := srcs.Log("s0"), srcs.Log("s1")
	keep := &group.MemKeeper{}
	live, err := group.New(group.Config{Spec: ds, Sources: srcs, Clock: clock, Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan uint64, 4), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- live.Run(ctx, func(ev *change.Event) error {
			if ev.Type == change.EventCommit {
				held <- ev.Seq
				if ev.Source == "s1" {
					<-release // held up before it reads on
				}
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		free()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("live run: %v", err)
		}
	})
	s0.Heartbeat(false) // stamped now: every watermark is now - 1s
	s1.Heartbeat(false)
	out := func() uint64 {
		t.Helper()
		select {
		case seq := <-held:
			return seq
		case <-time.After(stuckAfter):
			t.Fatal("the live run emitted nothing")
			return 0
		}
	}
	s0.Tx(scriptT0.Add(-10*time.Second), orders("shop_0"), row(1, "a"))
	out()
	at := scriptT0.Add(-2 * time.Second)
	s1.Tx(at, orders("shop_1"), row(2, "b")) // (at, 1): out, s0's watermark being above
	bSeq := out()
	late := s0.Tx(at, orders("shop_0"), row(3, "c")) // (at, 0): the live run reads it only once released

	replay := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Keep: replayKeeper{keep}, ReplayOnly: true, LiveOrder: live.Order()})
	a, b := replay.next(t), replay.next(t)
	if a.source != "s0" || b.source != "s1" || b.seq != bSeq {
		t.Fatalf("the replay took %s, then %s; want s0's, then s1's at seq %d as the live run did", a, b, bSeq)
	}
	select {
	case x := <-replay.txs:
		t.Fatalf("the replay took %s at a point the live run had not taken", x)
	case <-time.After(100 * time.Millisecond):
	}
	free()
	c := replay.next(t)
	if c.source != "s0" || c.pos != late || c.seq != bSeq+1 {
		t.Errorf("then %s; want s0's late transaction at seq %d", c, bSeq+1)
	}
}

// TestReplayBeforeLiveStart: the first run lets s1's transaction out at
// key (t, 1) on s0's watermark and ends; s0's at (t, 0) comes after. A
// live run resumed after s1's has not taken it yet (late) when a replay
// from the start reads all three: below the live run's start it follows
// no OrderLog, so it goes no further than the live run's start cursor
// (Config.Reached from OrderLog) and gives s1's the seq the stream did.
func TestReplayBeforeLiveStart(t *testing.T) {
	w := passOnWatermark(t)
	ds, srcs, clock, s0, keep, a, b, at := w.ds, w.srcs, w.clock, w.s0, w.keep, w.a, w.b, w.at
	s0.Tx(at, orders("shop_0"), row(3, "c")) // came after the first run
	// The new live run, from b's cursor, not yet running (or held up).
	live, err := group.New(group.Config{Spec: ds, Sources: srcs, Clock: clock, Resume: b.cursor, Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	replay := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Keep: replayKeeper{keep}, ReplayOnly: true, LiveOrder: live.Order()})
	for _, want := range []scriptedTx{a, b} {
		if x := replay.next(t); x.seq != want.seq || x.source != want.source || x.pos != want.pos {
			t.Errorf("replay emitted %s; the stream had %s", x, want)
		}
	}
}

// TestReachedUnreachable: a furthest cursor whose point the run cannot
// reach (here one point further than its sources hold: a loss accepted
// since, a changed filter) holds nothing for ever: once no source has
// more to bring before it, the run goes on, with a warning.
func TestReachedUnreachable(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, s1 := srcs.Log("s0"), srcs.Log("s1")
	first := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock})
	s0.Heartbeat(false)
	s1.Heartbeat(false)
	s0.Tx(scriptT0.Add(-10*time.Second), orders("shop_0"), row(1, "a"))
	a := first.next(t)
	s1.Tx(scriptT0.Add(-5*time.Second), orders("shop_1"), row(2, "b"))
	b := first.next(t)
	first.none(t)
	beyond := b.cursor.Clone()
	beyond.Taken++
	beyond.Seq++

	again := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Resume: a.cursor, Reached: beyond})
	s0.Heartbeat(false) // idle at its end, as in the first run
	if x := again.next(t); x.seq != b.seq || x.source != "s1" {
		t.Fatalf("after restart %s; the first run gave seq %d to %s", x, b.seq, b)
	}
	s0.Tx(scriptT0, orders("shop_0"), row(3, "c"))
	clock.Advance(2 * time.Second)
	s1.Heartbeat(false)
	if x := again.next(t); x.seq != b.seq+1 || x.source != "s0" || !slices.Equal(x.ids, []int64{3}) {
		t.Errorf("then %s; want s0's at seq %d", x, b.seq+1)
	}
}

// watermarkPass is a first run, ended, in which s1's transaction b went
// out at key (at, 1) ahead of s0, its watermark being above at, after
// s0's a: s0's next transaction, at (at, 0), comes after the run.
type watermarkPass struct {
	ds     *spec.Spec
	srcs   *grouptest.Sources
	clock  *grouptest.Clock
	s0, s1 *grouptest.Log
	keep   *group.MemKeeper
	a, b   scriptedTx
	at     time.Time
}

func passOnWatermark(t *testing.T) watermarkPass {
	t.Helper()
	w := watermarkPass{ds: scriptSpec(2, spec.ShardDDLPassthrough), srcs: grouptest.NewSources(), clock: grouptest.NewClock(scriptT0), keep: &group.MemKeeper{}}
	w.s0, w.s1 = w.srcs.Log("s0"), w.srcs.Log("s1")
	first := runScripted(t, group.Config{Spec: w.ds, Sources: w.srcs, Clock: w.clock, Keep: w.keep})
	w.s0.Heartbeat(false) // stamped now: every watermark is now - 1s
	w.s1.Heartbeat(false)
	w.s0.Tx(scriptT0.Add(-10*time.Second), orders("shop_0"), row(1, "a"))
	w.a = first.next(t)
	w.at = scriptT0.Add(-2 * time.Second)
	w.s1.Tx(w.at, orders("shop_1"), row(2, "b")) // (at, 1): out, s0's watermark being above
	w.b = first.next(t)
	first.none(t)
	return w
}
