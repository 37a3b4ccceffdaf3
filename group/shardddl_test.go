package group_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/group/grouptest"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

func pessimistic(ds *spec.Spec) *spec.Spec {
	ds.ShardDDL = spec.ShardDDLPessimistic
	return ds
}

// shardRow is one row change as the stream carried it.
type shardRow struct {
	seq    uint64
	shard  string // origin schema
	id     int64
	ncols  int
	cols   []string // column names
	logged string   // the logical table
}

// streamOf reads a collector's events as DDL statements and rows, in
// stream order.
func streamOf(c *collector) (ddl []*change.Event, rows []shardRow, order []any) {
	for _, ev := range c.snapshot() {
		switch ev.Type {
		case change.EventDDL:
			ddl = append(ddl, ev)
			order = append(order, ev)
		case change.EventRows:
			for i := range ev.Rows {
				rc := &ev.Rows[i]
				img := rc.After()
				if img == nil {
					img = rc.Before()
				}
				t := rc.Table
				r := shardRow{seq: ev.Seq, shard: t.Schema, id: img[0].(int64), ncols: len(t.Columns), logged: t.LogicalSchema + "." + t.LogicalName}
				for _, c := range t.Columns {
					r.cols = append(r.cols, c.Name)
				}
				rows = append(rows, r)
				order = append(order, r)
			}
		}
	}
	return ddl, rows, order
}

// writer inserts into every shard of srvs (server i holds shop_i and
// shop_{i+3}) until stopped, counting what it wrote per shard.
type writer struct {
	mu   sync.Mutex
	next [6]int64
	stop chan struct{}
	done chan struct{}
	srvs []*mysqltest.Server
}

func startWriter(t *testing.T, srvs []*mysqltest.Server) *writer {
	return startWriterOf(t, srvs, "INSERT INTO shop_%d.orders (id, note) VALUES (%d, 'w')")
}

// startWriterOf is startWriter with its own INSERT (shard, id).
func startWriterOf(t *testing.T, srvs []*mysqltest.Server, insert string) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan struct{}), srvs: srvs}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			for shard := range 6 {
				w.mu.Lock()
				w.next[shard]++
				id := w.next[shard]
				w.mu.Unlock()
				w.srvs[shard%3].Exec(t, fmt.Sprintf(insert, shard, id))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return w
}

// more waits until the writer has written n rounds (a row to each
// shard) more.
func (w *writer) more(t *testing.T, n int64) {
	t.Helper()
	w.mu.Lock()
	want := w.next[5] + n
	w.mu.Unlock()
	retry.Until(t, 30*time.Second, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.next[5] < want {
			return fmt.Errorf("the writer is at round %d, want %d", w.next[5], want)
		}
		return nil
	})
}

func (w *writer) halt() (total int) {
	close(w.stop)
	<-w.done
	for _, n := range w.next {
		total += int(n)
	}
	return total
}

// waitRows waits until the collector has n rows.
func waitRows(t *testing.T, c *collector, n int, d time.Duration) {
	t.Helper()
	retry.Until(t, d, func() error {
		if _, rows, _ := streamOf(c); len(rows) < n {
			return fmt.Errorf("%d rows, want %d", len(rows), n)
		}
		return nil
	})
}

// checkRows: every written row came exactly once.
func checkRows(t *testing.T, rows []shardRow, total int) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range rows {
		k := fmt.Sprintf("%s/%d", r.shard, r.id)
		if seen[k] {
			t.Fatalf("row %s came twice", k)
		}
		seen[k] = true
	}
	if len(seen) != total {
		t.Fatalf("%d rows came, %d were written", len(seen), total)
	}
}

// TestShardDDLOneAlter: six shard tables of shop.orders on three servers,
// written to throughout; each runs the same ALTER at a different moment.
// The stream has one CREATE TABLE and one ALTER TABLE of shop.orders,
// every row before the ALTER has the old columns and every row after it
// the new ones, and nothing is lost or doubled.
func TestShardDDLOneAlter(t *testing.T) {
	srvs := shards(t, time.Now().Add(-time.Minute)) // every CREATE before any ALTER, whatever the same second holds
	c := collect(t, group.Config{Spec: pessimistic(shopSpec(srvs, earliest, "strict"))})
	w := startWriter(t, srvs)
	for shard := range 6 {
		w.more(t, 10)
		spelling := []string{"ALTER TABLE shop_%d.orders ADD COLUMN c INT NULL", "alter table `shop_%d`.`orders` add column `c` int(11)"}[shard%2]
		srvs[shard%3].Exec(t, fmt.Sprintf(spelling, shard))
	}
	w.more(t, 10)
	total := w.halt()
	waitRows(t, c, total, 30*time.Second)

	ddl, rows, order := streamOf(c)
	var sqls []string
	for _, ev := range ddl {
		s, tb := ev.DDL.Logical()
		if s != "shop" || tb != "orders" {
			t.Errorf("DDL of %s.%s, want shop.orders: %s", s, tb, ev.DDL.SQL)
		}
		sqls = append(sqls, ev.DDL.SQL)
	}
	if len(sqls) != 2 || !strings.HasPrefix(sqls[0], "CREATE TABLE `shop`.`orders`") || sqls[1] != "ALTER TABLE `shop`.`orders` ADD COLUMN c INT NULL" {
		t.Fatalf("DDL in the stream: %q; want one CREATE TABLE and one ALTER TABLE of `shop`.`orders`", sqls)
	}
	checkRows(t, rows, total)
	altered := false
	for _, x := range order {
		switch x := x.(type) {
		case *change.Event:
			altered = strings.HasPrefix(x.DDL.SQL, "ALTER")
		case shardRow:
			if want := map[bool]int{false: 2, true: 3}[altered]; x.ncols != want {
				t.Fatalf("row %s/%d (seq %d) has %d columns, want %d (altered: %v)", x.shard, x.id, x.seq, x.ncols, want, altered)
			}
		}
	}
	checkSeqDense(t, c)
}

// checkSeqDense: seqs go up by one per transaction.
func checkSeqDense(t *testing.T, c *collector) {
	t.Helper()
	for i, x := range c.txs(t) {
		if x.seq != uint64(i+1) {
			t.Fatalf("transaction %d has seq %d: not dense", i, x.seq)
		}
	}
}

// TestShardDDLHeldUnlockReplay: only shop_0 runs the ALTER. Its later rows
// are held while the other shards' rows flow; the lock shows shop_0 done
// and five waiting; an unlock emits the DDL and then shop_0's held rows.
// A destination restarted from a cursor inside the lock, with the kept
// decision, emits the same stream with the same seqs.
func TestShardDDLHeldUnlockReplay(t *testing.T) {
	srvs := shards(t, time.Now().Add(-time.Minute)) // every CREATE before any ALTER, whatever the same second holds
	keep := &group.MemKeeper{}
	ds := pessimistic(shopSpec(srvs, earliest, "strict"))
	c := collect(t, group.Config{Spec: ds, Keep: keep})
	w := startWriter(t, srvs)
	w.more(t, 20)
	srvs[0].Exec(t, "ALTER TABLE shop_0.orders ADD COLUMN c INT NULL")

	// The lock, as the destination shows it, holding rows, and a
	// transaction out since it opened (its cursor holds the lock).
	var lock *group.DDLLock
	var inside *group.Cursor
	retry.Until(t, 10*time.Second, func() error {
		st := c.dest.ShardDDL()
		if st == nil || len(st.Locks) != 1 || st.Locks[0].HeldRows == 0 {
			return fmt.Errorf("no lock holding rows: %+v", st)
		}
		lock, inside = st.Locks[0], c.lastCursor()
		if inside == nil || inside.ShardDDL == nil || len(inside.ShardDDL.Locks) != 1 {
			return errors.New("no transaction out since the lock opened")
		}
		return nil
	})
	if !slices.Equal(lock.Done, []string{"s0/shop_0.orders"}) || len(lock.Waiting) != 5 || lock.Logical != "shop.orders" {
		t.Fatalf("lock %+v: want shop_0 done and five waiting", lock)
	}
	_, rows, _ := streamOf(c)
	var others, shop0After int
	for _, r := range rows {
		if r.shard != "shop_0" {
			others++
		} else if r.ncols == 3 {
			shop0After++
		}
	}
	if shop0After != 0 || others == 0 {
		t.Fatalf("while held: %d shop_0 rows with the new column came (want 0), %d rows of other shards (want some)", shop0After, others)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.dest.Decide(ctx, lock.ID+1, group.DecisionUnlock); err == nil {
		t.Fatal("a decision about a lock that is not open was taken")
	}
	if err := c.dest.Decide(ctx, lock.ID, group.DecisionUnlock); err != nil {
		t.Fatal(err)
	}
	w.more(t, 20)
	total := w.halt()
	waitRows(t, c, total, 30*time.Second)
	ddl, rows, order := streamOf(c)
	if n := len(ddl); n != 2 || ddl[1].DDL.SQL != "ALTER TABLE `shop`.`orders` ADD COLUMN c INT NULL" {
		t.Fatalf("%d DDL, last %q; want the CREATE and the unlocked ALTER", n, ddl[n-1].DDL.SQL)
	}
	checkRows(t, rows, total)
	// After the unlock's DDL: shop_0's held rows first, with the column.
	afterDDL := false
	for _, x := range order {
		if ev, ok := x.(*change.Event); ok {
			afterDDL = strings.HasPrefix(ev.DDL.SQL, "ALTER")
			continue
		}
		r := x.(shardRow)
		if r.shard == "shop_0" && !afterDDL && r.ncols == 3 {
			t.Fatalf("shop_0 row %d with the new column came before the DDL", r.id)
		}
	}
	checkSeqDense(t, c)
	decisions, _ := keep.Decisions()
	if len(decisions) != 1 || decisions[0].Lock != lock.ID || decisions[0].Action != group.DecisionUnlock {
		t.Fatalf("decisions kept: %+v", decisions)
	}
	want := c.snapshot()

	// The same from the cursor inside the lock, and from one in the
	// middle of the re-read of the held rows.
	c.stop(t)
	var midCatchUp *group.Cursor
	c.mu.Lock()
	for seq, cur := range c.cursors {
		if cur.ShardDDL != nil && len(cur.ShardDDL.CatchUps) > 0 && cur.ShardDDL.CatchUps[0].Sources[0].Pos != lock.Holds[0].From &&
			(midCatchUp == nil || seq < midCatchUp.Seq) {
			midCatchUp = cur
		}
	}
	c.mu.Unlock()
	if midCatchUp == nil {
		t.Fatal("no cursor in the middle of the re-read of the held rows")
	}
	for _, from := range []*group.Cursor{inside, midCatchUp} {
		again := collect(t, group.Config{Spec: ds, Resume: from, Keep: keep})
		var tail []*change.Event
		for _, ev := range want {
			if ev.Seq > from.Seq {
				tail = append(tail, ev)
			}
		}
		retry.Until(t, 30*time.Second, func() error {
			if n := len(again.snapshot()); n < len(tail) {
				return fmt.Errorf("replay from seq %d: %d events, want %d", from.Seq, n, len(tail))
			}
			return nil
		})
		got := again.snapshot()
		for i, ev := range tail {
			if g := got[i]; g.Seq != ev.Seq || g.Type != ev.Type || g.Source != ev.Source || g.Pos != ev.Pos || len(g.Rows) != len(ev.Rows) {
				t.Fatalf("replay from seq %d, event %d: seq %d %s %s %s, first run: seq %d %s %s %s", from.Seq, i, g.Seq, g.Type, g.Source, g.Pos, ev.Seq, ev.Type, ev.Source, ev.Pos)
			}
		}
		again.stop(t)
	}
}

// lastCursor is the cursor after the last transaction emitted.
func (c *collector) lastCursor() *group.Cursor {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last uint64
	for seq := range c.cursors {
		last = max(last, seq)
	}
	return c.cursors[last]
}

// TestShardDDLOptimisticAdd: in optimistic mode, an ADD COLUMN run by two
// of six shard tables goes out once, at the first; from there every row
// of shop.orders has the column, NULL for the shards that have not run
// it, and no row waits.
func TestShardDDLOptimisticAdd(t *testing.T) {
	srvs := shards(t, time.Now().Add(-time.Minute)) // every CREATE before any ALTER, whatever the same second holds
	ds := shopSpec(srvs, earliest, "strict")
	ds.ShardDDL = spec.ShardDDLOptimistic
	c := collect(t, group.Config{Spec: ds})
	w := startWriter(t, srvs)
	w.more(t, 20)
	srvs[0].Exec(t, "ALTER TABLE shop_0.orders ADD COLUMN c INT NULL")
	w.more(t, 20)
	srvs[1].Exec(t, "ALTER TABLE shop_1.orders ADD COLUMN c INT")
	w.more(t, 20)
	total := w.halt()
	waitRows(t, c, total, 30*time.Second)
	if st := c.dest.ShardDDL(); len(st.Locks) != 1 || !st.Locks[0].Optimistic || len(st.Locks[0].Waiting) != 4 || st.Locks[0].HeldRows != 0 {
		t.Fatalf("state %+v: want one optimistic entry waiting for four shards, holding nothing", st.Locks)
	}
	ddl, rows, order := streamOf(c)
	if len(ddl) != 2 || ddl[1].DDL.SQL != "ALTER TABLE `shop`.`orders` ADD COLUMN c INT NULL" {
		t.Fatalf("DDL %v: want the CREATE and one ALTER", ddl)
	}
	checkRows(t, rows, total)
	altered, padded := false, 0
	for _, x := range order {
		switch x := x.(type) {
		case *change.Event:
			altered = strings.HasPrefix(x.DDL.SQL, "ALTER")
		case shardRow:
			if want := map[bool]int{false: 2, true: 3}[altered]; x.ncols != want {
				t.Fatalf("row %s/%d has %d columns, want %d", x.shard, x.id, x.ncols, want)
			}
			if altered && x.shard != "shop_0" && x.shard != "shop_1" {
				padded++
			}
		}
	}
	if padded == 0 {
		t.Fatal("no row of a shard without the column came after the ALTER")
	}
	// The padded column reads NULL in every form a consumer reads.
	for _, ev := range c.snapshot() {
		if ev.Type != change.EventRows || ev.Rows[0].Table.Schema != "shop_2" || len(ev.Rows[0].Table.Columns) != 3 {
			continue
		}
		rc := &ev.Rows[0]
		if v := rc.After(); v[2] != nil || v[0] == nil {
			t.Fatalf("padded row's values %v: want c NULL", v)
		}
		if _, null := rc.AppendText(nil, true, 2); !null {
			t.Fatal("padded column's text is not NULL")
		}
		if offs := rc.RawOffsets(true); offs != nil && offs[2] != -1 {
			t.Fatalf("padded column's raw offset %d, want -1", offs[2])
		}
		break
	}
}

// TestShardDDLOptimisticDropAndConflict: in optimistic mode a DROP COLUMN
// goes out once, when the last of the six shard tables has run it; until
// then the rows of those that dropped it still show the column, NULL. Then
// shop_0 adds a column, out at once, and shop_1 adds the same column with
// another type: a conflict, named, holding shop_1's rows.
func TestShardDDLOptimisticDropAndConflict(t *testing.T) {
	srvs := shards(t, time.Now().Add(-time.Minute)) // every CREATE before any ALTER, whatever the same second holds
	ds := shopSpec(srvs, earliest, "strict")
	ds.ShardDDL = spec.ShardDDLOptimistic
	c := collect(t, group.Config{Spec: ds})
	w := startWriterOf(t, srvs, "INSERT INTO shop_%d.orders (id) VALUES (%d)")
	for shard := range 6 {
		w.more(t, 10)
		srvs[shard%3].Exec(t, fmt.Sprintf("ALTER TABLE shop_%d.orders DROP COLUMN note", shard))
	}
	w.more(t, 20)
	srvs[0].Exec(t, "ALTER TABLE shop_0.orders ADD COLUMN x INT NULL")
	w.more(t, 20)
	srvs[1].Exec(t, "ALTER TABLE shop_1.orders ADD COLUMN x BIGINT NULL")
	var lock *group.DDLLock
	retry.Until(t, 20*time.Second, func() error {
		if st := c.dest.ShardDDL(); st != nil {
			for _, l := range st.Locks {
				if !l.Optimistic && l.HeldRows > 0 {
					lock = l
					return nil
				}
			}
		}
		return fmt.Errorf("no conflict holding rows: %+v", c.dest.ShardDDL())
	})
	if _, ok := lock.Conflicts["s1/shop_1.orders"]; !ok || len(lock.Conflicts) != 1 {
		t.Fatalf("lock %+v: want shop_1's ADD x BIGINT named as a conflict", lock)
	}
	w.halt()
	ddl, _, order := streamOf(c)
	var sqls []string
	for _, ev := range ddl[1:] {
		sqls = append(sqls, ev.DDL.SQL)
	}
	slices.Sort(sqls)
	if want := []string{"ALTER TABLE `shop`.`orders` ADD COLUMN x INT NULL", "ALTER TABLE `shop`.`orders` DROP COLUMN note"}; !slices.Equal(sqls, want) ||
		!strings.HasPrefix(ddl[0].DDL.SQL, "CREATE") {
		t.Fatalf("DDL after the CREATE %q, want %q", sqls, want)
	}
	// Every row has the logical table's columns of its point of the
	// stream: note until its DROP went out, x from its ADD on.
	dropped, added := false, false
	for _, x := range order {
		switch x := x.(type) {
		case *change.Event:
			dropped = dropped || strings.Contains(x.DDL.SQL, "DROP COLUMN")
			added = added || strings.Contains(x.DDL.SQL, "ADD COLUMN")
		case shardRow:
			if slices.Contains(x.cols, "note") == dropped || slices.Contains(x.cols, "x") != added {
				t.Fatalf("row %s/%d has columns %q (DROP out: %v, ADD out: %v)", x.shard, x.id, x.cols, dropped, added)
			}
		}
	}
}

// ordersC is shard schema's orders table after ADD COLUMN c INT NULL.
func ordersC(schema string) *change.Table {
	t := orders(schema)
	t.Columns = append(t.Columns, change.Column{Name: "c", Type: "int", RawType: "int(11)"})
	return t
}

// addC is shard schema's ALTER TABLE ADD COLUMN c.
func addC(schema string) *change.DDL {
	return &change.DDL{Schema: schema, SQL: "ALTER TABLE " + schema + ".orders ADD COLUMN c INT NULL", Tables: []string{schema + ".orders"}}
}

// TestShardDDLLockScripted is the pessimistic lock's logic on scripted
// sources: shop_0 (on s0) runs an ALTER first, and its rows after it are
// held while shop_1's flow; when shop_1 runs it too, one ALTER of
// shop.orders goes out, then the held rows, re-read from s0's log by the
// catch-up, with the new columns; seqs stay dense.
func TestShardDDLLockScripted(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPessimistic)
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0, s1 := srcs.Log("s0"), srcs.Log("s1")
	s0.Tables(orders("shop_0"))
	s1.Tables(orders("shop_1"))
	d := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock})
	// No heartbeat until the end: each transaction waits for the other
	// source's next, so they go in commit-time order.
	at := func(s int) time.Time { return scriptT0.Add(time.Duration(s) * time.Second) }
	s0.Tx(at(1), orders("shop_0"), row(1, "a"))
	s1.Tx(at(2), orders("shop_1"), row(2, "b"))
	s0.DDL(at(3), addC("shop_0"), ordersC("shop_0")) // the lock opens; shop_0 is held
	held := s0.Tx(at(4), ordersC("shop_0"), row3(3)) // held
	s1.Tx(at(5), orders("shop_1"), row(4, "d"))      // flows
	s1.DDL(at(6), addC("shop_1"), ordersC("shop_1")) // the last: the lock releases
	s1.Tx(at(7), ordersC("shop_1"), row3(5))         // after the DDL
	s0.Tx(at(8), ordersC("shop_0"), row3(6))         // after the catch-up
	clock.Advance(time.Minute)                       // heartbeats let the last ones go
	s0.Heartbeat(false)
	s1.Heartbeat(false)
	var got []string
	for range 7 {
		x := d.next(t)
		if want := uint64(len(got) + 1); x.seq != want {
			t.Errorf("%s: seq not dense, want %d", x, want)
		}
		if x.ddl != "" {
			got = append(got, x.ddl)
		} else {
			got = append(got, fmt.Sprintf("%s %v", x.source, x.ids))
		}
		if len(got) == 5 && x.pos != held {
			t.Errorf("the held transaction went out at %s, want %s (its place in s0's log)", x.pos, held)
		}
	}
	d.none(t)
	want := []string{"s0 [1]", "s1 [2]", "s1 [4]", "ALTER TABLE `shop`.`orders` ADD COLUMN c INT NULL", "s0 [3]", "s1 [5]", "s0 [6]"}
	if !slices.Equal(got, want) {
		t.Errorf("the stream:\n%q\nwant:\n%q", got, want)
	}
}

// row3 is an orders row after ADD COLUMN c.
func row3(id int64) []change.Value { return []change.Value{id, "n", int64(id)} }
