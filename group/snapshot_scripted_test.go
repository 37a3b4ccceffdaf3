package group_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/group/grouptest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// The snapshot's logic on scripted sources: the rows a source's table
// holds are served by grouptest's snapshot connection in key order by
// chunks of three, each chunk read when the test steps it, while the test
// appends live changes.

// snapSpec is one scripted source s0 with an initial snapshot in chunks
// of three rows.
func snapSpec() *spec.Spec {
	ds := scriptSpec(1, spec.ShardDDLPassthrough)
	ds.Snapshot, ds.SnapshotChunkRows = spec.SnapshotInitial, 3
	return ds
}

func ins(r []change.Value) grouptest.Change    { return grouptest.Change{After: r} }
func del(r []change.Value) grouptest.Change    { return grouptest.Change{Before: r} }
func upd(b, a []change.Value) grouptest.Change { return grouptest.Change{Before: b, After: a} }
func valuesText(r []change.Value) string       { return fmt.Sprint(r...) }
func rowsOf(rs [][]change.Value) map[int64]string {
	out := map[int64]string{}
	for _, r := range rs {
		out[r[0].(int64)] = valuesText(r)
	}
	return out
}

// applyStrict applies txs to rows as a consumer keyed by id does, and
// reports any change that finds the key in the wrong state (an INSERT
// of a row there, an UPDATE or DELETE of one not): a live change that
// went out before its key's snapshot row.
func applyStrict(t *testing.T, rows map[int64]string, txs ...scriptedTx) {
	t.Helper()
	for _, x := range txs {
		for _, rc := range x.changes {
			if rc.HasBefore() {
				b := rc.Before()
				if _, ok := rows[b[0].(int64)]; !ok {
					t.Errorf("%s: %s of id %d, which the consumer has no row of", x, rc.Kind, b[0])
				}
				delete(rows, b[0].(int64))
			}
			if rc.HasAfter() {
				a := rc.After()
				if _, ok := rows[a[0].(int64)]; ok && rc.Kind == change.Insert {
					t.Errorf("%s: INSERT of id %d, which the consumer has a row of already", x, a[0])
				}
				rows[a[0].(int64)] = valuesText(a)
			}
		}
	}
}

// applyMultiset applies txs to rows, a multiset of whole rows (by
// valuesText), as a consumer of a table without a key does, and reports
// a change of a row the consumer has none of.
func applyMultiset(t *testing.T, rows map[string]int, txs ...scriptedTx) {
	t.Helper()
	for _, x := range txs {
		for _, rc := range x.changes {
			if rc.HasBefore() {
				k := valuesText(rc.Before())
				if rows[k] == 0 {
					t.Errorf("%s: %s of %s, which the consumer has no row of", x, rc.Kind, k)
				}
				rows[k]--
			}
			if rc.HasAfter() {
				rows[valuesText(rc.After())]++
			}
		}
	}
}

// checkMultiset checks that rows (applyMultiset's) holds the source's
// rows, each as many times.
func checkMultiset(t *testing.T, rows map[string]int, source [][]change.Value) {
	t.Helper()
	maps.DeleteFunc(rows, func(_ string, n int) bool { return n == 0 })
	src := map[string]int{}
	for _, row := range source {
		src[valuesText(row)]++
	}
	if !maps.Equal(rows, src) {
		t.Errorf("the stream applied gives %v; the source holds %v", rows, src)
	}
}

// checkDense checks txs' seqs follow one another from first.
func checkDense(t *testing.T, first uint64, txs []scriptedTx) {
	t.Helper()
	for i, x := range txs {
		if x.seq != first+uint64(i) {
			t.Errorf("transaction %d is %s; want seq %d", i, x, first+uint64(i))
		}
	}
}

// TestSnapshotGateScripted: chunks and live changes interleaved give the
// source's rows, each change applying to a consumer that has its key's
// snapshot row (the gate leaves out a change to a key whose chunk is not
// out yet: its chunk brings it), with dense seqs. A change the chunk's
// SELECT missed, made before its high watermark, is folded into it.
func TestSnapshotGateScripted(t *testing.T) {
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, tbl := srcs.Log("s0"), orders("shop_0")
	s0.Tables(tbl)
	s0.Load(tbl, row(1, "a"), row(2, "b"), row(3, "c"), row(4, "d"), row(5, "e"), row(6, "f"), row(7, "g"), row(8, "h"))
	s0.HoldChunks()
	d := runScripted(t, group.Config{Spec: snapSpec(), Sources: srcs, Clock: clock})
	var got []scriptedTx
	s0.Step(nil) // ids 1-3
	got = append(got, d.next(t))
	// 2 is out: its change goes out; 5, 7 and 9 are not: left out.
	s0.Write(scriptT0, tbl, upd(row(2, "b"), row(2, "b2")), upd(row(5, "e"), row(5, "e2")), ins(row(9, "i")), del(row(7, "g")))
	got = append(got, d.next(t))
	// Ids 4-6, selected before 4 and 1 change: 1's change goes out, 4's
	// is folded into the chunk, which follows it.
	s0.Step(func() {
		s0.Write(scriptT0.Add(time.Second), tbl, upd(row(4, "d"), row(4, "d2")), upd(row(1, "a"), row(1, "a2")))
	})
	got = append(got, d.next(t), d.next(t))
	s0.Step(nil) // 8 and 9: the last chunk
	got = append(got, d.next(t))
	s0.Write(scriptT0.Add(2*time.Second), tbl, upd(row(9, "i"), row(9, "i2")), del(row(3, "c")))
	got = append(got, d.next(t))
	d.none(t)

	shapes := []string{}
	for _, x := range got {
		kind := "live"
		if x.snapshot {
			kind = "chunk"
		}
		shapes = append(shapes, fmt.Sprint(kind, x.ids))
	}
	want := []string{"chunk[1 2 3]", "live[2]", "live[1]", "chunk[4 5 6]", "chunk[8 9]", "live[9 3]"}
	if !slices.Equal(shapes, want) {
		t.Errorf("went out %v; want %v", shapes, want)
	}
	checkDense(t, got[0].seq, got)
	rows := map[int64]string{}
	applyStrict(t, rows, got...)
	if src := rowsOf(s0.Rows(tbl)); !maps.Equal(rows, src) {
		t.Errorf("the stream applied gives %v; the source holds %v", rows, src)
	}
}

// TestSnapshotChunkBackoffScripted: a chunk that fails is read again
// after the backoff (100 ms, then 200 ms), which only the clock moves.
func TestSnapshotChunkBackoffScripted(t *testing.T) {
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, tbl := srcs.Log("s0"), orders("shop_0")
	s0.Tables(tbl)
	s0.Load(tbl, row(1, "a"), row(2, "b"))
	s0.FailChunks(2)
	d := runScripted(t, group.Config{Spec: snapSpec(), Sources: srcs, Clock: clock})
	for i, backoff := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		retry.Until(t, 10*time.Second, func() error {
			if clock.Timers(backoff) == 0 {
				return fmt.Errorf("after %d failed chunks the snapshot does not wait %s", i+1, backoff)
			}
			return nil
		})
		if n := s0.Chunks(); n != i+1 {
			t.Fatalf("%d chunks read before the backoff of %s passed; want %d", n, backoff, i+1)
		}
		clock.Advance(backoff - time.Millisecond)
		if clock.Timers(backoff) != 1 {
			t.Fatalf("the backoff of %s ended before it passed", backoff)
		}
		clock.Advance(time.Millisecond)
	}
	x := d.next(t)
	if !x.snapshot || !slices.Equal(x.ids, []int64{1, 2}) || s0.Chunks() != 3 {
		t.Errorf("after two failures went out %s with %d chunks read; want the chunk of ids 1, 2 read the third time", x, s0.Chunks())
	}
	d.none(t)
}

// TestSnapshotRestartScripted: a destination restarted mid-snapshot from
// a cursor, with its placement log, emits the chunks kept at the points
// they went out (selecting their key ranges again) and the live
// transactions around them with the same seqs, then reads the next chunk.
func TestSnapshotRestartScripted(t *testing.T) {
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, tbl := srcs.Log("s0"), orders("shop_0")
	s0.Tables(tbl)
	s0.Load(tbl, row(1, "a"), row(2, "b"), row(3, "c"), row(4, "d"), row(5, "e"), row(6, "f"), row(7, "g"))
	s0.HoldChunks()
	keep := &group.MemKeeper{}
	first := runScripted(t, group.Config{Spec: snapSpec(), Sources: srcs, Clock: clock, Keep: keep})
	s0.Step(nil)
	a := first.next(t) // chunk 1-3
	s0.Write(scriptT0, tbl, upd(row(2, "b"), row(2, "b2")))
	b := first.next(t)
	s0.Step(nil)
	c := first.next(t) // chunk 4-6
	s0.Write(scriptT0.Add(time.Second), tbl, upd(row(5, "e"), row(5, "e2")), ins(row(10, "j")))
	e := first.next(t) // 5 goes out, 10 is left out
	first.none(t)
	if log, _ := keep.Placements(); len(log) != 2 {
		t.Fatalf("the placement log holds %+v; want the two chunks", log)
	}

	again := runScripted(t, group.Config{Spec: snapSpec(), Sources: srcs, Clock: clock, Resume: a.cursor, Keep: keep})
	x := again.next(t)
	s0.Step(nil) // the kept chunk, selected again
	got := []scriptedTx{x, again.next(t), again.next(t)}
	for i, want := range []scriptedTx{b, c, e} {
		if x := got[i]; x.seq != want.seq || x.snapshot != want.snapshot || x.pos != want.pos || !slices.Equal(x.ids, want.ids) {
			t.Errorf("after restart %s; the first run gave it %s", x, want)
		}
	}
	s0.Step(nil) // then the next chunk: 7 and 10
	f := again.next(t)
	if !f.snapshot || f.seq != e.seq+1 || !slices.Equal(f.ids, []int64{7, 10}) {
		t.Errorf("after the kept chunks went out %s; want the chunk of 7 and 10 at seq %d", f, e.seq+1)
	}
	again.none(t)
	rows := map[int64]string{}
	applyStrict(t, rows, append([]scriptedTx{a}, append(got, f)...)...)
	if src := rowsOf(s0.Rows(tbl)); !maps.Equal(rows, src) {
		t.Errorf("the stream applied gives %v; the source holds %v", rows, src)
	}
}

// TestSnapshotChunksAheadScripted: while a chunk waits for the reader to
// pass its high watermark, the next chunk is read. Here strict order
// holds s1's live transactions until the silent s0 heartbeats, they fill
// s1's queue, and its reader cannot pass the watermarks: read one at a
// time, the snapshot would wait there, chunk after chunk (a MariaDB
// source under a writer waits so for the next second, its commit times'
// grain). Once the reader passes, the chunks go out in key order, each
// with the changes made to its keys while it waited.
func TestSnapshotChunksAheadScripted(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	ds.Snapshot, ds.SnapshotChunkRows = spec.SnapshotInitial, 3
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, s1, tbl := srcs.Log("s0"), srcs.Log("s1"), orders("shop_1")
	s0.Tables() // no table: its snapshot is done at once
	s1.Tables(tbl)
	s1.Load(tbl, row(1, "a"), row(2, "b"), row(3, "c"), row(4, "d"), row(5, "e"), row(6, "f"), row(7, "g"), row(8, "h"), row(9, "i"))
	s1.HoldChunks()
	d := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, QueueEvents: 2})
	s1.Step(nil)
	got := []scriptedTx{d.next(t)} // ids 1-3: nothing ahead of it
	// Changes of keys out, which strict order holds: they fill the queue.
	past := scriptT0.Add(-time.Minute)
	for i, note := range []string{"a", "b", "c"} {
		id := int64(i + 1)
		s1.Write(past, tbl, upd(row(id, note), row(id, note+"2")))
	}
	// Ids 4-6, then 7-9 read while 4-6 waits (Step waits for the
	// destination to ask for the chunk), each with a change after its
	// SELECT; 4's DELETE goes out after 4-6 does.
	s1.Step(func() { s1.Write(past, tbl, upd(row(5, "e"), row(5, "e2"))) })
	s1.Step(func() { s1.Write(past, tbl, upd(row(8, "h"), row(8, "h2")), del(row(4, "d"))) })
	s0.Heartbeat(false)
	for range 6 {
		got = append(got, d.next(t))
	}
	d.none(t)
	var shapes []string
	for _, x := range got {
		kind := "live"
		if x.snapshot {
			kind = "chunk"
		}
		shapes = append(shapes, fmt.Sprint(kind, x.ids))
	}
	want := []string{"chunk[1 2 3]", "live[1]", "live[2]", "live[3]", "chunk[4 5 6]", "live[4]", "chunk[7 8 9]"}
	if !slices.Equal(shapes, want) {
		t.Errorf("went out %v; want %v", shapes, want)
	}
	checkDense(t, got[0].seq, got)
	rows := map[int64]string{}
	applyStrict(t, rows, got...)
	if src := rowsOf(s1.Rows(tbl)); !maps.Equal(rows, src) {
		t.Errorf("the stream applied gives %v; the source holds %v", rows, src)
	}
}

// startOnePiece runs a scripted group of two sources for a table the
// snapshot reads in one piece: s1's shop_1.orders (qty, code), keyed (by
// the VARCHAR code) or keyless, loaded with rows (r's), its chunks held
// (HoldChunks); inexact, its server does not tell the snapshot's binlog
// position, as MySQL. s0 has no tables. queueEvents is the group's
// QueueEvents (0: the default).
func startOnePiece(t *testing.T, keyed, inexact bool, queueEvents int, rows ...[]change.Value) (s0, s1 *grouptest.Log, tbl *change.Table, d *scripted) {
	t.Helper()
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	ds.Snapshot, ds.SnapshotChunkRows = spec.SnapshotInitial, 3
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, s1 = srcs.Log("s0"), srcs.Log("s1")
	// qty first: the scripted destination names a change by its first
	// column.
	tbl = &change.Table{Schema: "shop_1", Name: "orders", Columns: []change.Column{
		{Name: "qty", Type: "int", RawType: "int(11)"},
		{Name: "code", Type: "varchar", RawType: "varchar(20)", Key: keyed}}}
	s0.Tables()
	s1.Tables(tbl)
	s1.Load(tbl, rows...)
	s1.HoldChunks()
	if inexact {
		s1.Inexact()
	}
	return s0, s1, tbl, runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, QueueEvents: queueEvents})
}

// qtyCode is a row of startOnePiece's table.
func qtyCode(qty int64, code string) []change.Value { return []change.Value{qty, code} }

// TestSnapshotOnePieceLagScripted: a table read in one piece (its key is
// a VARCHAR, or it has none) while the source's reader lags behind the
// server. Strict order holds s1's queue until the silent s0 heartbeats,
// so the reader passes an INSERT, an UPDATE and a DELETE only after the
// chunk's SELECT has seen them: the chunk must not apply them again (a
// keyless table's rows would repeat), while it applies those made after
// its SELECT. The stream applied as a multiset of rows must equal the
// source's rows. keyless-mysql: the server does not tell the snapshot's
// binlog position (MySQL), so every change of the window is reconciled
// by the whole row.
func TestSnapshotOnePieceLagScripted(t *testing.T) {
	for _, c := range []struct {
		name           string
		keyed, inexact bool
	}{{"keyless", false, false}, {"keyless-mysql", false, true}, {"varchar-key", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			// QueueEvents 2: the reader stops behind a few transactions.
			s0, s1, tbl, d := startOnePiece(t, c.keyed, c.inexact, 2, qtyCode(1, "a"), qtyCode(2, "b"), qtyCode(3, "c"), qtyCode(5, "e"))
			// Transactions of the table, left out while it is read, fill
			// s1's queue: the reader stops behind them.
			past := scriptT0.Add(-time.Minute)
			for i := range int64(3) {
				s1.Write(past, tbl, ins(qtyCode(10+i, "x")))
				s1.Write(past, tbl, del(qtyCode(10+i, "x")))
			}
			s1.Write(past, tbl, ins(qtyCode(4, "d")), upd(qtyCode(1, "a"), qtyCode(11, "a")), del(qtyCode(2, "b")), upd(qtyCode(5, "e"), qtyCode(6, "f")))
			// The SELECT sees them all, the reader has not passed them;
			// it misses the changes made after it, which the chunk brings.
			s1.Step(func() { s1.Write(past, tbl, ins(qtyCode(7, "g")), upd(qtyCode(3, "c"), qtyCode(8, "c"))) })
			s0.Heartbeat(false)
			var got []scriptedTx
			for {
				x := d.next(t)
				got = append(got, x)
				if x.snapshot {
					break
				}
			}
			d.none(t)
			rows := map[string]int{}
			applyMultiset(t, rows, got...)
			checkMultiset(t, rows, s1.Rows(tbl))
		})
	}
}

// TestSnapshotKeylessUnseenScripted: a transaction is in the binlog
// before a keyless chunk's SELECT but not yet visible to it (the server
// writes the binlog, then commits in the engine). The chunk's low
// watermark is its snapshot's binlog position, before that transaction,
// so the chunk applies it; taken as the end of binlog, it counted the
// transaction as seen and its UPDATE and INSERT were lost. On a server
// that does not tell the position (mysql) the window is reconciled by
// the whole row, to the same rows.
func TestSnapshotKeylessUnseenScripted(t *testing.T) {
	for _, inexact := range []bool{false, true} {
		name := "mariadb"
		if inexact {
			name = "mysql"
		}
		t.Run(name, func(t *testing.T) {
			s0, s1, tbl, d := startOnePiece(t, false, inexact, 0, qtyCode(1, "a"), qtyCode(2, "b"), qtyCode(3, "c"))
			past := scriptT0.Add(-time.Minute)
			s1.WriteUnseen(past, tbl, upd(qtyCode(1, "a"), qtyCode(1, "a2")), ins(qtyCode(4, "d")))
			// The SELECT runs without it; it shows, and a DELETE follows
			// before the chunk's high watermark.
			s1.Step(func() {
				s1.Show()
				s1.Write(past, tbl, del(qtyCode(2, "b")))
			})
			s0.Heartbeat(false)
			rows := map[string]int{}
			for {
				x := d.next(t)
				applyMultiset(t, rows, x)
				if x.snapshot {
					break
				}
			}
			d.none(t)
			checkMultiset(t, rows, s1.Rows(tbl))
		})
	}
}

// TestSnapshotChunkAfterReached: a run resumed from a slow client's
// cursor, mid-snapshot, reads no new chunk (one the earlier run had not
// emitted by the furthest client's cursor, Config.Reached) before it
// reaches that point: read at once, it would head s0's queue and go out
// at s1's seq, and the fast client, reading on after its cursor, would
// never see it.
func TestSnapshotChunkAfterReached(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	ds.Snapshot, ds.SnapshotChunkRows = spec.SnapshotInitial, 3
	srcs := grouptest.NewSources()
	s0, s1, tbl := srcs.Log("s0"), srcs.Log("s1"), orders("shop_0")
	s0.Tables(tbl)
	s0.Load(tbl, row(1, "a"), row(2, "b"), row(3, "c"), row(4, "d"))
	s0.HoldChunks()
	keep := &group.MemKeeper{}
	clock := grouptest.NewClock(scriptT0)
	first := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Keep: keep})
	s0.Step(nil)
	a := first.next(t) // chunk 1-3
	clock.Advance(10 * time.Second)
	s0.Heartbeat(false) // s0 promises t0 + 9s
	s1.Tx(scriptT0.Add(5*time.Second), orders("shop_1"), row(20, "x"))
	b := first.next(t) // out at once: s0 bounds nothing below t0 + 9s
	first.none(t)
	if !a.snapshot || b.source != "s1" {
		t.Fatalf("the first run emitted %s, %s; want s0's chunk, then s1's transaction", a, b)
	}

	// Read again at t0, s0's heartbeat promises only t0 - 1s: s1's
	// transaction waits for s0. A chunk asked for now is read only past
	// the point (a run that reads it at once sends it at s1's seq).
	clock = grouptest.NewClock(scriptT0)
	again := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock, Keep: keep,
		Resume: a.cursor, Reached: b.cursor})
	stepped := make(chan struct{})
	go func() { s0.Step(nil); close(stepped) }()
	select {
	case <-stepped: // read at once
	case <-time.After(time.Second): // or not: the heartbeat below lets s1's go first
	}
	clock.Advance(10 * time.Second)
	s0.Heartbeat(false)
	if x := again.next(t); x.seq != b.seq || x.source != "s1" || !slices.Equal(x.ids, b.ids) {
		t.Fatalf("after restart %s went out first; the first run gave seq %d to %s", x, b.seq, b)
	}
	if y := again.next(t); !y.snapshot || y.seq != b.seq+1 || !slices.Equal(y.ids, []int64{4}) {
		t.Errorf("then %s; want the chunk of 4 at seq %d", y, b.seq+1)
	}
	<-stepped
}

// TestSnapshotKeepsLossMarker: a LOST marker (a transaction of no rows
// naming the transactions a failover lost) that comes while the source's
// snapshot runs goes out: the gate, which turns a transaction all of
// whose rows it left out into progress, leaves the marker alone.
func TestSnapshotKeepsLossMarker(t *testing.T) {
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, tbl := srcs.Log("s0"), orders("shop_0")
	s0.Tables(tbl)
	s0.Load(tbl, row(1, "a"), row(2, "b"), row(3, "c"), row(4, "d"))
	s0.HoldChunks()
	d := runScripted(t, group.Config{Spec: snapSpec(), Sources: srcs, Clock: clock})
	s0.Step(nil)
	if a := d.next(t); !a.snapshot {
		t.Fatalf("first %s; want the chunk of 1-3", a)
	}
	s0.Marker("0-1-9", "0-1-8") // the snapshot still runs: 4 is left
	if x := d.next(t); x.lost != "0-1-9" {
		t.Fatalf("then %s; want the marker of 0-1-9", x)
	}
}
