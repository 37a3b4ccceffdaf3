package e2e

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	canalclient "github.com/withlin/canal-go/client"
	pbe "github.com/withlin/canal-go/protocol/entry"
	pbp "github.com/withlin/canal-go/protocol/packet"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
)

// received is one flat message as the failover tests' consumer saw it.
type received struct {
	seq     uint64
	source  string
	db      string
	es      int64
	ids     []int64
	arrived time.Time
	table   string // the message's table (logical, or its origin's)
	ddl     string // a DDL message's statement
	lost    string // a LOST marker's lost transactions
}

// consumer streams a destination through every node of a cluster with the
// Go client, recording what arrives.
type consumer struct {
	arrivals
	stop context.CancelFunc
	done chan error
}

func startConsumer(t *testing.T, c *nodes.Cluster, dest, clientID string) *consumer {
	t.Helper()
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, n.URL())
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "consumer.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("consumer log:\n%s", b)
		}
	})
	app := c.Security.Consumer
	cl, err := client.New(joinComma(urls), client.WithToken(app.User, app.Password),
		client.WithBackoff(50*time.Millisecond, 500*time.Millisecond), client.WithAckInterval(100*time.Millisecond),
		client.WithLogger(slog.New(slog.NewTextHandler(logf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	cs := &consumer{stop: stop, done: make(chan error, 1)}
	go func() {
		cs.done <- cl.Stream(ctx, dest, clientID, func(m client.Message) error {
			r := received{seq: m.Seq, source: m.Source, db: m.OriginDatabase, es: m.Es, arrived: time.Now(), table: m.Table}
			if m.IsDdl {
				r.ddl = m.SQL
			}
			if m.Type == client.TypeLost {
				r.lost = m.SQL
			}
			if m.Type == "INSERT" {
				for _, row := range m.Data {
					id, _ := strconv.ParseInt(*row["id"], 10, 64)
					r.ids = append(r.ids, id)
				}
			}
			cs.add(r)
			return nil
		})
	}()
	t.Cleanup(func() { stop(); <-cs.done })
	go func() {
		// Stream returns before the test stops it only on an error that
		// no retry can mend.
		select {
		case err := <-cs.done:
			if ctx.Err() == nil {
				t.Errorf("consumer stopped: %v", err)
			}
			cs.done <- err
		case <-ctx.Done():
		}
	}()
	return cs
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// arrivals are the messages a test's consumer received, safe for its
// reading goroutine and the test.
type arrivals struct {
	mu   sync.Mutex
	msgs []received
}

func (a *arrivals) add(r received) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.msgs = append(a.msgs, r)
}

// snapshot returns what arrived so far.
func (a *arrivals) snapshot() []received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.msgs)
}

// lastArrival is when the latest message came.
func (a *arrivals) lastArrival() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.msgs) == 0 {
		return time.Time{}
	}
	return a.msgs[len(a.msgs)-1].arrived
}

// writer inserts one row a transaction into a shard's two schemas, as
// fast as pace allows, recording the ids committed.
type writer struct {
	mu        sync.Mutex
	committed []int64
	stop      chan struct{}
	done      chan struct{}
	err       error
}

func startWriter(t *testing.T, srv *mysqltest.Server, shard int, pace time.Duration) *writer {
	t.Helper()
	conn := srv.Conn(t)
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for k := 1; ; k++ {
			select {
			case <-w.stop:
				return
			case <-time.After(pace):
			}
			db := 2*shard + k%2
			id := int64(shard)*1_000_000 + int64(k)
			if _, err := conn.Execute(fmt.Sprintf("INSERT INTO shop_%d.orders (id, shard, note) VALUES (%d, %d, 'k%d')", db, id, db, k)); err != nil {
				w.err = err
				return
			}
			w.mu.Lock()
			w.committed = append(w.committed, id)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *writer) halt(t *testing.T) []int64 {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	return w.committed
}

// checkStream checks what the consumer got against what was committed:
// every row once, each schema's rows in commit order, seqs dense, and the
// transactions in merge-key order (commit second, then source index).
func checkStream(t *testing.T, msgs []received, committed []int64) {
	t.Helper()
	seen := map[int64]int{}
	lastID := map[string]int64{}
	sourceIndex := map[string]int{"a": 0, "b": 1, "c": 2}
	var prev *received
	for i := range msgs {
		m := &msgs[i]
		for _, id := range m.ids {
			seen[id]++
			if id <= lastID[m.db] {
				t.Errorf("schema %s: id %d after %d: shard order broken", m.db, id, lastID[m.db])
			}
			lastID[m.db] = id
		}
		if prev != nil && m.seq != prev.seq {
			if m.seq != prev.seq+1 {
				t.Errorf("seq %d after %d: not dense", m.seq, prev.seq)
			}
			if m.es/1000 < prev.es/1000 || (m.es/1000 == prev.es/1000 && sourceIndex[m.source] < sourceIndex[prev.source]) {
				t.Errorf("seq %d (source %s, es %d) after seq %d (source %s, es %d): merged order broken",
					m.seq, m.source, m.es, prev.seq, prev.source, prev.es)
			}
		}
		prev = m
	}
	missing := 0
	for _, id := range committed {
		if seen[id] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("committed row %d never arrived", id)
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("row %d arrived %d times", id, n)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d committed rows missing", missing, len(committed))
	}
}

// allArrived reports whether every committed id is among those received,
// and how many are missing.
func allArrived(received, committed []int64) (bool, string) {
	have := map[int64]bool{}
	for _, id := range received {
		have[id] = true
	}
	missing := 0
	for _, id := range committed {
		if !have[id] {
			missing++
		}
	}
	return missing == 0, fmt.Sprintf("%d of %d committed rows missing", missing, len(committed))
}

// waitRows waits until the consumer holds every committed row.
func waitRows(t *testing.T, c *nodes.Cluster, cs *consumer, committed []int64) {
	t.Helper()
	c.WaitFor(t, 60*time.Second, "every committed row at the consumer", func() (bool, string) {
		var ids []int64
		for _, m := range cs.snapshot() {
			ids = append(ids, m.ids...)
		}
		return allArrived(ids, committed)
	})
}

// TestClusterFailover kills the node that owns the destination five times
// under a steady write load on three shards (restarting it each time, so
// the cluster keeps three nodes), then kills the Raft leader: the consumer,
// given every node's address, gets every committed row once, in shard
// order and merged order, with dense seqs. The gap each takeover left at
// the consumer is logged.
func TestClusterFailover(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	c.OwnerOf(t, "shop")
	cs := startConsumer(t, c, "shop", "failover")
	var writers []*writer
	for i, s := range srvs {
		writers = append(writers, startWriter(t, s, i, 20*time.Millisecond))
	}
	var gaps []time.Duration
	for kill := 1; kill <= 5; kill++ {
		time.Sleep(1500 * time.Millisecond)
		owner, epoch := c.OwnerOf(t, "shop")
		c.WaitFor(t, 30*time.Second, "rows before the kill", func() (bool, string) {
			return time.Since(cs.lastArrival()) < time.Second, ""
		})
		before := cs.lastArrival()
		killedAt := time.Now()
		owner.Kill()
		c.WaitFor(t, 30*time.Second, fmt.Sprintf("rows after kill %d of owner %s", kill, owner.Name), func() (bool, string) {
			if cs.lastArrival().After(killedAt) {
				return true, ""
			}
			if time.Since(killedAt) > 25*time.Second {
				for _, n := range c.LiveNodes() {
					n.MustSignal(t, syscall.SIGQUIT) // goroutine dumps into the logs
				}
				var b strings.Builder
				pprof.Lookup("goroutine").WriteTo(&b, 1)
				os.WriteFile(filepath.Join(os.TempDir(), "consumer-goroutines.txt"), []byte(b.String()), 0o644)
				time.Sleep(time.Second)
			}
			return false, ""
		})
		gap := cs.lastArrival().Sub(before)
		for _, m := range cs.snapshot() {
			if m.arrived.After(killedAt) {
				gap = m.arrived.Sub(before)
				break
			}
		}
		gaps = append(gaps, gap)
		newOwner, newEpoch := c.OwnerOf(t, "shop")
		t.Logf("kill %d: owner %s (epoch %d) killed; %s took over (epoch %d); gap at the consumer %v",
			kill, owner.Name, epoch, newOwner.Name, newEpoch, gap.Round(time.Millisecond))
		if newEpoch <= epoch {
			t.Errorf("takeover kept epoch %d (was %d)", newEpoch, epoch)
		}
		owner.MustStart(t, c.Bin, c.JoinOf(owner))
		c.WaitFor(t, 30*time.Second, owner.Name+" back in the cluster", func() (bool, string) {
			st, err := c.StatusOf(owner)
			if err != nil {
				return false, err.Error()
			}
			alive := 0
			for _, n := range st.Nodes {
				if n.State == "alive" {
					alive++
				}
			}
			return alive == 3 && st.Leader != "", fmt.Sprintf("%+v", st.Nodes)
		})
	}

	// The Raft leader goes: ownership and cursors survive it.
	st, err := c.StatusOf(c.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	owner, epoch := c.OwnerOf(t, "shop")
	for _, n := range c.Nodes {
		if n.Name == st.Leader {
			n.Kill()
			t.Logf("killed the raft leader %s (owner %s)", n.Name, owner.Name)
		}
	}
	c.WaitFor(t, 30*time.Second, "a new leader", func() (bool, string) {
		st, err := c.StatusOf(c.LiveNodes()[0])
		return err == nil && st.Leader != "", fmt.Sprint(st.Leader, err)
	})
	time.Sleep(time.Second)

	var committed []int64
	for _, w := range writers {
		committed = append(committed, w.halt(t)...)
	}
	waitRows(t, c, cs, committed)
	checkStream(t, cs.snapshot(), committed)
	if after, afterEpoch := c.OwnerOf(t, "shop"); owner.Name != st.Leader && (after.Name != owner.Name || afterEpoch != epoch) {
		t.Errorf("killing the leader %s moved the destination: owner %s epoch %d → owner %s epoch %d", st.Leader, owner.Name, epoch, after.Name, afterEpoch)
	}
	slices.Sort(gaps)
	t.Logf("%d rows committed and received; failover gaps: %v (median %v, max %v)", len(committed), gaps, gaps[len(gaps)/2], gaps[len(gaps)-1])
}

// directStream reads a destination's stream from one node only (no
// redirect, no reconnect), recording when each line arrives.
type directStream struct {
	mu       sync.Mutex
	arrivals []time.Time
	ended    time.Time // when the stream ended, zero while it runs
}

func startDirectStream(t *testing.T, n *nodes.Node, dest, clientID string) *directStream {
	t.Helper()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/v1/destinations/"+dest+"/stream?client-id="+clientID, nil)
	req.SetBasicAuth(n.Security.Consumer.User, n.Security.Consumer.Password)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("direct stream from %s: %s", n.Name, resp.Status)
	}
	ds := &directStream{}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			ds.mu.Lock()
			ds.arrivals = append(ds.arrivals, time.Now())
			ds.mu.Unlock()
		}
		ds.mu.Lock()
		ds.ended = time.Now()
		ds.mu.Unlock()
	}()
	return ds
}

// after counts the lines that arrived after t.
func (ds *directStream) after(t time.Time) int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	n := 0
	for _, a := range ds.arrivals {
		if a.After(t) {
			n++
		}
	}
	return n
}

// TestClusterFencesStalledOwner stops the owner with SIGSTOP (a stalled,
// not dead, node): another node takes over and the consumer goes on; when
// the stalled node resumes, it sends nothing more to a consumer still
// connected to it, and leaves the destination to its successor.
func TestClusterFencesStalledOwner(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	owner, epoch := c.OwnerOf(t, "shop")
	cs := startConsumer(t, c, "shop", "main")
	var writers []*writer
	for i, s := range srvs {
		writers = append(writers, startWriter(t, s, i, 20*time.Millisecond))
	}
	c.WaitFor(t, 30*time.Second, "rows at the consumer", func() (bool, string) {
		return time.Since(cs.lastArrival()) < time.Second, ""
	})
	direct := startDirectStream(t, owner, "shop", "direct")
	c.WaitFor(t, 10*time.Second, "rows on the direct stream", func() (bool, string) {
		return direct.after(time.Time{}) > 0, ""
	})

	stoppedAt := time.Now()
	owner.MustSignal(t, syscall.SIGSTOP)
	var successor *nodes.Node
	c.WaitFor(t, 30*time.Second, "a successor serving the consumer", func() (bool, string) {
		others := []*nodes.Node{}
		for _, n := range c.Nodes {
			if n != owner {
				others = append(others, n)
			}
		}
		st, err := c.StatusOf(others[0])
		if err != nil {
			return false, err.Error()
		}
		for _, d := range st.Destinations {
			if d.Name == "shop" && d.Owner != owner.Name && d.Epoch > epoch {
				for _, n := range others {
					if n.Name == d.Owner {
						successor = n
					}
				}
			}
		}
		return successor != nil && cs.lastArrival().After(stoppedAt), fmt.Sprintf("%+v", st.Destinations)
	})
	var succeededAt time.Time
	for _, m := range cs.snapshot() {
		if m.arrived.After(stoppedAt) {
			succeededAt = m.arrived
			break
		}
	}
	t.Logf("owner %s stopped; %s serves since %v later", owner.Name, successor.Name, succeededAt.Sub(stoppedAt).Round(time.Millisecond))
	time.Sleep(2 * time.Second)

	resumedAt := time.Now()
	owner.MustSignal(t, syscall.SIGCONT)
	time.Sleep(4 * time.Second)
	if n := direct.after(resumedAt); n > 0 {
		t.Errorf("the stalled owner sent %d lines after it resumed, %v after its successor began serving", n, resumedAt.Sub(succeededAt))
	}
	direct.mu.Lock()
	ended := direct.ended
	direct.mu.Unlock()
	if ended.IsZero() {
		t.Errorf("the stalled owner's stream is still open %v after it resumed", time.Since(resumedAt).Round(time.Millisecond))
	}
	if now, _ := c.OwnerOf(t, "shop"); now.Name != successor.Name {
		t.Errorf("owner after the stalled node resumed: %s, want the successor %s", now.Name, successor.Name)
	}

	var committed []int64
	for _, w := range writers {
		committed = append(committed, w.halt(t)...)
	}
	waitRows(t, c, cs, committed)
	checkStream(t, cs.snapshot(), committed)
}

// TestClusterRebalance: three destinations spread one a node; a killed
// node's destination moves to a live one, and when the node comes back
// (from its data dir) the destinations spread out again.
func TestClusterRebalance(t *testing.T) {
	srvs := shoptest.Shards(t)
	c := nodes.Start(t, cli)
	for _, name := range []string{"shop1", "shop2", "shop3"} {
		spec := nodes.WriteSpec(t, fmt.Sprintf("name: %s\nsources:\n  - {name: a, address: '%s'}\ntables: ['shop_\\d+\\.orders']\n", name, srvs[0].Addr()))
		if _, errs, code := cli("destination", "create", "-f", spec, "--server", c.Nodes[0].URL()); code != 0 {
			t.Fatalf("create %s: %s", name, errs)
		}
	}
	// spread waits until every destination has a live owner and the live
	// nodes' loads are as even as can be, and returns the owners.
	spread := func(what string, live int) map[string]string {
		owners := map[string]string{}
		c.WaitFor(t, 30*time.Second, what, func() (bool, string) {
			st, err := c.StatusOf(c.LiveNodes()[0])
			if err != nil {
				return false, err.Error()
			}
			load := map[string]int{}
			clear(owners)
			for _, d := range st.Destinations {
				owners[d.Name] = d.Owner
				load[d.Owner]++
			}
			alive := map[string]bool{}
			for _, n := range st.Nodes {
				if n.State == "alive" {
					alive[n.Name] = true
					if load[n.Name] < 3/live || load[n.Name] > (3+live-1)/live {
						return false, fmt.Sprintf("loads %v", load)
					}
				}
			}
			for d, o := range owners {
				if !alive[o] {
					return false, fmt.Sprintf("%s on %q, not a live node", d, o)
				}
			}
			return len(alive) == live && len(owners) == 3, fmt.Sprintf("loads %v, %d alive", load, len(alive))
		})
		return owners
	}
	owners := spread("one destination a node", 3)
	victim := c.Nodes[1]
	victim.Kill()
	moved := spread("the killed node's destination on a live node", 2)
	for d, o := range moved {
		if o == victim.Name {
			t.Errorf("%s still on the killed node %s", d, victim.Name)
		}
	}
	victim.MustStart(t, c.Bin, c.JoinOf(victim))
	back := spread("one destination a node again, after the restart", 3)
	t.Logf("owners: %v; after %s was killed: %v; after it came back: %v", owners, victim.Name, moved, back)
}

// canalConsumer reads a destination with canal-go's SimpleCanalConnector
// through one node, reconnecting (to the same node, which relays to the
// owner) whenever the connection fails, and acking each batch after
// recording its rows.
type canalConsumer struct {
	mu   sync.Mutex
	ids  []int64 // in arrival order, with repeats
	last time.Time
	stop chan struct{}
	done chan struct{}
}

func startCanalConsumer(t *testing.T, n *nodes.Node, dest string, clientID int) *canalConsumer {
	t.Helper()
	cc := &canalConsumer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(cc.done)
		for {
			select {
			case <-cc.stop:
				return
			default:
			}
			cc.session(n, dest, clientID)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		select {
		case <-cc.stop:
		default:
			close(cc.stop)
		}
		<-cc.done
	})
	return cc
}

// session is one connection's life; canal-go panics on some failures.
func (cc *canalConsumer) session(n *nodes.Node, dest string, clientID int) {
	defer func() { recover() }()
	app := n.Security.Consumer // canal's login, against the users file
	c := canalclient.NewSimpleCanalConnector("127.0.0.1", n.CanalPort, app.User, app.Password, dest, 60000, 60000)
	c.ClientIdentity.ClientId = clientID
	if err := c.Connect(); err != nil {
		return
	}
	defer c.DisConnection()
	if err := c.Subscribe(`.*\..*`); err != nil {
		return
	}
	wait, unit := int64(200), int32(2)
	for {
		select {
		case <-cc.stop:
			return
		default:
		}
		m, err := c.GetWithOutAck(100, &wait, &unit)
		if err != nil {
			return
		}
		var rc pbe.RowChange
		for i := range m.Entries {
			e := &m.Entries[i]
			if e.GetEntryType() != pbe.EntryType_ROWDATA || proto.Unmarshal(e.StoreValue, &rc) != nil || rc.GetIsDdl() {
				continue
			}
			for _, rd := range rc.RowDatas {
				for _, col := range rd.AfterColumns {
					if col.Name == "id" {
						id, _ := strconv.ParseInt(col.Value, 10, 64)
						cc.mu.Lock()
						cc.ids = append(cc.ids, id)
						cc.last = time.Now()
						cc.mu.Unlock()
					}
				}
			}
		}
		if m.Id != -1 {
			if err := c.Ack(m.Id); err != nil {
				return
			}
		}
	}
}

// TestClusterCanalFailover: a canal-go client connected to a node that does
// not own the destination is relayed to the owner; when the owner is
// killed it reconnects to the same node and goes on from its cursor on the
// new owner: every committed row arrives, and each schema's rows in order
// except for the repeats. canal's acks get no answer, so what comes again is
// what the client had not acked plus what it acked after its cursor was
// last written to Raft (every cursor interval).
func TestClusterCanalFailover(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	owner, _ := c.OwnerOf(t, "shop")
	var entry *nodes.Node
	for _, n := range c.Nodes {
		if n != owner {
			entry = n
			break
		}
	}
	cc := startCanalConsumer(t, entry, "shop", 1001)
	var writers []*writer
	for i, s := range srvs {
		writers = append(writers, startWriter(t, s, i, 30*time.Millisecond))
	}
	c.WaitFor(t, 30*time.Second, "rows at the canal client", func() (bool, string) {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return len(cc.ids) > 50, ""
	})
	killedAt := time.Now()
	owner.Kill()
	c.WaitFor(t, 30*time.Second, "rows after the owner was killed", func() (bool, string) {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return cc.last.After(killedAt.Add(time.Second)), ""
	})
	var committed []int64
	for _, w := range writers {
		committed = append(committed, w.halt(t)...)
	}
	c.WaitFor(t, 60*time.Second, "every committed row at the canal client", func() (bool, string) {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return allArrived(cc.ids, committed)
	})
	cc.mu.Lock()
	ids := slices.Clone(cc.ids)
	cc.mu.Unlock()
	// Per schema (the id's shard and parity), ids only move forward except
	// where a batch not acked before the kill came again.
	repeats := len(ids) - len(committed)
	last := map[int64]int64{}
	backs := 0
	for _, id := range ids {
		key := id/1_000_000*2 + id%2
		if id <= last[key] {
			backs++
		}
		last[key] = max(last[key], id)
	}
	if backs > repeats {
		t.Errorf("%d rows out of shard order beyond the %d repeated ones", backs, repeats)
	}
	t.Logf("%d rows committed; the canal client got %d, %d of them again after the takeover (acked after the last cursor write, or not acked)", len(committed), len(ids), repeats)

	// The client unsubscribes: its cursor is deleted, so the destination
	// has no consumer left and deletes without --force.
	// (canal-go's UnSubscribe sends nothing while connected, so the
	// packets go by hand.)
	close(cc.stop)
	<-cc.done
	canalUnsubscribe(t, fmt.Sprintf("127.0.0.1:%d", entry.CanalPort), entry.Security.Consumer, "shop", "1001")
	c.WaitFor(t, 10*time.Second, "the unsubscribed client's cursor gone", func() (bool, string) {
		_, errs, code := cli("destination", "delete", "shop", "--server", entry.URL())
		return code == 0, errs
	})
}

// canalUnsubscribe logs in to a canal port and unsubscribes a client id,
// as canal's Java client does on unsubscribe().
func canalUnsubscribe(t *testing.T, addr string, login localcluster.Credential, dest, client string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	hsFrame, err := canal.ReadFrame(conn, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var hsPacket pbp.Packet
	var hs pbp.Handshake
	if proto.Unmarshal(hsFrame, &hsPacket) != nil || proto.Unmarshal(hsPacket.Body, &hs) != nil {
		t.Fatalf("undecodable handshake %x", hsFrame)
	}
	exchange := func(typ pbp.PacketType, body proto.Message) {
		b, _ := proto.Marshal(body)
		pkt, _ := proto.Marshal(&pbp.Packet{Type: typ, Body: b})
		frame, _ := canal.AppendFrame(nil, pkt)
		if _, err := conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		reply, err := canal.ReadFrame(conn, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		var p pbp.Packet
		var ack pbp.Ack
		if proto.Unmarshal(reply, &p) != nil || proto.Unmarshal(p.Body, &ack) != nil || ack.GetErrorCode() != 0 {
			t.Fatalf("%s refused: %s", typ, ack.GetErrorMessage())
		}
	}
	pw, seed := []byte(login.Password), hs.Seeds
	exchange(pbp.PacketType_CLIENTAUTHENTICATION, &pbp.ClientAuth{Username: login.User,
		Password: []byte(canalclient.ByteSliceToHexString(canalclient.Scramble411(&pw, &seed)))})
	exchange(pbp.PacketType_UNSUBSCRIPTION, &pbp.Unsub{Destination: dest, ClientId: client})
}
