package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
	"github.com/braid-cdc/braid/spec"
)

// lostTx is a transaction as a client got it: its seq, the LOST
// marker's lost GTIDs (a marker has no rows) and the ids it wrote.
type lostTx struct {
	seq  uint64
	lost string
	ids  []int64
}

// lostClient gathers a client's transactions from its batches.
type lostClient struct {
	mu   sync.Mutex
	txs  []lostTx
	open *lostTx
}

func (c *lostClient) take(b Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range b.Events {
		switch ev.Type {
		case change.EventBegin:
			c.open = &lostTx{seq: ev.Seq, lost: ev.Lost}
		case change.EventRows:
			for i := range ev.Rows {
				c.open.ids = append(c.open.ids, ev.Rows[i].After()[0].(int64))
			}
		case change.EventCommit:
			c.txs = append(c.txs, *c.open)
			c.open = nil
		case change.EventDDL:
			c.txs = append(c.txs, lostTx{seq: ev.Seq})
		}
	}
}

// got returns the transactions so far.
func (c *lostClient) got() []lostTx {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.txs)
}

// ids lists the ids written, -1 for a marker.
func lostIDs(txs []lostTx) []int64 {
	var out []int64
	for _, tx := range txs {
		if tx.lost != "" {
			out = append(out, -1)
		}
		out = append(out, tx.ids...)
	}
	return out
}

// readOne takes client's next batch and acks it.
func readOne(ctx context.Context, s *Store, client string, into *lostClient) error {
	b, err := s.Get(ctx, client, 256, 100*time.Millisecond)
	if err != nil || b.ID < 0 {
		return err
	}
	into.take(b)
	return s.Ack(client, b.ID)
}

// TestReplayDivergedAtLoss: a consumer's replay reader reads, on the
// primary, a transaction (4) the live reader never read (held here by a
// paused proxy, as backpressure holds it); the primary dies, a replica
// that lacks 3 and 4 is promoted, the loss of 3 is accepted, and the
// live run emits its LOST marker at the seq the replay gave 4. The
// consumer gets what comes before, then ErrReplayDiverged, never 4; read
// again, a new replay from its cursor goes on past the loss as the live
// run did: its rows are the live client's, which are the sources' with
// the accepted loss.
func TestReplayDivergedAtLoss(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)", "INSERT INTO shop.orders VALUES (2)")
	tp.WaitCaughtUp(t)
	// The live reader reaches the primary through hold, which the test
	// pauses to keep it from reading on; a replay reader started later
	// reaches the primary directly. The heartbeat makes the live reader's
	// read timeout (ten heartbeats) outlast the pause.
	hold := tcpproxy.Start(t, primary.Addr())
	vip := tcpproxy.Start(t, hold.Addr())
	ds, err := spec.Parse(fmt.Appendf(nil, "name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 6s\n", vip.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartPipeline(context.Background(), PipelineConfig{Spec: ds, Serve: true, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.Store.Subscribe("live")
	live := &lostClient{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := readOne(ctx, p.Store, "live", live); err != nil && ctx.Err() == nil {
				t.Errorf("live client: %v", err)
				return
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitIDs := func(want []int64) []lostTx {
		t.Helper()
		var txs []lostTx
		retry.Until(t, time.Minute, func() error {
			if txs = live.got(); !slices.Equal(lostIDs(txs), want) {
				return fmt.Errorf("the live client has %v, want %v (-1: the LOST marker)", lostIDs(txs), want)
			}
			return nil
		})
		return txs
	}
	waitIDs([]int64{1, 2})
	tp.StopReplication(t, replica)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)")
	txs := waitIDs([]int64{1, 2, 3})
	at := txs[len(txs)-1].seq + 1 // where the marker will go

	hold.Pause()
	vip.SwitchKeep(primary.Addr())
	primary.Exec(t, "INSERT INTO shop.orders VALUES (4)")
	if err := p.Store.Open(context.Background(), "slow", OpenOptions{Start: Start{Kind: StartEarliest}}); err != nil {
		t.Fatal(err)
	}
	slowReplay := func() *Pipeline {
		p.Store.mu.Lock()
		defer p.Store.mu.Unlock()
		r := p.Store.clients["slow"].replay
		if r == nil {
			t.Fatal("the slow client is not served by a replay reader")
		}
		return r
	}
	// The replay reads on to 4 from the primary; it takes no point the
	// live run has not taken (group.Config.LiveOrder): it waits before
	// seq at.
	retry.Until(t, time.Minute, func() error {
		r := slowReplay()
		if st := r.Dest.Stats(); st.Seq != at-1 {
			return fmt.Errorf("the replay is at seq %d; want %d", st.Seq, at-1)
		}
		return nil
	})

	l := loseAndAccept(t, tp, replica, vip, p)
	replica.Exec(t, "INSERT INTO shop.orders VALUES (5)")
	txs = waitIDs([]int64{1, 2, 3, -1, 5})
	if txs[len(txs)-2].seq != at || txs[len(txs)-2].lost != l.Lost {
		t.Fatalf("the live client's marker: %+v; want the loss %s at seq %d", txs[len(txs)-2], l.Lost, at)
	}
	// Once the live run took seq at (the marker), the replay takes 4 there.
	retry.Until(t, time.Minute, func() error {
		r := slowReplay()
		r.Store.mu.Lock()
		defer r.Store.mu.Unlock()
		for _, e := range r.Store.entries {
			if e.ev.Seq == at && e.ev.Type == change.EventRows && e.ev.Rows[0].After()[0] == int64(4) {
				return nil
			}
		}
		return fmt.Errorf("the replay holds no row 4 at seq %d yet", at)
	})

	retry.Until(t, time.Minute, func() error {
		if f := p.Store.Stats().Floor; f < at+1 {
			return fmt.Errorf("the store's floor is %d, want %d", f, at+1)
		}
		return nil
	})

	// Each transaction the slow client gets is the live client's at its
	// seq; its replay, which holds 4 at the marker's seq, is ended there.
	slow := &lostClient{}
	check := func() {
		t.Helper()
		for _, tx := range slow.got() {
			i := slices.IndexFunc(txs, func(x lostTx) bool { return x.seq == tx.seq })
			if i < 0 || tx.lost != txs[i].lost || !slices.Equal(tx.ids, txs[i].ids) {
				t.Fatalf("the slow client got %+v; the live client has %+v", tx, txs)
			}
		}
	}
	var diverged error
	retry.Until(t, time.Minute, func() error {
		err := readOne(context.Background(), p.Store, "slow", slow)
		check()
		if errors.Is(err, ErrReplayDiverged) {
			diverged = err
			return nil
		}
		if err != nil {
			t.Fatalf("the slow client: %v; want ErrReplayDiverged", err)
		}
		return fmt.Errorf("the slow client has %v, no error yet", lostIDs(slow.got()))
	})
	t.Logf("the slow client was told: %v", diverged)
	if got := lostIDs(slow.got()); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("before the error the slow client got %v, want 1 2 3", got)
	}
	// Read again: a new replay from its cursor goes on past the loss.
	retry.Until(t, time.Minute, func() error {
		if err := readOne(context.Background(), p.Store, "slow", slow); err != nil {
			t.Fatalf("the slow client, read again: %v", err)
		}
		check()
		if got := len(slow.got()); got < len(txs) {
			return fmt.Errorf("the slow client has %d transactions, the live one %d", got, len(txs))
		}
		return nil
	})
	// The rows against the source: the promoted server's, and 3, whose
	// loss was accepted; never 4.
	var rows []int64
	for _, tx := range slow.got() {
		rows = append(rows, tx.ids...)
	}
	slices.Sort(rows)
	want := append(replica.Ints(t, "SELECT id FROM shop.orders"), 3)
	slices.Sort(want)
	if !slices.Equal(rows, want) {
		t.Errorf("the slow client's rows %v; the source's with the lost 3: %v", rows, want)
	}
}

// follow reads client's batches into into, acking each, until the test
// ends or a read fails.
func follow(t *testing.T, s *Store, client string, into *lostClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := readOne(ctx, s, client, into); err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
				t.Errorf("client %s: %v", client, err)
				return
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitLostIDs waits until c has the ids want (-1: a LOST marker), and
// returns its transactions.
func waitLostIDs(t *testing.T, c *lostClient, want []int64) []lostTx {
	t.Helper()
	var txs []lostTx
	retry.Until(t, time.Minute, func() error {
		if txs = c.got(); !slices.Equal(lostIDs(txs), want) {
			return fmt.Errorf("the client has %v, want %v (-1: the LOST marker)", lostIDs(txs), want)
		}
		return nil
	})
	return txs
}

// slowAndFast is the start of the tests of a client before a loss: a
// primary with a GTID replica behind a virtual IP, a destination of it
// serving "slow", which acked up to 2 and stopped reading, and "fast",
// which read on through 3 and 4, written after the replica stopped
// replicating (lost when the primary dies).
type slowAndFast struct {
	tp      *mysqltest.Topology
	replica *mysqltest.Server
	vip     *tcpproxy.Proxy
	ds      *spec.Spec
	log     *slog.Logger
	first   *Pipeline
	fast    *lostClient
	txs     []lostTx // fast's transactions, up to 4
}

func startSlowAndFast(t *testing.T, keep group.Keeper) *slowAndFast {
	t.Helper()
	f := shoptest.StartFailover(t)
	tp, primary, replica, vip := f.Topology, f.Primary, f.Replica, f.VIP
	ds, err := spec.Parse([]byte(f.SpecYAML("")))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	first, err := StartPipeline(context.Background(), PipelineConfig{Spec: ds, Serve: true, Keep: keep, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	first.Store.Subscribe("slow")
	first.Store.Subscribe("fast")
	slow := &lostClient{}
	retry.Until(t, time.Minute, func() error {
		if err := readOne(context.Background(), first.Store, "slow", slow); err != nil {
			t.Fatal(err)
		}
		if got := lostIDs(slow.got()); !slices.Equal(got, []int64{1, 2}) {
			return fmt.Errorf("slow has %v, want 1 2", got)
		}
		return nil
	})
	fast := &lostClient{}
	follow(t, first.Store, "fast", fast)
	waitLostIDs(t, fast, []int64{1, 2})
	tp.StopReplication(t, replica)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)", "INSERT INTO shop.orders VALUES (4)")
	txs := waitLostIDs(t, fast, []int64{1, 2, 3, 4})
	return &slowAndFast{tp: tp, replica: replica, vip: vip, ds: ds, log: log, first: first, fast: fast, txs: txs}
}

// restart starts the destination again from clients' cursors, writes id
// on the promoted replica and waits until fast, read from the new run,
// has the ids want (-1: the LOST marker); it fails if the run stops.
func (r *slowAndFast) restart(t *testing.T, keep group.Keeper, clients map[string]*group.Cursor, id int64, want []int64) (*Pipeline, *lostClient) {
	t.Helper()
	p, err := StartPipeline(context.Background(), PipelineConfig{Spec: r.ds, Serve: true, Keep: keep, Logger: r.log, Clients: clients})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r.replica.Exec(t, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d)", id))
	fast := &lostClient{}
	follow(t, p.Store, "fast", fast)
	retry.Until(t, time.Minute, func() error {
		select {
		case <-p.Done():
			t.Fatalf("the restarted destination stopped: %v", p.Err())
		default:
		}
		if got := lostIDs(fast.got()); !slices.Equal(got, want) {
			return fmt.Errorf("after the restart fast has %v, want %v (-1: the LOST marker)", got, want)
		}
		return nil
	})
	return p, fast
}

// TestRestartWithClientBeforeLoss: a destination serves two consumers;
// "slow" acked up to 2 and stopped reading, "fast" read everything: 3
// and 4, which the promoted replica lacks, the LOST marker once the
// loss is accepted, then the replica's 10. The destination restarts
// from the clients' kept cursors (a capture restart, a new owner): slow's
// lies before the lost transactions, which no server has now. It is
// refused alone, with one line naming the loss, the marker's seq and the
// fix; fast goes on with the same seqs, and the restart knows where the
// marker went out (kept with the accept). Restarted with slow alone, the
// destination starts after the marker, not from slow's cursor, and
// serves a new client from the marker. The old code started the run from the slowest
// cursor, and the whole destination stopped with ErrLostBefore.
func TestRestartWithClientBeforeLoss(t *testing.T) {
	keep := &group.MemKeeper{}
	r := startSlowAndFast(t, keep)
	ds, log, first, replica, fast := r.ds, r.log, r.first, r.replica, r.fast
	l := loseAndAccept(t, r.tp, replica, r.vip, first)
	replica.Exec(t, "INSERT INTO shop.orders VALUES (10)")
	txs := waitLostIDs(t, fast, []int64{1, 2, 3, 4, -1, 10})
	seqOf := func(id int64) uint64 {
		for _, tx := range txs {
			if (id < 0 && tx.lost != "") || slices.Contains(tx.ids, id) {
				return tx.seq
			}
		}
		t.Fatalf("no transaction wrote %d", id)
		return 0
	}
	marker, ten := seqOf(-1), seqOf(10)
	clients := map[string]*group.Cursor{"slow": first.Store.Mark("slow"), "fast": first.Store.Mark("fast")}
	if clients["slow"].Seq != seqOf(2) || clients["fast"].Seq != ten {
		t.Fatalf("cursors: slow at seq %d, fast at %d; want %d and %d", clients["slow"].Seq, clients["fast"].Seq, seqOf(2), ten)
	}
	first.Close()

	second, fast2 := r.restart(t, keep, clients, 11, []int64{11})
	if got := fast2.got()[0].seq; got != ten+1 {
		t.Errorf("after the restart 11 has seq %d, want %d", got, ten+1)
	}
	_, err := second.Store.Get(context.Background(), "slow", 256, 100*time.Millisecond)
	if !errors.Is(err, ErrBeforeLoss) || !strings.Contains(err.Error(), l.Lost) || !strings.Contains(err.Error(), fmt.Sprintf("seq:%d", marker)) ||
		!strings.Contains(err.Error(), "braid consumer drop shop slow") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("slow after the restart: %v; want one line with ErrBeforeLoss naming %s, seq:%d and braid consumer drop", err, l.Lost, marker)
	}
	t.Logf("slow was told: %v", err)
	for _, c := range second.Store.Clients() {
		if (c.ID == "slow") != (c.Refused == err.Error()) {
			t.Errorf("client %s listed as refused: %q", c.ID, c.Refused)
		}
	}
	if acc := second.Dest.Stats().Sources[0].Accepted; len(acc) != 1 || acc[0].MarkerSeq != marker {
		t.Errorf("after the restart accepted losses %+v; want the marker at seq %d", acc, marker)
	}
	// A new client at earliest would need a replay from the start, before
	// the loss: refused at once, with the same line.
	err = second.Store.Open(context.Background(), "early", OpenOptions{Start: Start{Kind: StartEarliest}})
	if !errors.Is(err, ErrBeforeLoss) || !strings.Contains(err.Error(), fmt.Sprintf("seq:%d", marker)) {
		t.Errorf("a new client at earliest: %v; want ErrBeforeLoss naming seq:%d", err, marker)
	}
	// Subscribed again at the marker's seq, as slow is told, a client is
	// replayed from right before the marker: it gets the marker and on.
	if err := second.Store.Open(context.Background(), "again", OpenOptions{Start: Start{Kind: StartSeq, Seq: marker}}); err != nil {
		t.Fatal(err)
	}
	again := &lostClient{}
	follow(t, second.Store, "again", again)
	got := waitLostIDs(t, again, []int64{-1, 10, 11})
	if got[0].seq != marker || got[0].lost != l.Lost {
		t.Errorf("subscribed at seq:%d, the client got %+v first; want the marker of %s", marker, got[0], l.Lost)
	}
	second.Close()

	// slow alone: the run starts after the marker and serves a new client.
	third, err := StartPipeline(context.Background(), PipelineConfig{Spec: ds, Serve: true, Keep: keep, Logger: log,
		Clients: map[string]*group.Cursor{"slow": clients["slow"]}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(third.Close)
	if err := third.Store.Open(context.Background(), "new", OpenOptions{Start: Start{Kind: StartSeq, Seq: marker}}); err != nil {
		t.Fatal(err)
	}
	replica.Exec(t, "INSERT INTO shop.orders VALUES (12)")
	late := &lostClient{}
	follow(t, third.Store, "new", late)
	retry.Until(t, time.Minute, func() error {
		select {
		case <-third.Done():
			t.Fatalf("the destination restarted with slow alone stopped: %v", third.Err())
		default:
		}
		if got := lostIDs(late.got()); !slices.Equal(got, []int64{-1, 10, 11, 12}) {
			return fmt.Errorf("the new client has %v, want the marker, 10 11 12", got)
		}
		return nil
	})
	if got := late.got(); got[0].seq != marker || got[3].seq != marker+3 {
		t.Errorf("the marker and 12 have seqs %d and %d, want %d and %d", got[0].seq, got[3].seq, marker, marker+3)
	}
}

// markerRefuser is a keeper that refuses to keep where a LOST marker
// goes out while refuse holds, as a keeper out of reach would.
type markerRefuser struct {
	*group.MemKeeper
	refuse atomic.Bool
}

func (k *markerRefuser) KeepPlacement(ctx context.Context, p group.Placement) error {
	if p.MarkerSeq != 0 && k.refuse.Load() {
		return errors.New("the keeper is out of reach")
	}
	return k.MemKeeper.KeepPlacement(ctx, p)
}

// TestRestartWithClientBeforeUnmarkedLoss: as TestRestartWithClientBeforeLoss,
// but the run that accepts the loss ends before its LOST marker goes out
// (here the keeper cannot keep where it goes out; in use, the store full
// behind a slow client). The accept is kept, the marker is not. The
// restart from the clients' cursors refuses slow alone, whose cursor lacks
// the lost transactions, with one line naming them and the fix; fast goes
// on: it gets the marker right after its cursor, then the replica's 10.
// The old code started the run from slow's cursor, and the whole
// destination stopped with binlog's ErrLostBefore.
func TestRestartWithClientBeforeUnmarkedLoss(t *testing.T) {
	keep := &markerRefuser{MemKeeper: &group.MemKeeper{}}
	r := startSlowAndFast(t, keep)
	first, txs := r.first, r.txs
	keep.refuse.Store(true)
	l := loseAndAccept(t, r.tp, r.replica, r.vip, first)
	select {
	case <-first.Done():
	case <-time.After(time.Minute):
		t.Fatal("the run went on though its keeper refused the LOST marker")
	}
	if err := first.Err(); err == nil || !strings.Contains(err.Error(), "out of reach") {
		t.Fatalf("the first run ended with %v; want the keeper's refusal", err)
	}
	clients := map[string]*group.Cursor{"slow": first.Store.Mark("slow"), "fast": first.Store.Mark("fast")}
	first.Close()
	placed, err := keep.Placements()
	if err != nil {
		t.Fatal(err)
	}
	if got := group.UnmarkedLosses(placed); len(got) != 1 || got[0].Lost != l.Lost {
		t.Fatalf("unmarked losses kept: %+v; want %s", got, l.Lost)
	}
	seqOf := func(id int64) uint64 {
		for _, tx := range txs {
			if slices.Contains(tx.ids, id) {
				return tx.seq
			}
		}
		t.Fatalf("no transaction wrote %d", id)
		return 0
	}
	two, four := seqOf(2), seqOf(4)
	if clients["slow"].Seq != two || clients["fast"].Seq != four {
		t.Fatalf("cursors: slow at seq %d, fast at %d; want %d and %d", clients["slow"].Seq, clients["fast"].Seq, two, four)
	}

	keep.refuse.Store(false)
	second, fast2 := r.restart(t, keep, clients, 10, []int64{-1, 10})
	if got := fast2.got(); got[0].seq != four+1 || got[0].lost != l.Lost || got[1].seq != four+2 {
		t.Errorf("after the restart fast got %+v; want the marker of %s at seq %d, 10 at %d", got, l.Lost, four+1, four+2)
	}
	_, err = second.Store.Get(context.Background(), "slow", 256, 100*time.Millisecond)
	if !errors.Is(err, ErrBeforeLoss) || !strings.Contains(err.Error(), l.Lost) || !strings.Contains(err.Error(), "braid consumer drop shop slow") ||
		!strings.Contains(err.Error(), "braid destination show shop") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("slow after the restart: %v; want one line with ErrBeforeLoss naming %s, braid consumer drop and where the marker's seq shows", err, l.Lost)
	}
	t.Logf("slow was told: %v", err)
	if acc := second.Dest.Stats().Sources[0].Accepted; len(acc) != 1 || acc[0].MarkerSeq != four+1 {
		t.Errorf("after the restart accepted losses %+v; want the marker at seq %d", acc, four+1)
	}
}

// TestRestartWithClientAtLoss: the failed primary's last transactions
// before the loss are on a table the destination does not select (a
// heartbeat table), so the source's point the LOST marker follows lies
// past the last transaction emitted before it. Client "at" read up to
// that transaction, right before the marker, and stopped; the
// destination restarts from the clients' cursors. "at" has every
// transaction before the marker: it is served the marker and on, with
// the same seqs, as "fast" is served on. The old code took its cursor,
// short of the marker's source point, for one before the loss and
// refused it.
func TestRestartWithClientAtLoss(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	replica.FlushLogs(t)
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)", "CREATE TABLE shop.beat (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)")
	tp.WaitCaughtUp(t)
	vip := tcpproxy.Start(t, primary.Addr())
	ds, err := spec.Parse(fmt.Appendf(nil, "name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\n", vip.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	keep := &group.MemKeeper{}
	first, err := StartPipeline(context.Background(), PipelineConfig{Spec: ds, Serve: true, Keep: keep, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	first.Store.Subscribe("at")
	first.Store.Subscribe("fast")
	fast := &lostClient{}
	follow(t, first.Store, "fast", fast)
	waitLostIDs(t, fast, []int64{1})
	tp.StopReplication(t, replica)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (2)", "INSERT INTO shop.beat VALUES (1)", "INSERT INTO shop.beat VALUES (2)")
	at := &lostClient{}
	retry.Until(t, time.Minute, func() error {
		if err := readOne(context.Background(), first.Store, "at", at); err != nil {
			t.Fatal(err)
		}
		if got := lostIDs(at.got()); !slices.Equal(got, []int64{1, 2}) {
			return fmt.Errorf("at has %v, want 1 2", got)
		}
		return nil
	})
	// The merge moved the source past the heartbeat table's transactions.
	end := primary.GTIDBinlogPos(t)
	retry.Until(t, time.Minute, func() error {
		if got := first.Dest.Stats().Sources[0].GTIDs; got != end {
			return fmt.Errorf("the merge's source at %s, want %s", got, end)
		}
		return nil
	})
	l := loseAndAccept(t, tp, replica, vip, first)
	replica.Exec(t, "INSERT INTO shop.orders VALUES (10)")
	txs := waitLostIDs(t, fast, []int64{1, 2, -1, 10})
	var marker, ten uint64
	for _, tx := range txs {
		switch {
		case tx.lost != "":
			marker = tx.seq
		case slices.Equal(tx.ids, []int64{10}):
			ten = tx.seq
		}
	}
	clients := map[string]*group.Cursor{"at": first.Store.Mark("at"), "fast": first.Store.Mark("fast")}
	if clients["at"].Seq != marker-1 || clients["fast"].Seq != ten {
		t.Fatalf("cursors: at at seq %d, fast at %d; want %d and %d", clients["at"].Seq, clients["fast"].Seq, marker-1, ten)
	}
	first.Close()

	second, err := StartPipeline(context.Background(), PipelineConfig{Spec: ds, Serve: true, Keep: keep, Logger: log, Clients: clients})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	replica.Exec(t, "INSERT INTO shop.orders VALUES (11)")
	at2, fast2 := &lostClient{}, &lostClient{}
	if err := readOne(context.Background(), second.Store, "at", at2); err != nil {
		t.Fatalf("at, right before the marker: %v", err)
	}
	follow(t, second.Store, "at", at2)
	follow(t, second.Store, "fast", fast2)
	retry.Until(t, time.Minute, func() error {
		select {
		case <-second.Done():
			t.Fatalf("the restarted destination stopped: %v", second.Err())
		default:
		}
		if got := lostIDs(fast2.got()); !slices.Equal(got, []int64{11}) {
			return fmt.Errorf("after the restart fast has %v, want 11", got)
		}
		if got := lostIDs(at2.got()); !slices.Equal(got, []int64{-1, 10, 11}) {
			return fmt.Errorf("after the restart at has %v, want the marker, 10 11", got)
		}
		return nil
	})
	if got := at2.got(); got[0].seq != marker || got[0].lost != l.Lost || got[1].seq != ten || got[2].seq != ten+1 {
		t.Errorf("after the restart at got %+v; want the marker of %s at seq %d, 10 at %d, 11 at %d", got, l.Lost, marker, ten, ten+1)
	}
}

// loseAndAccept kills tp's primary, promotes replica (stopped behind
// it), moves vip to it, waits until p's source a waits on the loss and
// accepts it, as an operator would.
func loseAndAccept(t *testing.T, tp *mysqltest.Topology, replica *mysqltest.Server, vip *tcpproxy.Proxy, p *Pipeline) change.Loss {
	t.Helper()
	shoptest.Lose(t, tp, replica, vip, func() bool { return p.Dest.Stats().Sources[0].Lost != "" })
	l, err := p.Dest.AcceptLost(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	return l
}
