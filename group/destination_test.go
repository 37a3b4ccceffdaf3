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

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// shards starts three servers holding shop_0 … shop_5, two schemas each
// (server i holds shop_i and shop_{i+3}), each with an orders table. The
// DDL is written at header time ddlAt so that tests can place their
// transactions after it.
func shards(t *testing.T, ddlAt time.Time) []*mysqltest.Server {
	t.Helper()
	srvs := mysqltest.StartN(t, 3)
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("SET timestamp = %d", ddlAt.Unix()),
			fmt.Sprintf("CREATE DATABASE shop_%d", i), fmt.Sprintf("CREATE DATABASE shop_%d", i+3),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(20))", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(20))", i+3))
	}
	return srvs
}

func shopSpec(srvs []*mysqltest.Server, start spec.Start, ordering spec.Ordering) *spec.Spec {
	// Passthrough: most tests here count the shards' CREATE TABLEs; the
	// shard-DDL tests ask for pessimistic.
	s := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Ordering: ordering, ShardDDL: spec.ShardDDLPassthrough,
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond)}
	for i, srv := range srvs {
		s.Sources = append(s.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: srv.Addr(), Start: start})
	}
	s = s.WithDefaults()
	return &s
}

// collector runs a destination and records what it emits.
type collector struct {
	mu     sync.Mutex
	events []*change.Event
	// cursors[seq] is the cursor after transaction seq.
	cursors map[uint64]*group.Cursor
	cancel  context.CancelFunc
	done    chan error
	dest    *group.Destination
}

func collect(t *testing.T, cfg group.Config) *collector {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	d, err := group.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{cursors: map[uint64]*group.Cursor{}, cancel: cancel, done: make(chan error, 1), dest: d}
	go func() {
		c.done <- d.Run(ctx, func(ev *change.Event) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.events = append(c.events, ev)
			if ev.Type == change.EventCommit || ev.Type == change.EventDDL {
				c.cursors[ev.Seq] = d.Cursor()
			}
			return nil
		})
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop ends the destination (once) and checks it ended cleanly.
func (c *collector) stop(t *testing.T) {
	c.cancel()
	if err, ok := <-c.done; ok {
		close(c.done)
		if err != nil {
			t.Errorf("destination stopped with %v", err)
		}
	}
}

func (c *collector) snapshot() []*change.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*change.Event(nil), c.events...)
}

// txs groups emitted events into transactions.
type tx struct {
	seq    uint64
	source string
	commit time.Time
	ddl    bool
	ids    []int64
	pos    change.Position
}

func (c *collector) txs(t *testing.T) []tx {
	t.Helper()
	var out []tx
	var cur *tx
	for _, ev := range c.snapshot() {
		switch ev.Type {
		case change.EventBegin:
			if cur != nil {
				t.Fatalf("transaction %d begins inside transaction %d: interleaved", ev.Seq, cur.seq)
			}
			cur = &tx{seq: ev.Seq, source: ev.Source, commit: ev.CommitTime, pos: ev.Pos}
		case change.EventRows:
			if cur == nil || ev.Seq != cur.seq || ev.Source != cur.source {
				t.Fatalf("rows of seq %d from %s outside their transaction", ev.Seq, ev.Source)
			}
			for i := range ev.Rows {
				rc := &ev.Rows[i]
				img := rc.After()
				if img == nil {
					img = rc.Before()
				}
				cur.ids = append(cur.ids, int64(img[0].(int64)))
			}
		case change.EventCommit:
			if cur == nil || ev.Seq != cur.seq {
				t.Fatalf("commit of seq %d outside its transaction", ev.Seq)
			}
			out = append(out, *cur)
			cur = nil
		case change.EventDDL:
			if cur != nil {
				t.Fatalf("DDL inside transaction %d", cur.seq)
			}
			out = append(out, tx{seq: ev.Seq, source: ev.Source, commit: ev.CommitTime, ddl: true, pos: ev.Pos})
		}
	}
	return out
}

func (c *collector) waitTxs(t *testing.T, n int, d time.Duration) []tx {
	t.Helper()
	var txs []tx
	err := retry.Wait(context.Background(), d, func() error {
		if txs = c.txs(t); len(txs) < n {
			return fmt.Errorf("%d transactions, want %d", len(txs), n)
		}
		return nil
	})
	if err != nil {
		for _, x := range txs {
			t.Logf("seq %d %s commit %s ids %v ddl %v", x.seq, x.source, x.commit.Format(time.TimeOnly), x.ids, x.ddl)
		}
		t.Fatal(err)
	}
	return txs
}

// connected waits until every reader of d streams its binlog: a write
// after it is after a reader's start position (spec start: latest).
func connected(t *testing.T, d *group.Destination) {
	t.Helper()
	retry.Until(t, 30*time.Second, func() error {
		for _, s := range d.Stats().Sources {
			if !s.Connected {
				return fmt.Errorf("source %s not connected", s.Name)
			}
		}
		return nil
	})
}

var earliest = spec.Start{Kind: spec.StartEarliest}

// TestMergedOrder builds an exact cross-shard interleaving with SET
// timestamp (ties, a clock stepping back, multi-statement transactions over
// two schemas of one server) and checks every contract point on the merged
// stream: nothing lost, transactions whole, shard order exact, merged order
// by key with ties by source index, seq dense.
func TestMergedOrder(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	srvs := shards(t, base)
	// (server, seconds after base, ids); the header time is whole seconds.
	writes := []struct {
		srv int
		at  int
		ids []int
	}{
		{1, 10, []int{1}}, {0, 10, []int{2, 3}}, {2, 11, []int{4}}, {0, 12, []int{5}},
		{1, 11, []int{6}}, // written after server 0's 12, but its key 11 puts it first
		{2, 9, []int{7}},  // server 2's clock steps back: its key is raised to 11
		{1, 12, []int{8, 9, 10}}, {0, 13, []int{11}},
	}
	for _, w := range writes {
		stmts := []string{fmt.Sprintf("SET timestamp = %d", base.Add(time.Duration(w.at)*time.Second).Unix()), "BEGIN"}
		for k, id := range w.ids {
			schema := w.srv + 3*(k%2) // alternate the server's two schemas inside one transaction
			stmts = append(stmts, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'x')", schema, id))
		}
		srvs[w.srv].Exec(t, append(stmts, "COMMIT")...)
	}
	c := collect(t, group.Config{Spec: shopSpec(srvs, earliest, "strict")})
	txs := c.waitTxs(t, 6+len(writes), 30*time.Second) // two CREATE TABLEs per server, then the writes

	var got [][]int64
	for i, x := range txs {
		if x.seq != uint64(i+1) {
			t.Fatalf("transaction %d has seq %d: not dense", i, x.seq)
		}
		if !x.ddl {
			got = append(got, x.ids)
		}
	}
	// Keys: s1@10, s0@10 → (10,s0) (10,s1); s2@11; s0@12; s1@11; s2@9→11;
	// s1@12; s0@13. Sorted: (10,0) (10,1) (11,1) (11,2) (11,2) (12,0) (12,1) (13,0).
	want := [][]int64{{2, 3}, {1}, {6}, {4}, {7}, {5}, {8, 9, 10}, {11}}
	if !slices.EqualFunc(got, want, slices.Equal[[]int64]) {
		t.Errorf("merged order\n%v\nwant\n%v", got, want)
	}
	// Shard order: each source's positions increase.
	last := map[string]change.Position{}
	for _, x := range txs {
		if p, ok := last[x.source]; ok && x.pos.Compare(p) <= 0 {
			t.Errorf("source %s went back from %s to %s", x.source, p, x.pos)
		}
		last[x.source] = x.pos
	}
	if c.dest.Late() != 0 {
		t.Errorf("%d late transactions", c.dest.Late())
	}
}

// TestIdleShards: with the other shards idle, a write to one shard reaches
// the consumer within heartbeat + skew + 2 s: idle shards advance their
// watermark from replication heartbeats.
func TestIdleShards(t *testing.T) {
	srvs := shards(t, time.Now())
	spec := shopSpec(srvs, spec.Start{Kind: spec.StartLatest}, "strict")
	c := collect(t, group.Config{Spec: spec})
	connected(t, c.dest)
	written := time.Now()
	srvs[1].Exec(t, "INSERT INTO shop_4.orders VALUES (1, 'idle others')")
	limit := time.Duration(spec.Heartbeat) + time.Duration(spec.MaxClockSkew) + 2*time.Second
	txs := c.waitTxs(t, 1, limit)
	took := time.Since(written)
	t.Logf("write on one shard reached the consumer after %v (limit %v)", took.Round(time.Millisecond), limit)
	if txs[0].source != "s1" || !slices.Equal(txs[0].ids, []int64{1}) {
		t.Errorf("got %+v", txs[0])
	}
}

// TestRestartFromCursor: a destination restarted from the cursor saved
// after some transaction emits exactly what the first run emitted after it,
// with the same seqs.
func TestRestartFromCursor(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	srvs := shards(t, base)
	for k := 0; k < 30; k++ {
		srv := k % 3
		srvs[srv].Exec(t, fmt.Sprintf("SET timestamp = %d", base.Add(time.Duration(1+k/2)*time.Second).Unix()),
			fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'r')", srv+3*(k%2), k))
	}
	spec := shopSpec(srvs, earliest, "strict")
	first := collect(t, group.Config{Spec: spec})
	all := first.waitTxs(t, 36, 30*time.Second)
	cut := uint64(17)
	first.mu.Lock()
	cursor := first.cursors[cut]
	first.mu.Unlock()
	if cursor == nil || cursor.Seq != cut {
		t.Fatalf("no cursor after seq %d", cut)
	}
	first.stop(t) // a restart: the same replica server_ids reconnect
	second := collect(t, group.Config{Spec: spec, Resume: cursor})
	second.waitTxs(t, len(all)-int(cut), 30*time.Second)
	// A marker written now goes out after anything the restart emits
	// again: a duplicate shows before it.
	srvs[0].Exec(t, "INSERT INTO shop_0.orders VALUES (1000, 'marker')")
	again := second.waitTxs(t, len(all)-int(cut)+1, 30*time.Second)
	if marker := again[len(again)-1]; !slices.Equal(marker.ids, []int64{1000}) {
		t.Errorf("the last transaction is %+v, want the marker", marker)
	}
	again = again[:len(again)-1]
	if len(again) != len(all)-int(cut) {
		for _, x := range all {
			t.Logf("first: seq %d %s %v %s", x.seq, x.source, x.ids, x.pos)
		}
		for _, x := range again {
			t.Logf("again: seq %d %s %v %s", x.seq, x.source, x.ids, x.pos)
		}
		t.Logf("cursor %+v", cursor)
		t.Fatalf("restart emitted %d transactions, want %d", len(again), len(all)-int(cut))
	}
	for i, x := range again {
		w := all[int(cut)+i]
		if x.seq != w.seq || x.source != w.source || !slices.Equal(x.ids, w.ids) || x.pos != w.pos {
			t.Fatalf("after restart, transaction %d is seq %d %s %v at %s; first run had seq %d %s %v at %s",
				i, x.seq, x.source, x.ids, x.pos, w.seq, w.source, w.ids, w.pos)
		}
	}
}

// TestRestartAfterDDLWhileDown: a destination started at the latest
// position is stopped; while it is down every shard writes a row, ALTERs
// its table and writes another. Restarted from its cursor (the servers
// log rows without column names), it reads the rows before the ALTER
// with the columns they were written with, the ALTER, and the rows after
// it with the new column: the cursor kept the schema from the start,
// where the server can only show the altered one.
func TestRestartAfterDDLWhileDown(t *testing.T) {
	srvs := shards(t, time.Now())
	spec := shopSpec(srvs, spec.Start{Kind: spec.StartLatest}, "strict")
	first := collect(t, group.Config{Spec: spec})
	connected(t, first.dest)
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'before')", i, i))
	}
	first.waitTxs(t, len(srvs), 30*time.Second)
	first.mu.Lock()
	cursor := first.cursors[uint64(len(srvs))]
	first.mu.Unlock()
	first.stop(t)
	if cursor == nil {
		t.Fatal("no cursor after the first run's rows")
	}
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'down')", i, 10+i),
			fmt.Sprintf("ALTER TABLE shop_%d.orders ADD COLUMN extra INT", i),
			fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'after', 7)", i, 20+i))
	}
	second := collect(t, group.Config{Spec: spec, Resume: cursor})
	second.waitTxs(t, 3*len(srvs), 30*time.Second)
	for _, ev := range second.snapshot() {
		for i := range ev.Rows {
			rc := &ev.Rows[i]
			id, cols := rc.After()[0].(int64), len(rc.Table.Columns)
			if want := map[bool]int{true: 2, false: 3}[id < 20]; cols != want {
				t.Errorf("row %d came with %d columns, want %d", id, cols, want)
			}
		}
	}
}

// TestStoppedShardStalls: in strict order a shard that is down holds the
// stream back (nothing is reordered around it) and, when it returns, the
// stream goes on without loss. In per-source order the others go on.
func TestStoppedShardStalls(t *testing.T) {
	for _, ordering := range []spec.Ordering{spec.OrderingStrict, spec.OrderingPerSource} {
		t.Run(string(ordering), func(t *testing.T) {
			srvs := shards(t, time.Now())
			c := collect(t, group.Config{Spec: shopSpec(srvs, spec.Start{Kind: spec.StartLatest}, ordering), StallLog: time.Second})
			connected(t, c.dest)
			srvs[2].Stop(t)
			srvs[0].Exec(t, "INSERT INTO shop_0.orders VALUES (1, 'while 2 is down')")
			// Strict order holds s0's transaction, waiting for s2;
			// per-source order emits it.
			retry.Until(t, 30*time.Second, func() error {
				st := c.dest.Stats()
				if ordering == spec.OrderingStrict && (st.Sources[0].LastCommit.IsZero() || !st.Sources[2].Waiting) {
					return fmt.Errorf("s0's transaction not waiting for s2: %+v", st.Sources)
				}
				if ordering == spec.OrderingPerSource && len(c.txs(t)) == 0 {
					return errors.New("s0's transaction not out")
				}
				return nil
			})
			n := len(c.txs(t))
			if ordering == spec.OrderingStrict && n != 0 {
				t.Fatalf("strict order emitted %d transactions while a shard was down", n)
			}
			if st := c.dest.Stats(); ordering == spec.OrderingStrict && (!st.Sources[2].Waiting || st.Sources[0].Waiting) {
				t.Errorf("status does not show strict order waiting for s2 (only): %+v", st.Sources)
			}
			if ordering == spec.OrderingPerSource && n != 1 {
				t.Fatalf("per-source order emitted %d transactions while a shard was down, want 1", n)
			}
			srvs[2].Restart(t)
			srvs[2].Exec(t, "INSERT INTO shop_2.orders VALUES (2, 'back')")
			txs := c.waitTxs(t, 2, 30*time.Second)
			var ids []int64
			for _, x := range txs {
				ids = append(ids, x.ids...)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []int64{1, 2}) {
				t.Errorf("ids %v, want [1 2]", ids)
			}
		})
	}
}

// TestHugeTransactionBoundedStore sends a 200,000-row transaction on one
// shard, with small transactions on the others around it, through a store
// bounded to 4 MiB (the transaction is about 40 MiB of events) and a slow
// consumer: the store stays within its bound (the readers wait), every row
// arrives, and the huge transaction is never interleaved with another.
func TestHugeTransactionBoundedStore(t *testing.T) {
	srvs := shards(t, time.Now())
	srvs[0].Exec(t, "CREATE TABLE shop_0.seq (n INT PRIMARY KEY)", "SET max_recursive_iterations = 1000000",
		"INSERT INTO shop_0.seq WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM s WHERE n < 200000) SELECT n FROM s")
	spec := shopSpec(srvs, spec.Start{Kind: spec.StartLatest}, "strict")
	d, err := group.New(group.Config{Spec: spec, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	const bound = 4 << 20
	store := stream.NewStore(stream.Config{MaxBytes: bound})
	store.Subscribe("slow")
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- d.RunInto(ctx, store) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("destination: %v", err)
		}
	}()
	connected(t, d)
	srvs[1].Exec(t, "INSERT INTO shop_1.orders VALUES (1, 'before')")
	srvs[0].Exec(t, "INSERT INTO shop_0.orders SELECT n, 'huge' FROM shop_0.seq")
	srvs[2].Exec(t, "INSERT INTO shop_2.orders VALUES (2, 'after')")

	var rows, txs int
	var open uint64 // the seq of the transaction being read, 0 between
	deadline := time.Now().Add(2 * time.Minute)
	for rows < 200002 || txs < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows after 2 minutes", rows)
		}
		b, err := store.Get(ctx, "slow", 64, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if b.ID < 0 {
			continue // nothing ready yet
		}
		for _, ev := range b.Events {
			switch ev.Type {
			case change.EventBegin:
				if open != 0 {
					t.Fatalf("transaction %d began inside transaction %d", ev.Seq, open)
				}
				open = ev.Seq
			case change.EventRows:
				if ev.Seq != open {
					t.Fatalf("rows of transaction %d inside transaction %d", ev.Seq, open)
				}
				rows += len(ev.Rows)
			case change.EventCommit:
				open = 0
				txs++
			}
		}
		time.Sleep(time.Millisecond) // a consumer slower than the readers
		if err := store.Ack("slow", b.ID); err != nil {
			t.Fatal(err)
		}
	}
	st := store.Stats()
	t.Logf("%d rows in %d transactions; store peak %.1f MiB (bound %d MiB)", rows, txs, float64(st.PeakBytes)/(1<<20), bound>>20)
	if rows != 200002 || txs != 3 {
		t.Errorf("%d rows in %d transactions, want 200,002 in 3", rows, txs)
	}
	if st.PeakBytes > bound {
		t.Errorf("store peaked at %d bytes, bound %d", st.PeakBytes, bound)
	}
}

// TestMemoryBoundCountsSnapshotReadAhead: with an initial snapshot each
// source may hold QueueBytes of chunks read ahead besides its queue and
// read-ahead, and the bound counts them; without one it does not.
func TestMemoryBoundCountsSnapshotReadAhead(t *testing.T) {
	const store = 64 << 20
	live := group.MemoryBound(4, group.Config{Spec: &spec.Spec{}}, store)
	snap := group.MemoryBound(4, group.Config{Spec: &spec.Spec{Snapshot: spec.SnapshotInitial}}, store)
	if want := live + 4*group.DefaultQueueBytes; snap != want {
		t.Errorf("the bound of four sources with a snapshot is %d; want %d (%d without one, plus 4 MiB a source)", snap, want, live)
	}
	if unset := group.MemoryBound(4, group.Config{}, store); unset != live {
		t.Errorf("the bound without a spec is %d; want %d, as without a snapshot", unset, live)
	}
}
