package stream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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

// twoShards starts two servers with an orders table each and returns a
// spec over them, its starts pinned where the servers are now.
func twoShards(t *testing.T) ([]*mysqltest.Server, *spec.Spec) {
	t.Helper()
	srvs := mysqltest.StartN(t, 2)
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`},
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		ShardDDL:  spec.ShardDDLPassthrough, // the tests count the shards' CREATE TABLEs
		Heartbeat: spec.Duration(100 * time.Millisecond)}
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(200))", i))
		file, pos := s.MasterStatus(t)
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(),
			Start: spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}})
	}
	ds = ds.WithDefaults()
	return srvs, &ds
}

// write commits n transactions of rows rows on each server, ids from
// first on.
func write(t *testing.T, srvs []*mysqltest.Server, first, n, rows int) {
	t.Helper()
	writeAt(t, srvs, time.Time{}, first, n, rows)
}

// writeAt is write with the transactions' commit time at (zero: now).
func writeAt(t *testing.T, srvs []*mysqltest.Server, at time.Time, first, n, rows int) {
	t.Helper()
	for i, s := range srvs {
		var sqls []string
		if !at.IsZero() {
			sqls = append(sqls, fmt.Sprintf("SET timestamp = %d", at.Unix()))
		}
		for x := 0; x < n; x++ {
			var vals []string
			for r := 0; r < rows; r++ {
				id := first + x*rows + r
				vals = append(vals, fmt.Sprintf("(%d, '%s')", id, strings.Repeat("x", 150)))
			}
			sqls = append(sqls, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", i, strings.Join(vals, ",")))
		}
		s.Exec(t, sqls...)
	}
}

// txn is one transaction as a consumer saw it.
type txn struct {
	seq  uint64
	rows []string // source:id
}

// reader reads a client id's stream from a store, acking what it read.
type reader struct {
	store  *stream.Store
	client string
	mu     sync.Mutex
	txs    []txn
	open   *txn
	dup    int // events of a transaction at or below one already whole
}

func newReader(store *stream.Store, client string) *reader {
	return &reader{store: store, client: client}
}

// read takes one batch (waiting up to wait) and acks it.
func (r *reader) read(t *testing.T, ctx context.Context, wait time.Duration) error {
	b, err := r.store.Get(ctx, r.client, 256, wait)
	if err != nil || b.ID < 0 {
		return err
	}
	r.take(b)
	return r.store.Ack(r.client, b.ID)
}

// take keeps the transactions of a batch (an empty one holds none).
func (r *reader) take(b stream.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range b.Events {
		if n := len(r.txs); n > 0 && ev.Seq <= r.txs[n-1].seq {
			r.dup++
			continue
		}
		switch ev.Type {
		case change.EventBegin:
			r.open = &txn{seq: ev.Seq}
		case change.EventRows:
			for i := range ev.Rows {
				id := ev.Rows[i].After()[0]
				r.open.rows = append(r.open.rows, fmt.Sprintf("%s:%v", ev.Source, id))
			}
		case change.EventCommit:
			r.txs = append(r.txs, *r.open)
			r.open = nil
		case change.EventDDL:
			r.txs = append(r.txs, txn{seq: ev.Seq})
		}
	}
}

// until reads until the client has n transactions.
func (r *reader) until(t *testing.T, n int, limit time.Duration) []txn {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(limit)
	for {
		r.mu.Lock()
		got := len(r.txs)
		r.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client %s: %d transactions after %v, want %d", r.client, got, limit, n)
		}
		if err := r.read(t, ctx, 200*time.Millisecond); err != nil {
			t.Fatalf("client %s: %v", r.client, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dup > 0 {
		t.Errorf("client %s got %d events of transactions it had whole", r.client, r.dup)
	}
	return slices.Clone(r.txs)
}

func start(t *testing.T, ds *spec.Spec, cfg stream.Config) *stream.Pipeline {
	t.Helper()
	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Store: cfg, Serve: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// checkDense fails unless txs have the seqs from, from+1, ...
func checkDense(t *testing.T, who string, txs []txn, from uint64) {
	t.Helper()
	for i, x := range txs {
		if x.seq != from+uint64(i) {
			t.Fatalf("%s: transaction %d has seq %d, want %d", who, i, x.seq, from+uint64(i))
		}
	}
}

// TestLateClientGetsWholeStream: a client id that comes after the store
// let the first transactions go gets them from a replay reader, with the
// same seqs and rows as the first client (another, meanwhile, is told
// to wait: one replay at a time); one asking for seq:N starts at
// N, one asking for latest gets only what comes next.
func TestLateClientGetsWholeStream(t *testing.T) {
	srvs, ds := twoShards(t)
	p := start(t, ds, stream.Config{MaxBytes: 64 << 10, MaxReplays: 1})
	first := newReader(p.Store, "1001")
	p.Store.Subscribe("1001")
	write(t, srvs, 1, 100, 5) // 200 transactions, 1000 rows
	want := first.until(t, 200, time.Minute)
	checkDense(t, "1001", want, 1)
	if f := p.Store.Stats().Floor; f == 0 {
		t.Fatalf("the store still holds the first transaction (floor %d): make it smaller", f)
	}

	p.Store.Subscribe("1002") // a canal client: the spec's start, earliest
	// One replay at a time here: a second late client waits its turn.
	err := p.Store.Open(context.Background(), "1003", stream.OpenOptions{})
	if !errors.Is(err, stream.ErrReplaysBusy) {
		t.Fatalf("a second replay with MaxReplays 1: %v, want ErrReplaysBusy", err)
	}
	late := newReader(p.Store, "1002")
	got := late.until(t, 200, time.Minute)
	for i := range want {
		if got[i].seq != want[i].seq || !slices.Equal(got[i].rows, want[i].rows) {
			t.Fatalf("late client's transaction %d: %+v, the first client's %+v", i, got[i], want[i])
		}
	}
	// Its next read finds it caught up: it rejoins the store.
	if _, err := p.Store.Get(context.Background(), "1002", 1, 0); err != nil {
		t.Fatal(err)
	}
	if cs := clientStats(p.Store, "1002"); cs.Replaying || cs.Detached {
		t.Errorf("late client still replaying once caught up: %+v", cs)
	}

	if err := p.Store.Open(context.Background(), "from-57", stream.OpenOptions{Start: stream.Start{Kind: stream.StartSeq, Seq: 57}}); err != nil {
		t.Fatal(err)
	}
	mid := newReader(p.Store, "from-57").until(t, 200-56, time.Minute)
	checkDense(t, "from-57", mid, 57)

	if err := p.Store.Open(context.Background(), "now", stream.OpenOptions{Start: stream.Start{Kind: stream.StartLatest}}); err != nil {
		t.Fatal(err)
	}
	write(t, srvs[:1], 10000, 1, 1)
	now := newReader(p.Store, "now").until(t, 1, time.Minute)
	checkDense(t, "latest", now, 201)

	// Both live clients go on together after the late one rejoined.
	write(t, srvs, 20000, 3, 1)
	a, b := first.until(t, 207, time.Minute), late.until(t, 207, time.Minute)
	if !slices.EqualFunc(a, b, func(x, y txn) bool { return x.seq == y.seq && slices.Equal(x.rows, y.rows) }) {
		t.Errorf("after the late client rejoined, the two streams differ")
	}
}

func countRows(txs []txn) int {
	n := 0
	for _, x := range txs {
		n += len(x.rows)
	}
	return n
}

// TestStartAtTime: a client id asking for time:T starts at the first
// transaction committed at or after T, from the store or a replay.
func TestStartAtTime(t *testing.T) {
	srvs, ds := twoShards(t)
	p := start(t, ds, stream.Config{MaxBytes: 64 << 10})
	p.Store.Subscribe("a")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for k := range 3 { // 3 × 40 transactions, a minute apart
		writeAt(t, srvs, base.Add(time.Duration(k)*time.Minute), 1000*(k+1), 20, 5)
	}
	newReader(p.Store, "a").until(t, 120, time.Minute)
	if p.Store.Stats().Floor < 41 {
		t.Fatalf("the store still holds the second minute (floor %d): make it smaller", p.Store.Stats().Floor)
	}
	for _, k := range []int{1, 2} {
		id := fmt.Sprintf("at-%d", k)
		at := stream.Start{Kind: stream.StartTime, Time: base.Add(time.Duration(k) * time.Minute)}
		if err := p.Store.Open(context.Background(), id, stream.OpenOptions{Start: at}); err != nil {
			t.Fatal(err)
		}
		got := newReader(p.Store, id).until(t, 120-40*k, time.Minute)
		checkDense(t, id, got, uint64(40*k+1))
	}
}

func clientStats(s *stream.Store, id string) stream.ClientStats {
	for _, c := range s.Clients() {
		if c.ID == id {
			return c
		}
	}
	return stream.ClientStats{}
}

// TestIdleClientDetached: a subscribed client id that reads nothing holds
// a 4 MiB store full while 100,000 rows are written; it is named, then
// detached, the live client receives every row once, and when the idle
// one reads again it gets every row from its start.
func TestIdleClientDetached(t *testing.T) {
	srvs, ds := twoShards(t)
	ds.Consumers.DetachAfter = spec.Duration(2 * time.Second)
	p := start(t, ds, stream.Config{MaxBytes: 4 << 20})
	p.Store.Subscribe("idle")
	p.Store.Subscribe("live")
	live := newReader(p.Store, "live")
	go write(t, srvs, 1, 400, 125) // 800 transactions, 100,000 rows, about 15 MB

	var blocked []string
	retry.Until(t, time.Minute, func() error {
		_ = live.read(t, context.Background(), 100*time.Millisecond)
		if blocked = p.Store.Stats().BlockedBy; len(blocked) == 0 {
			return errors.New("the store names no client holding it")
		}
		return nil
	})
	if !slices.Equal(blocked, []string{"idle"}) {
		t.Fatalf("blocked by %v, want [idle]", blocked)
	}
	want := live.until(t, 800, 2*time.Minute)
	checkDense(t, "live", want, 1)
	if rows := countRows(want); rows != 100000 {
		t.Fatalf("live client got %d rows, want 100000", rows)
	}
	if cs := clientStats(p.Store, "idle"); !cs.Detached {
		t.Fatalf("idle client not detached: %+v", cs)
	}

	got := newReader(p.Store, "idle").until(t, 800, 2*time.Minute)
	for i := range want {
		if got[i].seq != want[i].seq || !slices.Equal(got[i].rows, want[i].rows) {
			t.Fatalf("idle client's transaction %d: %+v, the live client's %+v", i, got[i], want[i])
		}
	}
}

// TestClientExpires: a client id unseen for expire_after is dropped.
func TestClientExpires(t *testing.T) {
	_, ds := twoShards(t)
	ds.Consumers.ExpireAfter = spec.Expiry(time.Second)
	p := start(t, ds, stream.Config{})
	p.Store.Subscribe("gone")
	p.Store.Subscribe("here")
	retry.Until(t, 10*time.Second, func() error {
		if clientStats(p.Store, "gone").ID != "" {
			p.Store.Get(context.Background(), "here", 1, 100*time.Millisecond)
			return errors.New("client id unseen was not dropped after expire_after 1s")
		}
		return nil
	})
	if clientStats(p.Store, "here").ID == "" {
		t.Fatal("a client id that reads was dropped")
	}
}

// TestEarliestAfterPurge: once the sources purged the binlogs of the
// destination's start, a new client id starting at earliest gets an error
// naming the oldest seq still available.
func TestEarliestAfterPurge(t *testing.T) {
	srvs, ds := twoShards(t)
	p := start(t, ds, stream.Config{MaxBytes: 64 << 10})
	p.Store.Subscribe("a")
	write(t, srvs, 1, 100, 5)
	newReader(p.Store, "a").until(t, 200, time.Minute)
	for _, s := range srvs {
		s.FlushLogs(t)
		file, _ := s.MasterStatus(t)
		s.PurgeLogsTo(t, file)
	}
	floor := p.Store.Stats().Floor
	err := p.Store.Open(context.Background(), "b", stream.OpenOptions{Start: stream.Start{Kind: stream.StartEarliest}})
	if !errors.Is(err, stream.ErrHistoryGone) {
		t.Fatalf("open at earliest after the purge: %v, want ErrHistoryGone", err)
	}
	if want := fmt.Sprintf("oldest seq still available is %d", floor+1); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if clientStats(p.Store, "b").ID != "" {
		t.Error("the refused client id was subscribed")
	}
}

// TestTakeoverResumesFromAttached: a new run of the destination (a new
// owner) given a detached client's saved cursor starts its merge from the
// slowest attached client's, not from it; the detached client, when it
// reads, gets every transaction after its cursor from a replay.
func TestTakeoverResumesFromAttached(t *testing.T) {
	srvs, ds := twoShards(t)
	first, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Serve: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	first.Store.Subscribe("idle")
	first.Store.Subscribe("live")
	write(t, srvs, 1, 100, 5) // 200 transactions
	idle := newReader(first.Store, "idle")
	if err := idle.read(t, context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	newReader(first.Store, "live").until(t, 200, time.Minute)
	saved := map[string]*group.Cursor{}
	for _, c := range first.Store.Clients() {
		saved[c.ID] = c.Mark
	}
	first.Close()
	if saved["idle"] == nil || saved["idle"].Seq >= 200 || saved["live"].Seq != 200 {
		t.Fatalf("cursors idle %v, live %v: want idle behind live's 200", saved["idle"], saved["live"])
	}
	from := saved["idle"].Seq
	detached := saved["idle"].Clone()
	detached.Detached = true // as the owner saves a detached client's
	saved["idle"] = detached

	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Serve: true, Clients: saved,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if f := p.Store.Stats().Floor; f != 200 {
		t.Fatalf("the new run starts after seq %d, want 200 (the attached client's cursor)", f)
	}
	write(t, srvs[:1], 5000, 1, 1)
	if got := newReader(p.Store, "live").until(t, 1, time.Minute); got[0].seq != 201 {
		t.Fatalf("live client's next transaction has seq %d, want 201", got[0].seq)
	}
	got := newReader(p.Store, "idle").until(t, int(201-from), time.Minute)
	checkDense(t, "idle", got, from+1)
}
