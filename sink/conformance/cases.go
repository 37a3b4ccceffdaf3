package conformance

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// testApply: two shard tables merged to one logical table and applied
// while they change: inserts of every kind of value the suite has,
// updates with their before images (amounts, JSON, a unique code moved
// from one row to another, a key changed, values set NULL), deletes, and
// an ALTER both shards run (one shard DDL). Once caught up the target
// equals the sources row by row, and a keyed target applied nothing
// twice and missed nothing.
func testApply(e *env) {
	e.create()
	d := e.start(e.spec(e.sink("copy")), &group.FileStore{Dir: e.t.TempDir()})
	for r := range 4 {
		if r == 2 {
			e.alter()
		}
		for n := range shards {
			e.write(n, r)
		}
	}
	d.equal()
	d.exactlyOnce("after the workload")
	if e.h.Ordered {
		e.messages(d.ds.Sinks[0])
		return
	}
	d.verify()
	e.checkpoints(d.ds.Sinks[0], true)
}

// testWorkers: a keyed target's checkpoints keep how many workers wrote
// them, as a key's worker depends on the count: the sink restarted with
// another count refuses to apply, naming both, and writes nothing; with
// the count it had it goes on. A sink that publishes in order has one
// worker, and a spec that gives it more is refused.
func testWorkers(e *env) {
	if e.h.Ordered {
		sk := e.sink("w")
		sk.Workers = 4
		ds := spec.Spec{Name: e.db, Tables: []string{e.db + `_\d+\.orders`},
			Sources: []spec.Source{{Name: "s", Address: e.srv.Addr()}}, Sinks: []spec.Sink{sk}}
		ds = ds.WithDefaults()
		if err := ds.Validate(); err == nil || !strings.Contains(err.Error(), "publishes in stream order with one worker") {
			e.t.Fatalf("a %s sink of 4 workers: %v, want it refused", sk.Type, err)
		}
		return
	}
	e.create()
	cursors := &group.FileStore{Dir: e.t.TempDir()}
	sk := e.sink("w")
	d := e.start(e.spec(sk), cursors)
	e.write(0, 0)
	d.equal()
	d.Close()
	before := e.sources()

	sk.Workers = 8
	d = e.start(e.spec(sk), cursors)
	e.write(1, 0)
	d.failed("written by 4 workers, the spec has 8")
	if got, err := e.target(sk); err != nil || !slices.Equal(got, before) {
		e.t.Fatalf("the sink that refused wrote to the target: %d rows, before %d (%v):\n%s", len(got), len(before), err, diff(got, before))
	}
	d.Close()

	sk.Workers = 4
	d = e.start(e.spec(sk), cursors)
	d.equal()
	d.exactlyOnce("with the count it had")
}

// testPartial: a shard writes an UPDATE with binlog_row_image MINIMAL,
// whose after image holds the changed column only. A target that applies
// it as the source wrote it ends equal to the sources; any other stops at
// it with an error that says so and what to set, and writes no column
// NULL (what it holds is nothing, or the rows as the INSERT wrote them).
func testPartial(e *env) {
	e.create()
	e.write(0, 0)
	inserted := e.sources()
	e.srv.Exec(e.t, "SET SESSION binlog_row_image = 'MINIMAL'",
		fmt.Sprintf("UPDATE %s.orders SET note = 'minimal ✓' WHERE id = %d", e.shard(0), id(0, 0, 0)))
	d := e.start(e.spec(e.sink("p")), nil)
	if e.h.PartialApplied {
		d.equal()
		return
	}
	d.failed("binlog_row_image is MINIMAL or NOBLOB on source s", "set binlog_row_image=FULL")
	if got, err := e.target(d.ds.Sinks[0]); err == nil && len(got) > 0 && !slices.Equal(got, inserted) {
		e.t.Fatalf("the target holds rows other than the INSERT's:\n%s", diff(got, inserted))
	}
}

// testCollision: two shard tables write key 1 into one target table.
// Without an origin column the sink stops at the second with an error
// naming the shard table that writes it, the one that holds it and
// origin_column, and shard 1's row of key 1 is not in the target; with
// one (_shard), both rows are kept, and a shard table's TRUNCATE deletes
// its rows only.
func testCollision(e *env) {
	e.create()
	e.srv.Exec(e.t, fmt.Sprintf("INSERT INTO %s.orders (id, code, amount, note) VALUES (1, 'a1', 1.50, 'zero')", e.shard(0)),
		fmt.Sprintf("INSERT INTO %s.orders (id, code, amount, note) VALUES (1, 'b1', 2.50, 'one'), (2, 'b2', 3.50, 'two')", e.shard(1)))
	plain := e.start(e.spec(e.sink("plain")), nil)
	plain.failed(fmt.Sprintf("s/%s.orders writes key id=1", e.shard(1)), fmt.Sprintf("written by s/%s.orders", e.shard(0)), "origin_column")
	got, _ := e.target(plain.ds.Sinks[0])
	for _, r := range got {
		if strings.HasPrefix(r, "1 | ") && strings.Contains(r, "| one |") {
			e.t.Fatalf("after the collision the target holds shard 1's row of key 1: %s", r)
		}
	}
	if len(got) > 2 {
		e.t.Fatalf("after the collision the target holds %d rows, want at most 2 (shard 0's, and shard 1's of key 2)", len(got))
	}
	plain.Close()

	// Another place, where the rows are kept apart by their origin.
	e.place = e.h.New(e.t)
	sk := e.sink("kept")
	sk.OriginColumn = "_shard"
	kept := e.start(e.spec(sk), nil)
	kept.caughtUp(e.originRows(0, 1))
	e.srv.Exec(e.t, fmt.Sprintf("TRUNCATE TABLE %s.orders", e.shard(1)))
	kept.caughtUp(e.originRows(0))
	kept.exactlyOnce("with an origin column")
}

// originRows are the rows of shards ns, each with its origin column.
func (e *env) originRows(ns ...int) []string {
	var out []string
	cs := append([]string{"_shard"}, e.columns()...)
	for _, n := range ns {
		for _, r := range e.srv.Query(e.t, fmt.Sprintf("SELECT '%s', %s FROM %s.orders", "s/"+e.shard(n)+".orders", strings.Join(e.columns(), ", "), e.shard(n))) {
			m := map[string]*string{}
			for i, c := range cs {
				if r[i] != "NULL" {
					m[c] = &r[i]
				}
			}
			out = append(out, row(m, cs))
		}
	}
	slices.Sort(out)
	return out
}

// testOnce: the sink stopped and started again between the sources'
// writes applies each change as the target promises: a keyed target
// none twice and none missed (no INSERT finds its key, no UPDATE or
// DELETE misses its row); a publisher every message, each with an id of
// its own, again only if it says so (Duplicates). A target that also
// takes mode: at-least-once applies the whole stream a second time from
// the start, as upserts, and ends equal.
func testOnce(e *env) {
	e.create()
	d := e.start(e.spec(e.sink("once")), &group.FileStore{Dir: e.t.TempDir()})
	for r := range 4 {
		for n := range shards {
			e.write(n, r)
		}
		if r == 0 || r == 2 {
			d.exactlyOnce(fmt.Sprintf("before the stop after round %d", r))
			d.Stop()
			d.Start()
		}
	}
	d.equal()
	d.exactlyOnce("after the last start")
	if e.h.Ordered {
		e.messages(d.ds.Sinks[0])
	}
	if !e.h.AtLeastOnce {
		return
	}
	d.Close()

	// At least once, in shard tables of their own: applied again from
	// the start, a row's INSERT finds its unique code on the row it moved
	// to, or its own row under the key it changed to; the upserts still
	// end equal to the sources.
	a := &env{t: e.t, h: e.h, srv: e.srv, db: "alo", place: e.h.New(e.t)}
	a.create()
	for r := range 2 {
		for n := range shards {
			a.write(n, r)
		}
	}
	sk := a.sink("alo")
	sk.Mode = spec.SinkAtLeastOnce
	first := a.start(a.spec(sk), nil)
	first.equal()
	applied, last := first.stats().Rows, first.head()
	first.Close()
	second := a.start(a.spec(sk), nil)
	second.least = last
	second.equal()
	a.checkpoints(second.ds.Sinks[0], false)
	sinktest.WaitFor(e.t, 30*time.Second, func() (bool, string) {
		st := second.stats()
		return st.Rows >= applied, fmt.Sprintf("at-least-once, the stream again from the start: %d row changes applied of %d, want all again", st.Rows, applied)
	})
	second.equal()
}

// testReplay: a sink restarted from an older cursor (saved after the
// first round), and then from none (the start of the stream), is handed
// again what it applied, and the target stays equal to the sources: a
// keyed target applies none of it (its checkpoints fence it), a
// publisher sends no message again unless it says so (Duplicates), and
// then only with the same ids.
func testReplay(e *env) {
	e.create()
	cursors := &group.FileStore{Dir: e.t.TempDir()}
	sk := e.sink("replay")
	ds := e.spec(sk)
	d := e.start(ds, cursors)
	for n := range shards {
		e.write(n, 0)
	}
	d.equal()
	old := d.savedCursor(cursors, d.head())
	for r := 1; r < 3; r++ {
		for n := range shards {
			e.write(n, r)
		}
	}
	d.equal()
	want := e.sources()
	last := d.head()
	d.Close()
	var before []Message
	if e.h.Ordered {
		before = e.messages(sk)
	}

	older := &group.FileStore{Dir: e.t.TempDir()}
	if err := older.Save(ds.Name, sink.ClientID(sk.Name), old); err != nil {
		e.t.Fatal(err)
	}
	for _, from := range []struct {
		name    string
		cursors group.CursorStore
	}{{"an older cursor", older}, {"the start of the stream", nil}} {
		d := e.start(ds, from.cursors)
		d.least = last
		d.caughtUp(want)
		if st := d.stats(); !e.h.Ordered && st.Rows != 0 {
			e.t.Fatalf("from %s: the stream read again applied %d row changes, want 0", from.name, st.Rows)
		}
		if e.h.Ordered {
			after := e.messages(sk)
			if !e.h.Duplicates && len(after) != len(before) {
				e.t.Fatalf("from %s: %d messages, before %d: the stream read again was published again", from.name, len(after), len(before))
			}
		}
		d.Close()
	}
}

// testRestart: the sink is stopped while it applies a backlog (large
// transactions, of 1,500 rows each, among hundreds of small ones, more
// than one store batch), in the middle of applying a batch, and started
// again: up to five backlogs, until two stops came in the middle. The
// target ends equal to the sources, a keyed target with nothing applied
// twice or missed in any run, a publisher with every message.
func testRestart(e *env) {
	e.create()
	d := e.start(e.spec(e.sink("restart")), &group.FileStore{Dir: e.t.TempDir()})
	mid := 0
	for r := 0; r < 5 && mid < 2; r++ {
		d.Stop()
		for n := range shards {
			e.write(n, r)
			e.bulk(n, r)
		}
		e.trickle(r%shards, r)
		want := e.sources()
		d.Start()
		// Polled closely, not every 100ms: a stop that comes late finds
		// the backlog applied. A publisher whose messages are sent and
		// not yet confirmed (Pending: a kafka transaction left open over
		// several store batches) is in the middle too.
		st := d.stats()
		for deadline := time.Now().Add(60 * time.Second); st.Rows == 0 && st.Pending == 0; st = d.stats() {
			if time.Now().After(deadline) {
				e.t.Fatalf("backlog %d: the sink applies nothing: %+v", r, st)
			}
			time.Sleep(time.Millisecond)
		}
		d.exactlyOnce(fmt.Sprintf("before stop %d", r))
		d.Stop()
		got, err := e.target(d.ds.Sinks[0])
		d.Start()
		if err == nil && slices.Equal(got, want) {
			e.t.Logf("backlog %d: applied whole before the stop", r)
			continue
		}
		mid++
		e.t.Logf("backlog %d: stopped with %d rows of %d in the target", r, len(got), len(want))
	}
	if mid == 0 {
		e.t.Fatal("no stop came before the sink had applied its backlog")
	}
	// A change after the backlog, so that the last run has a batch to
	// apply (and to say so) whatever the runs before it applied.
	e.write(0, 9)
	d.equal()
	d.exactlyOnce("after the last start")
	if e.h.Ordered {
		e.messages(d.ds.Sinks[0])
	}
}

// trickleRows is how many transactions trickle writes.
const trickleRows = 600

// trickle writes trickleRows transactions of one row each to shard n.
func (e *env) trickle(n, r int) {
	stmts := make([]string, trickleRows)
	for k := range stmts {
		i := int64(n)*1_000_000 + 800_000 + int64(r*trickleRows+k)
		stmts[k] = fmt.Sprintf("INSERT INTO %s.orders (id, code, amount, note) VALUES (%d, 't%d', 0.01, 'trickle')", e.shard(n), i, i)
	}
	e.srv.Exec(e.t, stmts...)
	e.changes += trickleRows
}

// bulkRows is how many rows bulk inserts in one transaction.
const bulkRows = 1500

// bulk inserts bulkRows rows into shard n in one transaction.
func (e *env) bulk(n, r int) {
	vals := make([]string, bulkRows)
	for k := range vals {
		i := int64(n)*1_000_000 + 500_000 + int64(r*bulkRows+k)
		vals[k] = fmt.Sprintf("(%d, 'b%d', %d.5, '2025-12-31 23:59:59.999999', 'bulk ✓ %d', '[%d]')", i, i, k, k, k)
	}
	e.srv.Exec(e.t, fmt.Sprintf("INSERT INTO %s.orders (id, code, amount, at, note, doc) VALUES %s", e.shard(n), strings.Join(vals, ", ")))
	e.changes += bulkRows
}

// messages checks the row messages of a publisher's table, once it has
// applied the stream: each (seq, n) there, and a transaction's n from 0
// with none missing; a row change in a message for each the sources
// wrote (two for a key change, if SplitKeyChanges); a message there twice
// only if Duplicates. It returns them.
func (e *env) messages(sk spec.Sink) []Message {
	e.t.Helper()
	want := e.changes
	if e.h.SplitKeyChanges {
		want += e.keyChanges
	}
	pub, ok := e.place.(Publisher)
	if !ok {
		e.t.Fatalf("the %s target is Ordered, its place no Publisher", sk.Type)
	}
	var ms []Message
	var why string
	sinktest.WaitFor(e.t, 30*time.Second, func() (bool, string) {
		var err error
		ms, err = pub.Messages(sk, e.table())
		if err != nil {
			return false, err.Error()
		}
		why = checkMessages(ms, want, e.h.Duplicates)
		return why == "", why
	})
	return ms
}

// checkMessages says what is wrong with ms ("": nothing): a message
// there twice (unless dups), or one of a transaction missing before its
// last, or row changes other than want in all (each counted once).
func checkMessages(ms []Message, want int, dups bool) string {
	type place struct {
		seq uint64
		n   int
	}
	seen := map[place]int{}
	last := map[uint64]int{}
	rows := 0
	for _, m := range ms {
		p := place{m.Seq, m.N}
		if seen[p]++; seen[p] == 1 {
			rows += m.Rows
		} else if !dups {
			return fmt.Sprintf("message %s is there %d times", m, seen[p])
		}
		last[m.Seq] = max(last[m.Seq], m.N)
	}
	for seq, n := range last {
		for i := range n {
			if seen[place{seq, i}] == 0 {
				return fmt.Sprintf("message %d:%d is missing, %d:%d is there", seq, i, seq, n)
			}
		}
	}
	if rows != want {
		return fmt.Sprintf("%d row changes in %d distinct messages (%d delivered), want %d", rows, len(seen), len(ms), want)
	}
	return ""
}

// testLease: while the node may not hand the destination's events out
// (sink.Runner.Live fails: an owner past its lease), the sink applies
// and publishes nothing, though the store holds a backlog, nor does it
// when the lease runs out while it waits for a batch (Live holds when
// asked before the wait and fails when asked after it); once Live holds,
// it catches up, exactly once.
func testLease(e *env) {
	e.create()
	const (
		fenced   = iota // Live fails
		flapping        // Live holds and fails in turn, each time asked
		live            // Live holds
	)
	var state, calls atomic.Int32
	d := &dest{e: e, ds: e.spec(e.sink("lease")), cursors: &group.FileStore{Dir: e.t.TempDir()},
		log: slog.New(slog.NewTextHandler(e.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		live: func() error {
			n := calls.Add(1)
			if s := state.Load(); s == live || s == flapping && n%2 == 0 {
				return nil
			}
			return errors.New("node n1 cannot confirm it still owns destination lease")
		}}
	d.p = Pipeline(e.t, d.ds, d.cursors, d.log)
	d.Start()
	e.t.Cleanup(d.Close)
	for phase, s := range []int32{fenced, flapping} {
		state.Store(s)
		for n := range shards {
			e.write(n, phase)
		}
		// The pipeline has the changes (its head is past them) well
		// before this wait ends; a sink that ignored Live would have
		// applied them.
		head := d.head()
		sinktest.WaitFor(e.t, 30*time.Second, func() (bool, string) {
			return d.head() > head, fmt.Sprintf("the pipeline's head is at seq %d", d.head())
		})
		time.Sleep(time.Second)
		// The sink's own count, not the target's: a publisher's harness
		// waits for the queue the sink declares when it first publishes.
		if st := d.stats(); st.Rows != 0 || st.Pending != 0 || st.AppliedSeq != 0 {
			e.t.Fatalf("phase %d: the sink applied while the node could not hand events out: %+v", phase, st)
		}
	}
	state.Store(live)
	d.equal()
	d.exactlyOnce("after the lease holds again")
	if e.h.Ordered {
		e.messages(d.ds.Sinks[0])
	}
}
