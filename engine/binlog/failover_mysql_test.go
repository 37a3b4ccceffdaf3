package binlog_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
	"github.com/braid-cdc/braid/spec"
)

// mysqlHistory is a MySQL primary and replica (mysqlsource.History) whose
// shop.orders has a BIGINT id, created on both.
type mysqlHistory struct {
	primary, replica *mysqlsource.Server
	h                *mysqlsource.History
}

func startMySQLHistory(t *testing.T) *mysqlHistory {
	t.Helper()
	m := &mysqlHistory{
		primary: mysqlsource.Start(t, mysqlsource.Config{ServerID: 1, ServerUUID: "11111111-1111-1111-1111-111111111111"}),
		replica: mysqlsource.Start(t, mysqlsource.Config{ServerID: 2, ServerUUID: "22222222-2222-2222-2222-222222222222"}),
	}
	var err error
	if m.h, err = mysqlsource.NewHistory(m.primary, m.replica); err != nil {
		t.Fatal(err)
	}
	orders := &mysqlbinlog.TableDef{Schema: "shop", Name: "orders", PrimaryKey: []string{"id"},
		Columns: []mysqlbinlog.ColumnDef{{Name: "id", Type: "bigint", NotNull: true}}}
	m.commit(t, mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}})
	m.commit(t, mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: orders}})
	return m
}

func (m *mysqlHistory) commit(t *testing.T, txn mysqlbinlog.Txn) {
	t.Helper()
	if _, err := m.h.Commit(txn); err != nil {
		t.Fatal(err)
	}
}

func (m *mysqlHistory) insert(t *testing.T, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		m.commit(t, mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.orders",
			Rows: []mysqlbinlog.Row{{After: []any{id}}}}}})
	}
}

// insertedIDs is the ids of the INSERTs among evs, in order.
func insertedIDs(t *testing.T, evs []*change.Event) []int64 {
	t.Helper()
	var out []int64
	for _, d := range flatData(t, evs) {
		id, err := strconv.ParseInt(flatText(d["id"]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// TestSwitchBetweenCheckAndDump: the virtual IP moves to the replica
// after the reader asked who answers (the primary, whose position it
// holds) and before its binlog connection. The binlog connection is the
// replica's: the reader must notice (the stream's first event names
// another server_id, or the replica refuses the primary's position),
// connect again, find the replica, and resume there by GTID: every row
// once, in order, and the replica named as the server read. The old code
// read the replica's binlog at the primary's file:pos (or stopped on its
// refusal), its cursor naming the primary.
func TestSwitchBetweenCheckAndDump(t *testing.T) {
	for _, c := range []struct {
		name string
		lag  bool // the replica lacks the primary's last transaction: it refuses the position
	}{{"refused", true}, {"same offsets", false}} {
		t.Run(c.name, func(t *testing.T) {
			m := startMySQLHistory(t)
			// The replica's binlog lines up with the primary's byte for
			// byte: the primary's position is a transaction boundary
			// there too (or, lagging, past its end). Only the server_id
			// of the stream's first event says whose it is.
			m.h.SameCommitTimes = true
			m.insert(t, 1, 2, 3)
			n := 5
			if c.lag {
				n = 4
			}
			if err := m.h.Apply(m.replica, n); err != nil {
				t.Fatal(err)
			}
			vip := tcpproxy.Start(t, m.primary.Addr())
			var armed atomic.Bool
			restore := binlog.SetBeforeDump(func() {
				if armed.CompareAndSwap(true, false) {
					vip.SwitchKeep(m.replica.Addr())
				}
			})
			t.Cleanup(restore)
			r := startReader(t, binlog.Config{Source: spec.Source{Name: "m8", Address: vip.Addr(), User: "root", Start: earliest},
				Heartbeat: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, nil)
			p := r.reader
			r.waitFor(60*time.Second, "ids 1..3", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 3 })

			armed.Store(true)
			vip.Cut() // the reader connects again; the address moves in between
			retry.Until(t, 60*time.Second, func() error {
				if armed.Load() {
					return fmt.Errorf("the reader has not connected again")
				}
				return nil
			})
			if err := m.h.CatchUp(m.replica); err != nil {
				t.Fatal(err)
			}
			m.h.Promote(m.replica)
			m.insert(t, 4, 5)
			evs := r.waitFor(60*time.Second, "ids 1..5", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 5 })
			if got := insertedIDs(t, evs); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
				t.Fatalf("ids %v, want 1..5 once each, in order", got)
			}
			st := p.Stats()
			if st.Server == nil || st.Server.ID != 2 || st.Switches != 1 {
				t.Fatalf("reading %s after %d switches, want the replica (server_id 2) after 1", st.Server, st.Switches)
			}
			last := evs[len(evs)-1]
			if want := "11111111-1111-1111-1111-111111111111:1-5,22222222-2222-2222-2222-222222222222:1-2"; last.Server == nil || last.Server.ID != 2 {
				t.Fatalf("the last commit's position is in the binlog of %s, want the replica's", last.Server)
			} else if got := last.GTIDs.String(); got != want {
				t.Fatalf("GTID state %q after the last commit, want %q", got, want)
			}
		})
	}
}

// TestMySQLPositionStartSwitches: a reader started at a position inside
// a MySQL binlog file learns the executed GTID set there (reading the
// file up to it once), so that a switch of servers before the next file
// resumes by GTID: only the rows after the position, once each. The old
// code did not know the set until the next file and stopped the source.
func TestMySQLPositionStartSwitches(t *testing.T) {
	m := startMySQLHistory(t)
	m.insert(t, 1)
	at, err := m.h.Commit(mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.orders",
		Rows: []mysqlbinlog.Row{{After: []any{int64(2)}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	m.insert(t, 3)
	if err := m.h.CatchUp(m.replica); err != nil { // at other offsets: each transaction 7 bytes longer
		t.Fatal(err)
	}
	vip := tcpproxy.Start(t, m.primary.Addr())
	start := spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: at.File, Pos: at.End}}
	r := startReader(t, binlog.Config{Source: spec.Source{Name: "m8", Address: vip.Addr(), User: "root", Start: start},
		Heartbeat: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, nil)
	evs := r.waitFor(60*time.Second, "id 3", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 1 })
	var commit *change.Event
	for _, ev := range evs {
		if ev.Type == change.EventCommit {
			commit = ev
		}
	}
	if want := "11111111-1111-1111-1111-111111111111:1-5"; commit == nil || commit.GTIDs.String() != want {
		t.Fatalf("the commit of id 3 carries GTID state %v, want %s", commit, want)
	}

	vip.Switch(m.replica.Addr())
	m.h.Promote(m.replica)
	m.insert(t, 4)
	evs = r.waitFor(60*time.Second, "ids 3, 4", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 2 })
	if got := insertedIDs(t, evs); !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("ids %v, want [3 4]", got)
	}
	if st := r.reader.Stats(); st.Switches != 1 || st.Server == nil || st.Server.ID != 2 {
		t.Fatalf("reading %s after %d switches, want the replica after 1", st.Server, st.Switches)
	}
}

// startLossFailover is the lost-transaction tests' setup: ids 1, 2
// committed on the primary, the replica applied through id 1 only, and a
// reader through a virtual IP that has read both ids. failover promotes
// the replica (id 2 is lost there), moves the virtual IP to it and
// commits id 3 on it. addr is the virtual IP's address.
func startLossFailover(t *testing.T) (r *run, addr string, failover func()) {
	t.Helper()
	m := startMySQLHistory(t)
	m.insert(t, 1, 2)
	if err := m.h.Apply(m.replica, 3); err != nil { // DDL, DDL, id 1
		t.Fatal(err)
	}
	vip := tcpproxy.Start(t, m.primary.Addr())
	r = startReader(t, binlog.Config{Source: spec.Source{Name: "m8", Address: vip.Addr(), User: "root", Start: earliest},
		Heartbeat: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, nil)
	r.waitFor(60*time.Second, "ids 1, 2", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 2 })
	return r, vip.Addr(), func() {
		t.Helper()
		m.h.Promote(m.replica)
		vip.Switch(m.replica.Addr())
		m.insert(t, 3)
	}
}

// TestMySQLPromotedServerLostTransactions: the replica promoted before it
// applied the primary's last transaction, which braid emitted: braid
// names it as lost (Stats.Lost) and waits, emitting nothing from the new
// server. The old code took it for a lagging replica.
func TestMySQLPromotedServerLostTransactions(t *testing.T) {
	r, _, failover := startLossFailover(t)
	failover()
	retry.Until(t, 60*time.Second, func() error {
		if lost := r.reader.Stats().Lost; lost != "11111111-1111-1111-1111-111111111111:4" {
			return fmt.Errorf("Stats.Lost is %q, want the primary's 4th GTID", lost)
		}
		return nil
	})
	if got := insertedIDs(t, r.snapshot()); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("ids %v while waiting, want [1 2]", got)
	}
}

// TestMySQLAcceptedLossGoesOn: as above; the loss accepted
// (AcceptLoss), the reader goes on on the promoted server from the
// cursor's executed set less the lost GTID: a marker transaction naming
// it first, then the server's own transaction (id 3), once. Refused
// loss or none, Loss says nothing is waited on.
func TestMySQLAcceptedLossGoesOn(t *testing.T) {
	r, _, failover := startLossFailover(t)
	if _, ok := r.reader.Loss(); ok {
		t.Fatal("a loss before the failover")
	}
	failover()
	l := r.waitLoss(60 * time.Second)
	if l.Lost != "11111111-1111-1111-1111-111111111111:4" {
		t.Fatalf("the loss waited on is %+v, want the primary's 4th GTID", l)
	}
	r.reader.AcceptLoss(l)
	r.waitFor(60*time.Second, "id 3 after the marker", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 3 })
	evs := r.snapshot()
	if got := insertedIDs(t, evs); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("ids %v, want [1 2 3]", got)
	}
	marker := slices.IndexFunc(evs, func(ev *change.Event) bool { return ev.Type == change.EventBegin && ev.Lost != "" })
	if marker < 0 || evs[marker].Lost != l.Lost || evs[marker+1].Type != change.EventCommit || evs[marker+1].Lost != l.Lost ||
		!slices.Equal(insertedIDs(t, evs[:marker]), []int64{1, 2}) || !slices.Equal(insertedIDs(t, evs[marker+2:]), []int64{3}) {
		t.Fatalf("marker at %d of %d events: want a marker transaction naming %s between ids 1, 2 and id 3", marker, len(evs), l.Lost)
	}
	if got := evs[marker+1].GTIDs.String(); got != "11111111-1111-1111-1111-111111111111:1-3" {
		t.Errorf("the marker's boundary is at %q, want the cursor's set less the lost GTID", got)
	}
	if got := evs[marker].GTIDs.String(); got != evs[marker+1].GTIDs.String() {
		t.Errorf("the marker's begin carries %q, its commit %q: the merge places a marker by its begin's", got, evs[marker+1].GTIDs)
	}
	if _, ok := r.reader.Loss(); ok {
		t.Error("a loss still waited on after the accept")
	}
}

// resumeAfter is the cursor after the nth (from 0) transaction with rows
// among evs, as a destination keeps it.
func resumeAfter(t *testing.T, evs []*change.Event, n int) *binlog.Resume {
	t.Helper()
	for i, ev := range evs {
		if ev.Type != change.EventCommit || ev.Lost != "" {
			continue
		}
		if n--; n < 0 {
			return &binlog.Resume{Pos: ev.Pos, GTIDs: ev.GTIDs.String(), Server: ev.Server, Schema: lastSchema(evs[:i+1])}
		}
	}
	t.Fatalf("fewer commits than asked for among %d events", len(evs))
	return nil
}

// afterMarker is the ids after the LOST marker among evs, and whether
// one came, naming lost.
func afterMarker(t *testing.T, evs []*change.Event, lost string) ([]int64, bool) {
	t.Helper()
	i := slices.IndexFunc(evs, func(ev *change.Event) bool { return ev.Type == change.EventBegin && ev.Lost == lost })
	if i < 0 {
		return nil, false
	}
	return insertedIDs(t, evs[i:]), true
}

// TestMySQLPositionBeforeLossStops: after the loss of id 2 was accepted
// and the live reader went on (the marker, then id 3), a reader resuming
// from a cursor before it (after id 1, on the old primary) on the
// promoted server stops with ErrLostBefore: read on, it would give id 3
// without id 2 and the marker. One from the loss's point goes on as the
// live reader did. The old code read on from after id 1.
func TestMySQLPositionBeforeLossStops(t *testing.T) {
	r, addr, failover := startLossFailover(t)
	evs := r.snapshot()
	before, atLoss := resumeAfter(t, evs, 0), resumeAfter(t, evs, 1)
	failover()
	l := r.waitLoss(60 * time.Second)
	r.reader.AcceptLoss(l)
	evs = r.waitFor(60*time.Second, "id 3 after the marker", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 3 })
	if got, ok := afterMarker(t, evs, l.Lost); !ok || !slices.Equal(got, []int64{3}) {
		t.Fatalf("the live reader after the marker: %v (marker %v); want id 3", got, ok)
	}

	stopped := startReader(t, binlog.Config{Source: spec.Source{Name: "m8", Address: addr, User: "root", Start: earliest},
		Heartbeat: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Resume: before, Accepted: []change.Loss{l}}, nil)
	if err := stopped.runErr(60 * time.Second); !errors.Is(err, binlog.ErrLostBefore) {
		t.Fatalf("from before the loss: %v; want ErrLostBefore", err)
	}
	if got := insertedIDs(t, stopped.snapshot()); len(got) > 0 {
		t.Errorf("from before the loss the reader emitted ids %v; want none", got)
	}

	goesOn := startReader(t, binlog.Config{Source: spec.Source{Name: "m8", Address: addr, User: "root", Start: earliest},
		Heartbeat: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Resume: atLoss, Accepted: []change.Loss{l}}, nil)
	evs = goesOn.waitFor(60*time.Second, "id 3", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 1 })
	if got, ok := afterMarker(t, evs, l.Lost); !ok || !slices.Equal(insertedIDs(t, evs), []int64{3}) || !slices.Equal(got, []int64{3}) {
		t.Fatalf("from the loss's point: ids %v (marker %v); want the marker, then id 3, as the live reader", insertedIDs(t, evs), ok)
	}
}

// TestMySQLReplayWaitsForLive: a replay reader (Config.Live) from a
// cursor before the loss (after id 1) resumes on the promoted server,
// which holds its position but not id 2, which the live reader read: it
// waits rather than read on into the server's own history (id 3, at the
// seq the stream gave id 2), and once the accept is kept (Losses) stops
// with ErrLostBefore. A replay reader from the loss's point waits too,
// then goes on as the live reader did: the marker, then id 3. The old
// code read on from after id 1 at once.
func TestMySQLReplayWaitsForLive(t *testing.T) {
	r, addr, failover := startLossFailover(t)
	evs := r.snapshot()
	before, atLoss := resumeAfter(t, evs, 0), resumeAfter(t, evs, 1)
	// What the live reader has read, id 2 with it.
	var readByLive string
	retry.Until(t, 60*time.Second, func() error {
		if readByLive = r.reader.Stats().GTIDs.String(); readByLive != "11111111-1111-1111-1111-111111111111:1-4" {
			return fmt.Errorf("the live reader has read %q, want through id 2", readByLive)
		}
		return nil
	})
	var mu sync.Mutex
	var kept []change.Loss
	losses := func() []change.Loss {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(kept)
	}
	failover()
	replay := func(from *binlog.Resume, waits *logline.Watch) *run {
		return startReader(t, binlog.Config{Source: spec.Source{Name: "m8", Address: addr, User: "root", Start: earliest},
			Heartbeat: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Resume: from,
			Live: func() string { return readByLive }, Losses: losses, Logger: slog.New(waits)}, nil)
	}
	beforeWaits := logline.New(slog.NewTextHandler(t.Output(), nil), "a replay reader waits")
	stopped := replay(before, beforeWaits)
	atWaits := logline.New(slog.NewTextHandler(t.Output(), nil), "the server that answers is writable")
	goesOn := replay(atLoss, atWaits)
	for _, w := range []*logline.Watch{beforeWaits, atWaits} {
		select {
		case <-w.Seen():
		case <-time.After(60 * time.Second):
			t.Fatalf("no replay reader waiting after a minute; ids from before the loss %v, from its point %v",
				insertedIDs(t, stopped.snapshot()), insertedIDs(t, goesOn.snapshot()))
		}
	}
	if a, b := insertedIDs(t, stopped.snapshot()), insertedIDs(t, goesOn.snapshot()); len(a)+len(b) > 0 {
		t.Fatalf("the replay readers emitted ids %v and %v while waiting; want none", a, b)
	}

	l := r.waitLoss(60 * time.Second)
	mu.Lock()
	kept = append(kept, l)
	mu.Unlock()
	r.reader.AcceptLoss(l)
	live := r.waitFor(60*time.Second, "id 3 after the marker", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 3 })
	want, _ := afterMarker(t, live, l.Lost)
	if err := stopped.runErr(60 * time.Second); !errors.Is(err, binlog.ErrLostBefore) {
		t.Fatalf("the replay from before the loss: %v; want ErrLostBefore", err)
	}
	if got := insertedIDs(t, stopped.snapshot()); len(got) > 0 {
		t.Errorf("the replay from before the loss emitted ids %v; want none", got)
	}
	evs = goesOn.waitFor(60*time.Second, "id 3", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 1 })
	if got, ok := afterMarker(t, evs, l.Lost); !ok || !slices.Equal(insertedIDs(t, evs), want) || !slices.Equal(want, []int64{3}) {
		t.Fatalf("the replay from the loss's point: ids %v (marker %v); the live reader's after the marker %v, want [3]", got, ok, want)
	}
}

// TestMySQLPositionInsideLossStops: the promoted replica lacks ids 2
// and 3, which the live reader emitted; after the accept, a reader from
// the cursor between them (after id 2) on the promoted server stops with
// ErrLostInside: id 3 is on no server. The old code read on from there
// (id 4, without id 3 and the marker).
func TestMySQLPositionInsideLossStops(t *testing.T) {
	m := startMySQLHistory(t)
	m.insert(t, 1, 2, 3)
	if err := m.h.Apply(m.replica, 3); err != nil { // DDL, DDL, id 1
		t.Fatal(err)
	}
	vip := tcpproxy.Start(t, m.primary.Addr())
	src := spec.Source{Name: "m8", Address: vip.Addr(), User: "root", Start: earliest}
	r := startReader(t, binlog.Config{Source: src, Heartbeat: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, nil)
	evs := r.waitFor(60*time.Second, "ids 1..3", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 3 })
	inside := resumeAfter(t, evs, 1)
	m.h.Promote(m.replica)
	vip.Switch(m.replica.Addr())
	m.insert(t, 4)
	l := r.waitLoss(60 * time.Second)
	if l.Lost != "11111111-1111-1111-1111-111111111111:4-5" {
		t.Fatalf("the loss waited on is %+v, want ids 2 and 3's GTIDs", l)
	}
	r.reader.AcceptLoss(l)
	evs = r.waitFor(60*time.Second, "id 4 after the marker", func(evs []*change.Event) bool { return len(insertedIDs(t, evs)) >= 4 })
	if got, ok := afterMarker(t, evs, l.Lost); !ok || !slices.Equal(got, []int64{4}) {
		t.Fatalf("the live reader after the marker: %v (marker %v); want id 4", got, ok)
	}
	stopped := startReader(t, binlog.Config{Source: src, Heartbeat: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Resume: inside, Accepted: []change.Loss{l}}, nil)
	if err := stopped.runErr(60 * time.Second); !errors.Is(err, binlog.ErrLostInside) {
		t.Fatalf("from inside the loss: %v; want ErrLostInside", err)
	}
	if got := insertedIDs(t, stopped.snapshot()); len(got) > 0 {
		t.Errorf("from inside the loss the reader emitted ids %v; want none", got)
	}
}
