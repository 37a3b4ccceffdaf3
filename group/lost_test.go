package group_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/spec"
)

// lostTx is a transaction of a run: its seq, the ids it inserted (-1
// for a LOST marker) and the cursor after it.
type lostTx struct {
	seq    uint64
	ids    []int64
	cursor *group.Cursor
}

// lostRun is a destination running until the test ends, recording its
// transactions.
type lostRun struct {
	d   *group.Destination
	mu  sync.Mutex
	txs []lostTx
}

func startLostRun(t *testing.T, cfg group.Config) *lostRun {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	d, err := group.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &lostRun{d: d}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var cur lostTx
	go func() {
		done <- d.Run(ctx, func(ev *change.Event) error {
			switch ev.Type {
			case change.EventBegin:
				cur = lostTx{seq: ev.Seq}
				if ev.Lost != "" {
					cur.ids = append(cur.ids, -1)
				}
			case change.EventRows:
				for i := range ev.Rows {
					cur.ids = append(cur.ids, ev.Rows[i].After()[0].(int64))
				}
			case change.EventCommit, change.EventDDL:
				if ev.Type == change.EventDDL {
					cur = lostTx{seq: ev.Seq}
				}
				cur.cursor = d.Cursor()
				r.mu.Lock()
				r.txs = append(r.txs, cur)
				r.mu.Unlock()
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return r
}

// ids are the ids of the run's transactions so far, -1 for a marker.
func (r *lostRun) ids() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, tx := range r.txs {
		out = append(out, tx.ids...)
	}
	return out
}

func (r *lostRun) wait(t *testing.T, want []int64) {
	t.Helper()
	retry.Until(t, 60*time.Second, func() error {
		if got := r.ids(); !slices.Equal(got, want) {
			if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
				t.Fatalf("the run emitted %v, want %v (-1: the LOST marker)", got, want)
			}
			return fmt.Errorf("emitted %v, want %v", got, want)
		}
		return nil
	})
}

// TestAcceptedLossKeptForRestart: a promoted replica lacks the primary's
// last two transactions, which the first run emitted; the loss accepted
// (kept in the placement log), the run emits a marker and goes on. A
// second run from the cursor the first kept just before the marker,
// with the same keeper, finds the same loss and goes on without being
// asked: the marker and the new server's rows come with the seqs the
// first run gave them. With a keeper that does not hold the accept, it
// waits instead, naming the loss. Without the kept losses handed to its
// reader (binlog.Config.Accepted), the second run would wait too.
func TestAcceptedLossKeptForRestart(t *testing.T) {
	f := shoptest.StartFailover(t)
	tp, primary, replica, vip := f.Topology, f.Primary, f.Replica, f.VIP
	ds, err := spec.Parse([]byte(f.SpecYAML("")))
	if err != nil {
		t.Fatal(err)
	}
	keep := &group.MemKeeper{}
	first := startLostRun(t, group.Config{Spec: ds, Keep: keep})
	first.wait(t, []int64{1, 2})
	tp.StopReplication(t, replica)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)", "INSERT INTO shop.orders VALUES (4)")
	first.wait(t, []int64{1, 2, 3, 4})
	tp.KillPrimary(t)
	tp.Promote(t, replica)
	vip.Switch(replica.Addr())

	var lost string
	retry.Until(t, 60*time.Second, func() error {
		if lost = first.d.Stats().Sources[0].Lost; lost == "" {
			return fmt.Errorf("nothing lost yet")
		}
		return nil
	})
	if _, err := first.d.AcceptLost(t.Context(), "b"); err == nil {
		t.Fatal("accepted a loss of a source the destination does not have")
	}
	if acc := first.d.Stats().Sources[0].Accepted; len(acc) != 0 {
		t.Fatalf("accepted losses %+v before the accept", acc)
	}
	before := time.Now()
	// What the first run's reader has read, the lost transactions with
	// it: what a replay reader beside it must find on a server.
	readByLive := first.d.ReadGTIDs(0)
	l, err := first.d.AcceptLost(t.Context(), "a")
	if err != nil || l.Lost != lost {
		t.Fatalf("accept: %+v %v; want the loss reported, %s", l, err, lost)
	}
	replica.Exec(t, "INSERT INTO shop.orders VALUES (10)", "INSERT INTO shop.orders VALUES (11)")
	first.wait(t, []int64{1, 2, 3, 4, -1, 10, 11})
	if _, err := first.d.AcceptLost(t.Context(), "a"); err == nil {
		t.Error("a second accept was taken; want nothing lost")
	}
	first.mu.Lock()
	txs := slices.Clone(first.txs)
	first.mu.Unlock()
	at := slices.IndexFunc(txs, func(tx lostTx) bool { return slices.Contains(tx.ids, -1) })
	from, after := txs[at-1].cursor, txs[at:]
	// Stats show the accept: what, when, and the marker's seq.
	acc := first.d.Stats().Sources[0].Accepted
	if len(acc) != 1 || !acc[0].Loss.Same(l) || acc[0].At.Before(before.Truncate(time.Microsecond)) || acc[0].At.After(time.Now()) || acc[0].MarkerSeq != txs[at].seq {
		t.Fatalf("accepted losses %+v; want %+v accepted after %s, its marker at seq %d", acc, l, before, txs[at].seq)
	}

	// The second run, from the cursor before the marker, with the accept.
	again := startLostRun(t, group.Config{Spec: ds, Keep: keep, Resume: from})
	again.wait(t, []int64{-1, 10, 11})
	// The restart learns the accept from the keeper, with its time, and
	// the marker's seq as it emits it again.
	if got := again.d.Stats().Sources[0].Accepted; len(got) != 1 || got[0] != acc[0] {
		t.Errorf("after the restart accepted losses %+v, want %+v", got, acc)
	}
	again.mu.Lock()
	redone := slices.Clone(again.txs)
	again.mu.Unlock()
	for i, tx := range redone {
		if tx.seq != after[i].seq || !slices.Equal(tx.ids, after[i].ids) {
			t.Errorf("after the restart seq %d %v; the first run gave seq %d %v", tx.seq, tx.ids, after[i].seq, after[i].ids)
		}
	}

	// From a cursor inside the loss (after the first lost transaction,
	// before the second) the stream cannot be given again: the run
	// stops with one line saying so, rather than give the new server's
	// rows other seqs than the first run gave them. From one before the
	// loss (at the last transaction the promoted server has) neither:
	// read on, it would lack the lost rows and the marker, and give the
	// new server's rows the lost ones' seqs.
	stops := func(what string, from *group.Cursor, want error) {
		t.Helper()
		run, err := group.New(group.Config{Spec: ds, Keep: keep, Resume: from})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		var emitted []uint64
		err = run.Run(ctx, func(ev *change.Event) error {
			if ev.Type == change.EventCommit {
				emitted = append(emitted, ev.Seq)
			}
			return nil
		})
		if !errors.Is(err, want) || len(emitted) != 0 {
			t.Errorf("a run from %s the loss: %v, emitted seqs %v; want it stopped with %v, nothing emitted", what, err, emitted, want)
		} else {
			t.Logf("from %s the loss: %v", what, err)
		}
	}
	stops("inside", txs[at-2].cursor, binlog.ErrLostInside)
	stops("before", txs[at-3].cursor, binlog.ErrLostBefore)

	// A replay reader beside the first run, from before the loss, on
	// the promoted server before the accept is kept: the server holds
	// its position, but not what the live reader read. It waits, rather
	// than read on into the server's own history (the new rows at the
	// lost ones' seqs); once the accept is kept, it stops as above.
	replayKeep := &group.MemKeeper{}
	waits := logline.New(slog.NewTextHandler(t.Output(), nil), "a replay reader waits")
	replay, err := group.New(group.Config{Spec: ds, Keep: replayKeep, Resume: txs[at-3].cursor, ReplayOnly: true,
		LiveGTIDs: func(int) string { return readByLive },
		Logger:    slog.New(waits)})
	if err != nil {
		t.Fatal(err)
	}
	var replayed []uint64 // the run's goroutine's until replayDone
	emitted := make(chan uint64, 1)
	replayDone := make(chan error, 1)
	go func() {
		replayDone <- replay.Run(t.Context(), func(ev *change.Event) error {
			if ev.Type == change.EventCommit {
				replayed = append(replayed, ev.Seq)
				select {
				case emitted <- ev.Seq:
				default:
				}
			}
			return nil
		})
	}()
	select {
	case <-waits.Seen():
	case seq := <-emitted:
		t.Fatalf("the replay reader before the accept emitted seq %d; want it waiting", seq)
	case err := <-replayDone:
		t.Fatalf("the replay reader before the accept: %v; want it waiting", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the replay reader before the accept: no word of waiting after a minute")
	}
	if err := replayKeep.KeepPlacement(t.Context(), group.Placement{Source: 0, Lost: &l}); err != nil {
		t.Fatal(err)
	}
	if err := <-replayDone; !errors.Is(err, binlog.ErrLostBefore) || len(replayed) != 0 {
		t.Errorf("the replay reader after the accept: %v, emitted seqs %v; want it stopped with ErrLostBefore, nothing emitted", err, replayed)
	}

	// The same without the accept kept: it waits, naming the loss.
	unkept := startLostRun(t, group.Config{Spec: ds, Keep: &group.MemKeeper{}, Resume: from})
	retry.Until(t, 60*time.Second, func() error {
		if got := unkept.d.Stats().Sources[0].Lost; got != lost {
			return fmt.Errorf("lost %q, want %q", got, lost)
		}
		return nil
	})
	if acc := unkept.d.Stats().Sources[0].Accepted; len(acc) != 0 {
		t.Errorf("without the accept kept: accepted losses %+v, want none", acc)
	}
	if got := unkept.ids(); len(got) != 0 {
		t.Errorf("without the accept kept the run emitted %v; want nothing while it waits", got)
	}
}

// TestLostMarkerAtPoint: source a's last transaction emitted before its
// LOST marker (seq 7) ended at binlog.000001:500; the source then moved
// on by transactions of tables not selected to 900, the point the
// marker follows, and source b's transaction went out at seq 6. A
// cursor at seq 6 (the marker's From seq), its a at 500, has every
// transaction before the marker: not before the loss, though a run from
// it cannot go on past the loss (Short), so a run starts at From. A
// cursor at seq 5 with a at 500 lacks b's 6 and cannot be served by a
// run that can go on: before. One at seq 5 past the point is not short.
// The old Before took the cursor at seq 6 for one before the loss: a
// client right before a marker was refused, and in a crash between
// keeping the marker and emitting it every client was.
func TestLostMarkerAtPoint(t *testing.T) {
	pos := func(p uint32) change.Position { return change.Position{File: "binlog.000001", Pos: p} }
	cur := func(seq uint64, a uint32) *group.Cursor {
		return &group.Cursor{Seq: seq, Sources: []group.SourceCursor{{Name: "a", Pos: pos(a)}, {Name: "b", Pos: pos(300)}}}
	}
	m := group.LostMarker{Source: 0, Seq: 7, At: pos(900), From: cur(6, 900)}
	for _, tc := range []struct {
		name          string
		c             *group.Cursor
		before, short bool
	}{
		{"the destination's start", nil, true, true},
		{"right before the marker, short of the point", cur(6, 500), false, true},
		{"right before the marker, at the point", cur(6, 900), false, false},
		{"before b's transaction, short of the point", cur(5, 500), true, true},
		{"before b's transaction, at the point", cur(5, 900), false, false},
		{"at the marker", cur(7, 500), false, false},
		{"past the marker", cur(8, 1000), false, false},
	} {
		if got := m.Before(tc.c); got != tc.before {
			t.Errorf("%s: Before %v, want %v", tc.name, got, tc.before)
		}
		if got := m.Short(tc.c); got != tc.short {
			t.Errorf("%s: Short %v, want %v", tc.name, got, tc.short)
		}
	}
}

// TestUnmarkedLosses: a loss accepted whose marker is kept is not
// unmarked; one without is, and a cursor whose GTID state does not cover
// its point lacks it, on MariaDB and MySQL; a cursor without GTIDs, or
// of the other flavor, compares with nothing and is not said to lack it.
func TestUnmarkedLosses(t *testing.T) {
	maria := change.Loss{Lost: "domain 0 seq 5 to 0-100-6", From: "0-100-6"}
	mysql := change.Loss{Lost: "3e11fa47-71ca-11e1-9e33-c80aa9429562:5-6", From: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6"}
	other := change.Loss{Lost: "domain 1 seq 3", From: "1-7-3"}
	log := []group.Placement{
		{Source: 0, Lost: &other},
		{Source: 0, Lost: &maria},
		{Source: 1, Lost: &mysql},
		{Source: 0, Lost: &other, MarkerSeq: 9, Cursor: &group.Cursor{Seq: 8}},
	}
	got := group.UnmarkedLosses(log)
	if len(got) != 2 || got[0].Source != 0 || got[0].Lost != maria.Lost || got[1].Source != 1 || got[1].Lost != mysql.Lost {
		t.Fatalf("UnmarkedLosses = %+v; want source 0's %s and source 1's %s", got, maria.Lost, mysql.Lost)
	}
	at := func(maria, mysql string) *group.Cursor {
		return &group.Cursor{Sources: []group.SourceCursor{{Mark: group.Mark{GTIDs: change.GTIDText(maria)}}, {Mark: group.Mark{GTIDs: change.GTIDText(mysql)}}}}
	}
	for _, tc := range []struct {
		c              *group.Cursor
		lacksA, lacksB bool
	}{
		{at("0-100-4", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-4"), true, true},
		{at("0-100-6", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6"), false, false},
		{at("0-100-7,1-7-3", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9"), false, false},
		{at("", ""), false, false},
		{at("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9", "0-100-7"), false, false},
		{nil, false, false},
	} {
		if a, b := got[0].Lacks(tc.c), got[1].Lacks(tc.c); a != tc.lacksA || b != tc.lacksB {
			t.Errorf("cursor %+v: lacks %v, %v; want %v, %v", tc.c, a, b, tc.lacksA, tc.lacksB)
		}
	}
}
