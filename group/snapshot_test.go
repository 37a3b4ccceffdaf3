package group_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

// snapshotShards starts three servers holding shop_0 … shop_5.orders
// (server i: shop_i and shop_{i+3}) with rows rows in all, ids 1..n per
// table.
func snapshotShards(t *testing.T, rows int) []*mysqltest.Server {
	t.Helper()
	srvs := mysqltest.StartN(t, 3)
	per := rows / 6
	for i, s := range srvs {
		for _, db := range []int{i, i + 3} {
			s.Exec(t, "CREATE DATABASE IF NOT EXISTS seq", fmt.Sprintf("CREATE DATABASE shop_%d", db),
				fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, note VARCHAR(40), amount DECIMAL(10,2), made DATETIME(3), UNIQUE KEY (note))", db),
				fmt.Sprintf("INSERT INTO shop_%d.orders SELECT seq, CONCAT('n', %d, '-', seq), seq / 7, '2026-01-02 03:04:05.678' + INTERVAL seq SECOND FROM seq.seq_1_to_%d", db, db, per))
		}
	}
	return srvs
}

func snapshotSpec(srvs []*mysqltest.Server, chunk int) *spec.Spec {
	s := shopSpec(srvs, spec.Start{Kind: spec.StartLatest}, "strict")
	s.Snapshot, s.SnapshotChunkRows = spec.SnapshotInitial, chunk
	return s
}

// snapshotWriter updates, deletes and inserts rows of the shards until
// stopped: what a snapshot must reconcile.
type snapshotWriter struct {
	stop   chan struct{}
	done   sync.WaitGroup
	writes atomic.Int64
	once   sync.Once
}

func startSnapshotWriter(t *testing.T, srvs []*mysqltest.Server, rows int) *snapshotWriter {
	w := &snapshotWriter{stop: make(chan struct{})}
	per := rows / 6
	for i, s := range srvs {
		w.done.Go(func() {
			c := s.Conn(t)
			r := rand.New(rand.NewPCG(uint64(i), 7))
			next := per + 1
			for n := 0; ; n++ {
				select {
				case <-w.stop:
					return
				default:
				}
				db := i + 3*(n%2)
				id := 1 + r.IntN(per)
				var err error
				switch n % 5 {
				case 0, 1:
					_, err = c.Execute(fmt.Sprintf("UPDATE shop_%d.orders SET amount = amount + 1, note = CONCAT(note, 'u') WHERE id = %d", db, id))
				case 2:
					_, err = c.Execute(fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id = %d", db, id))
				case 3:
					_, err = c.Execute(fmt.Sprintf("INSERT INTO shop_%d.orders (id, note, amount, made) VALUES (%d, 'new%d-%d', 1.5, NOW(3))", db, next, db, next))
					next++
				case 4:
					// A key change: the row moves far ahead of the snapshot.
					_, err = c.Execute(fmt.Sprintf("UPDATE shop_%d.orders SET id = id + 1000000 WHERE id = %d", db, id))
				}
				if err != nil {
					t.Errorf("writer: %v", err)
					return
				}
				w.writes.Add(1)
			}
		})
	}
	return w
}

// more waits until the writer has made 100 writes more.
func (w *snapshotWriter) more(t *testing.T) {
	t.Helper()
	n := w.writes.Load() + 100
	retry.Until(t, 30*time.Second, func() error {
		if w.writes.Load() < n {
			return fmt.Errorf("%d writes, want %d", w.writes.Load(), n)
		}
		return nil
	})
}

// waitChunks waits until c's destination has emitted n snapshot chunks.
func waitChunks(t *testing.T, c *collector, n int) {
	t.Helper()
	retry.Until(t, 60*time.Second, func() error {
		got := 0
		for _, ev := range c.snapshot() {
			if ev.Snapshot && ev.Type == change.EventCommit {
				got++
			}
		}
		if got < n {
			return fmt.Errorf("only %d chunks out, want %d", got, n)
		}
		return nil
	})
}

// halt stops the writer (once) and waits for it.
func (w *snapshotWriter) halt() {
	w.once.Do(func() { close(w.stop) })
	w.done.Wait()
}

// rowText is a row's columns as text, joined.
func rowText(rc *change.RowChange, after bool) string {
	var b []byte
	for i := range rc.Table.Columns {
		if i > 0 {
			b = append(b, '|')
		}
		var null bool
		if b, null = rc.AppendText(b, after, i); null {
			b = append(b, "NULL"...)
		}
	}
	return string(b)
}

// applied is what a consumer applying the stream in seq order holds:
// rows by origin table and id, and what it found wrong on the way.
type applied struct {
	rows     map[string]string
	problems []string
	snapRows int
	lastSeq  uint64
}

func apply(events []*change.Event) *applied {
	a := &applied{rows: map[string]string{}}
	for _, ev := range events {
		if ev.Seq != 0 && ev.Seq < a.lastSeq {
			a.problems = append(a.problems, fmt.Sprintf("seq %d after %d", ev.Seq, a.lastSeq))
		}
		a.lastSeq = ev.Seq
		for i := range ev.Rows {
			rc := &ev.Rows[i]
			key := func(after bool) string {
				var b []byte
				b, _ = rc.AppendText(b, after, 0)
				return rc.Table.FullName() + ":" + string(b)
			}
			if ev.Snapshot {
				a.snapRows++
			}
			if rc.HasBefore() {
				k := key(false)
				if _, ok := a.rows[k]; !ok && len(a.problems) < 10 {
					a.problems = append(a.problems, fmt.Sprintf("seq %d: %s of %s before its row", ev.Seq, rc.Kind, k))
				}
				delete(a.rows, k)
			}
			if rc.HasAfter() {
				a.rows[key(true)] = rowText(rc, true)
			}
		}
	}
	return a
}

// sourceRows reads every shard table as the consumer should hold it.
func sourceRows(t *testing.T, srvs []*mysqltest.Server) map[string]string {
	out := map[string]string{}
	for i, s := range srvs {
		for _, db := range []int{i, i + 3} {
			for _, r := range s.Query(t, fmt.Sprintf("SELECT id, note, amount, made FROM shop_%d.orders", db)) {
				out[fmt.Sprintf("shop_%d.orders:%s", db, r[0])] = strings.Join(r, "|")
			}
		}
	}
	return out
}

// caughtUp waits until every source's cursor is at its server's end of
// binlog.
func caughtUp(t *testing.T, c *collector, srvs []*mysqltest.Server) {
	t.Helper()
	retry.Until(t, 60*time.Second, func() error {
		st := c.dest.Stats()
		for i, s := range srvs {
			file, pos := s.MasterStatus(t)
			if st.Sources[i].Pos.Compare(change.Position{File: file, Pos: pos}) < 0 {
				return fmt.Errorf("source %d at %s, its server at %s:%d", i, st.Sources[i].Pos, file, pos)
			}
			if sn := st.Sources[i].Snapshot; sn != nil && !sn.Done {
				return fmt.Errorf("source %d's snapshot not done: %+v", i, sn)
			}
		}
		return nil
	})
}

// TestSnapshotEqualsSources: existing rows come as snapshot chunks while
// a writer changes them; applying the stream in seq order gives the
// sources' rows, and no change of a key comes before its row.
func TestSnapshotEqualsSources(t *testing.T) {
	const rows = 60000
	srvs := snapshotShards(t, rows)
	ds := snapshotSpec(srvs, 1000)
	keep := &group.MemKeeper{}
	c := collect(t, group.Config{Spec: ds, Keep: keep})
	w := startSnapshotWriter(t, srvs, rows)
	waitSnapshotDone(t, c)
	w.more(t) // live changes after it too
	w.halt()
	caughtUp(t, c, srvs)
	a := apply(c.snapshot())
	for _, p := range a.problems {
		t.Error(p)
	}
	sinktest.SameRows(t, a.rows, sourceRows(t, srvs))
	chunks, _ := keep.Placements()
	n := len(chunks)
	if a.snapRows < rows/2 || n < rows/1000 {
		t.Errorf("%d snapshot rows in %d chunks: want most of %d rows in at least %d chunks", a.snapRows, n, rows, rows/1000)
	}
	t.Logf("%d snapshot rows in %d chunks, %d writes during it", a.snapRows, n, w.writes.Load())
}

// waitSnapshotDone waits until c's destination has emitted every
// source's snapshot, failing if it stops.
func waitSnapshotDone(t *testing.T, c *collector) {
	t.Helper()
	retry.Until(t, 60*time.Second, func() error {
		select {
		case err := <-c.done:
			close(c.done)
			t.Fatalf("the destination stopped: %v", err)
		default:
		}
		if !snapshotDone(c.dest) {
			return fmt.Errorf("snapshot not done: %+v", c.dest.Stats().Sources)
		}
		return nil
	})
}

func snapshotDone(d *group.Destination) bool {
	for _, s := range d.Stats().Sources {
		if s.Snapshot == nil || !s.Snapshot.Done {
			return false
		}
	}
	return true
}

var _ = context.Background

// txShapes are what transactions must be again in a replay: each one's
// source, whether it is a snapshot chunk, and a live one's rows.
func txShapes(events []*change.Event, from, to uint64) map[uint64]string {
	out := map[uint64]string{}
	for _, ev := range events {
		if ev.Seq <= from || ev.Seq > to {
			continue
		}
		s := out[ev.Seq]
		if s == "" {
			s = fmt.Sprintf("%s snapshot=%v", ev.Source, ev.Snapshot)
		}
		for i := range ev.Rows {
			rc := &ev.Rows[i]
			if ev.Snapshot {
				// A chunk read again holds its rows as they are then
				// (some or none), in as many events as they take.
				continue
			}
			s += fmt.Sprintf(" %s %s", rc.Kind, rowText(rc, rc.HasAfter()))
		}
		out[ev.Seq] = s
	}
	return out
}

// lastWhole is the seq of the last transaction of events out whole.
func lastWhole(events []*change.Event) uint64 {
	var end uint64
	for _, ev := range events {
		if ev.Type == change.EventCommit || ev.Type == change.EventDDL {
			end = ev.Seq
		}
	}
	return end
}

// cursorMidSnapshot returns the last cursor c kept at or below seq limit
// while a source's snapshot was under way, and its seq.
func (c *collector) cursorMidSnapshot(t *testing.T, limit uint64) (*group.Cursor, uint64) {
	t.Helper()
	var cursor *group.Cursor
	var at uint64
	c.mu.Lock()
	defer c.mu.Unlock()
	for seq, cur := range c.cursors {
		started := slices.ContainsFunc(cur.Sources, func(s group.SourceCursor) bool { return s.Snapshot != nil && !s.Snapshot.Done })
		if seq <= limit && seq > at && started {
			cursor, at = cur, seq
		}
	}
	if cursor == nil {
		t.Fatalf("no cursor at or below seq %d while the snapshot was under way", limit)
	}
	return cursor, at
}

// TestSnapshotResumesWithSameSeqs: a destination restarted from a cursor
// early in the snapshot of three sources read in parallel, with every
// chunk the first run kept (it emitted the whole snapshot), emits the
// same transactions with the same seqs (the kept chunks where they went,
// their key ranges read again, among the live transactions), and the
// stream before the cursor plus the restart's equals the sources. (The
// logic of a restart mid-snapshot is TestSnapshotRestartScripted.)
func TestSnapshotResumesWithSameSeqs(t *testing.T) {
	const parallelism = 3
	const rows = 30000
	srvs := snapshotShards(t, rows)
	ds := snapshotSpec(srvs, 500)
	ds.SnapshotParallelism = parallelism
	keep := &group.MemKeeper{}
	first := collect(t, group.Config{Spec: ds, Keep: keep})
	w := startSnapshotWriter(t, srvs, rows)
	defer w.halt()
	// Stop the first run well into the snapshot, and pick a cursor half
	// way through what it emitted.
	waitChunks(t, first, 24)
	waitSnapshotDone(t, first)
	w.more(t) // live transactions after it
	first.stop(t)
	events := first.snapshot()
	end := lastWhole(events)
	cursor, at := first.cursorMidSnapshot(t, end/4)
	chunks, _ := keep.Placements()
	second := collect(t, group.Config{Spec: ds, Resume: cursor, Keep: keep})
	waitSnapshotDone(t, second)
	w.halt()
	caughtUp(t, second, srvs)
	again := second.snapshot()
	want, got := txShapes(events, at, end), txShapes(again, at, end)
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("seqs %d..%d: %d transactions first, %d again", at+1, end, len(want), len(got))
	}
	for seq := at + 1; seq <= end; seq++ {
		if got[seq] != want[seq] {
			t.Fatalf("seq %d: first %q, again %q", seq, want[seq], got[seq])
		}
	}
	var before []*change.Event
	for _, ev := range events {
		if ev.Seq <= at {
			before = append(before, ev)
		}
	}
	// The chunks read again hold their rows as they are now, so the
	// changes that follow them in the replay may delete or update rows
	// already gone from them: apply finds those, and only those.
	a := apply(append(before, again...))
	for _, p := range a.problems {
		if !strings.Contains(p, "before its row") {
			t.Error(p)
		}
	}
	sinktest.SameRows(t, a.rows, sourceRows(t, srvs))
	all, _ := keep.Placements()
	t.Logf("resumed after seq %d of %d (%d chunks kept), %d chunks in all", at, end, len(chunks), len(all))
}

// TestSnapshotThroughShardDDL: an online ALTER of every shard table while
// the snapshot reads them (a pessimistic shard-DDL lock holds the shard
// tables that ran it until all have): the chunks of the tables altered
// are read again with their new columns, the lock releases, and the
// stream still equals the sources.
func TestSnapshotThroughShardDDL(t *testing.T) {
	const rows = 120000
	srvs := snapshotShards(t, rows)
	ds := snapshotSpec(srvs, 500)
	ds.ShardDDL = spec.ShardDDLPessimistic
	ds.SnapshotParallelism = 1
	c := collect(t, group.Config{Spec: ds})
	w := startSnapshotWriter(t, srvs, rows)
	defer w.halt()
	waitChunks(t, c, 10)
	for i, s := range srvs {
		for _, db := range []int{i, i + 3} {
			s.Exec(t, fmt.Sprintf("ALTER TABLE shop_%d.orders ADD COLUMN extra INT NULL, ALGORITHM=INPLACE, LOCK=NONE", db))
		}
	}
	waitSnapshotDone(t, c)
	w.halt()
	caughtUp(t, c, srvs)
	a := apply(c.snapshot())
	for _, p := range a.problems {
		t.Error(p)
	}
	got := map[string]string{}
	for k, v := range a.rows {
		got[k] = strings.TrimSuffix(v, "|NULL") // the column added, NULL everywhere
	}
	sinktest.SameRows(t, got, sourceRows(t, srvs))
}

// TestSnapshotTextEqualsBinlog: a snapshot row is printed exactly as the
// binlog prints the same row, for every column type braid reads raw
// (limits, zeros, NULLs, random values), whether it goes out as the
// server's text or, changes folded in, as Values.
func TestSnapshotTextEqualsBinlog(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, mysqltest.EveryFastType(t)...)
	ds := &spec.Spec{Name: "types", Tables: []string{`d\.t2?`}, Snapshot: spec.SnapshotInitial, ShardDDL: spec.ShardDDLPassthrough,
		Sources: []spec.Source{{Name: "a", Address: srv.Addr()}}}
	*ds = ds.WithDefaults()
	c := collect(t, group.Config{Spec: ds})
	waitSnapshotDone(t, c)
	srv.Exec(t, "CREATE TABLE d.t2 LIKE d.t", "INSERT INTO d.t2 SELECT * FROM d.t")
	want := srv.Query(t, "SELECT COUNT(*) FROM d.t")[0][0]
	text := func(rc *change.RowChange) (id string, cols []string) {
		for i := range rc.Table.Columns {
			b, null := rc.AppendJSON(nil, true, i)
			if null {
				b = []byte("null")
			}
			cols = append(cols, rc.Table.Columns[i].Name+"="+string(b))
		}
		return cols[0], cols
	}
	var snap, logged map[string][]string
	retry.Until(t, 30*time.Second, func() error {
		snap, logged = map[string][]string{}, map[string][]string{}
		for _, ev := range c.snapshot() {
			for i := range ev.Rows {
				rc := &ev.Rows[i]
				id, cols := text(rc)
				switch {
				case ev.Snapshot:
					snap[id] = cols
					// The same row as Values, as a chunk with changes
					// folded in sends it.
					asValues := change.NewValueRows(rc.Table, 0, [][]change.Value{rc.After()})
					if _, vcols := text(&asValues[0]); !slices.Equal(vcols, cols) {
						t.Errorf("row %s as Values:\n%v\nas text:\n%v", id, vcols, cols)
					}
				case rc.Table.Name == "t2" && rc.Kind == change.Insert:
					logged[id] = cols
				}
			}
		}
		if fmt.Sprint(len(logged)) != want {
			return fmt.Errorf("%d rows of d.t2 in the stream, want %s", len(logged), want)
		}
		return nil
	})
	if fmt.Sprint(len(snap)) != want {
		t.Fatalf("%d snapshot rows, the table has %s", len(snap), want)
	}
	for id, cols := range logged {
		for i, col := range cols {
			if snap[id][i] != col {
				t.Errorf("row %s: snapshot %s, binlog %s", id, snap[id][i], col)
			}
		}
	}
	t.Logf("%d rows of %d columns alike", len(logged), len(logged["id=\"1\""]))
}

// TestSnapshotKeylessTableEqualsSources: tables without a key are read
// in one piece each while a writer inserts, updates and deletes their
// rows on two sources, some of them rows identical to others; in strict
// order a source's reader lags behind its server, so it passes changes
// after a chunk's SELECT has seen them, and sync_binlog=1 puts an fsync
// between a transaction's binlog write and its engine commit (as on a
// durable production server), so a chunk's SELECT often starts while a
// transaction already in the binlog is not yet visible. The stream
// applied as a multiset of rows gives the sources' rows: no row twice (a
// change the SELECT saw applied again), none missing (one it did not see
// taken for seen), identical rows in their number.
func TestSnapshotKeylessTableEqualsSources(t *testing.T) {
	const per, dbs = 2000, 4 // rows a table, tables a server
	srvs := mysqltest.StartN(t, 2, mysqltest.WithArgs("--sync-binlog=1"))
	for i, s := range srvs {
		s.Exec(t, "CREATE DATABASE IF NOT EXISTS seq")
		for k := range dbs {
			db := fmt.Sprintf("shop_%d", i*dbs+k)
			s.Exec(t, "CREATE DATABASE "+db,
				"CREATE TABLE "+db+".orders (qty INT NOT NULL, code VARCHAR(40) NOT NULL)",
				fmt.Sprintf("INSERT INTO %s.orders SELECT seq, CONCAT('c', seq) FROM seq.seq_1_to_%d", db, per))
		}
	}
	// Each statement touches one row of a table: an INSERT a new row or
	// a copy of one there (identical rows), an UPDATE or a DELETE one of
	// the rows of a qty.
	stop := make(chan struct{})
	var writers sync.WaitGroup
	var writes atomic.Int64
	for i, s := range srvs {
		writers.Go(func() {
			c := s.Conn(t)
			r := rand.New(rand.NewPCG(uint64(i), 11))
			next := per + 1
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				db := fmt.Sprintf("shop_%d", i*dbs+r.IntN(dbs))
				q := 1 + r.IntN(per)
				var err error
				switch n % 4 {
				case 0:
					_, err = c.Execute(fmt.Sprintf("INSERT INTO %s.orders VALUES (%d, 'new%d')", db, next, next))
					next++
				case 1:
					_, err = c.Execute(fmt.Sprintf("INSERT INTO %s.orders SELECT qty, code FROM %[1]s.orders WHERE qty = %d LIMIT 1", db, q))
				case 2:
					_, err = c.Execute(fmt.Sprintf("UPDATE %s.orders SET code = CONCAT(code, 'u') WHERE qty = %d LIMIT 1", db, q))
				case 3:
					_, err = c.Execute(fmt.Sprintf("DELETE FROM %s.orders WHERE qty = %d LIMIT 1", db, q))
				}
				if err != nil {
					t.Errorf("writer: %v", err)
					return
				}
				writes.Add(1)
			}
		})
	}
	halt := sync.OnceFunc(func() { close(stop); writers.Wait() })
	t.Cleanup(halt)
	retry.Until(t, 30*time.Second, func() error { // writing before the snapshot starts
		if writes.Load() < 50 {
			return fmt.Errorf("%d writes", writes.Load())
		}
		return nil
	})
	ds := shopSpec(srvs, spec.Start{Kind: spec.StartLatest}, "strict")
	ds.Snapshot = spec.SnapshotInitial
	c := collect(t, group.Config{Spec: ds})
	waitSnapshotDone(t, c)
	n := writes.Load() + 100
	retry.Until(t, 30*time.Second, func() error { // and after it
		if writes.Load() < n {
			return fmt.Errorf("%d writes, want %d", writes.Load(), n)
		}
		return nil
	})
	halt()
	caughtUp(t, c, srvs)
	got, problems := map[string]int{}, 0
	for _, ev := range c.snapshot() {
		for i := range ev.Rows {
			rc := &ev.Rows[i]
			if rc.HasBefore() {
				k := rc.Table.FullName() + ":" + rowText(rc, false)
				if got[k] == 0 && problems < 10 {
					problems++
					t.Errorf("seq %d: %s of %s, which the consumer has no row of", ev.Seq, rc.Kind, k)
				}
				got[k]--
			}
			if rc.HasAfter() {
				got[rc.Table.FullName()+":"+rowText(rc, true)]++
			}
		}
	}
	want, same := map[string]int{}, 0
	for i, s := range srvs {
		for k := range dbs {
			db := fmt.Sprintf("shop_%d", i*dbs+k)
			for _, r := range s.Query(t, "SELECT qty, code FROM "+db+".orders") {
				key := db + ".orders:" + strings.Join(r, "|")
				if want[key]++; want[key] == 2 {
					same++
				}
			}
		}
	}
	var wrong []string
	for k, n := range got {
		if n != want[k] {
			wrong = append(wrong, fmt.Sprintf("%s: %d in the stream, %d in the source", k, n, want[k]))
		}
	}
	for k, n := range want {
		if _, ok := got[k]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s: missing from the stream (%d in the source)", k, n))
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Errorf("%d rows differ (%d writes), first: %v", len(wrong), writes.Load(), wrong[:min(10, len(wrong))])
	}
	t.Logf("%d distinct rows in the sources (%d of them more than once), %d writes", len(want), same, writes.Load())
}
