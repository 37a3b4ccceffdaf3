package clustertest

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/internal/ports"
	"github.com/braid-cdc/braid/raftstore"
)

// Timeout bounds every wait of the harness (a leader, an owner, agreement,
// a node's start and stop). It is a ceiling for a failing test, not an
// expected time: under -race on two cores a cluster forms in about two
// seconds and a takeover after a crash takes about three.
const Timeout = 20 * time.Second

// Cluster is a braid cluster of real cluster.Node values in this process.
// Its methods call t.Fatal on failure and must be called from the test's
// goroutine.
type Cluster struct {
	t     testing.TB
	opts  options
	nodes []*Node
	sec   *security
	log   *logWriter
	// http asks the nodes without following redirects, so that a test
	// sees which node answers.
	http *http.Client
}

// Option changes how Start builds the cluster.
type Option func(*options)

type options struct {
	config func(*cluster.Config)
	level  slog.Level
}

// WithConfig lets f change each node's cluster.Config before it starts
// (Lease, CursorInterval, CanalPort...). Name, DataDir, Addr, the ports,
// Join, BootstrapExpect, RaftAdvertise and GossipTransport are the
// harness's and must be left alone; TLS, GossipKey and Users are the
// harness's protection, which a test may take away.
func WithConfig(f func(*cluster.Config)) Option { return func(o *options) { o.config = f } }

// WithLogLevel sets the level of the nodes' logs, which go to the test's
// output (shown for failed tests and with -v). Default: slog.LevelWarn.
func WithLogLevel(l slog.Level) Option { return func(o *options) { o.level = l } }

// Start starts n nodes named n1…nn on loopback ports, bootstraps them as
// one cluster (BootstrapExpect n, each joining the others' gossip), and
// waits until every node sees every other alive and they agree on a Raft
// leader. t.Cleanup stops every node and the harness's own goroutines.
//
// Start sets GOMEMLIMIT=off for the test (t.Setenv, so the test must not
// be parallel): each node would otherwise set this process's memory limit
// to its own destinations' bound.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	o := options{level: slog.LevelWarn}
	for _, f := range opts {
		f(&o)
	}
	t.Setenv("GOMEMLIMIT", "off")
	c := &Cluster{t: t, opts: o, log: &logWriter{w: t.Output()},
		http: &http.Client{
			Transport:     asAdmin{&http.Transport{DisableKeepAlives: true}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       Timeout,
		}}
	// Raft, its proxy, gossip and HTTP for each node.
	ps, err := ports.FreeLoopback(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if c.sec, err = newSecurity(t); err != nil {
		t.Fatalf("clustertest: certificates and users: %v", err)
	}
	for i := range n {
		nd := &Node{Name: fmt.Sprintf("n%d", i+1), c: c}
		p := ps[4*i : 4*i+4]
		nodeTLS, err := c.sec.nodeTLS(nd.Name)
		if err != nil {
			t.Fatalf("clustertest: certificate of %s: %v", nd.Name, err)
		}
		nd.cfg = cluster.Config{Name: nd.Name, DataDir: filepath.Join(dir, nd.Name), Addr: "127.0.0.1",
			RaftPort: p[0], GossipPort: p[2], HTTPPort: p[3], BootstrapExpect: n,
			TLS: nodeTLS, GossipKey: c.sec.gossipKey, Users: c.sec.users}
		nd.proxy, err = listenProxy(hostPort(p[1]), hostPort(p[0]))
		if err != nil {
			c.cleanup()
			t.Fatalf("raft proxy of %s: %v", nd.Name, err)
		}
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(c.cleanup)
	for _, nd := range c.nodes {
		nd.start()
	}
	c.WaitFor("every node to see every other", func() (bool, string) { return c.meshed() })
	c.Leader()
	return c
}

func hostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// cleanup stops every node, then the proxies, then the logs.
func (c *Cluster) cleanup() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.shutdown(false) })
	}
	wg.Wait()
	for _, n := range c.nodes {
		if n.proxy != nil {
			n.proxy.close()
		}
	}
	c.log.close()
}

// Nodes returns every node, up or down, in name order.
func (c *Cluster) Nodes() []*Node { return slices.Clone(c.nodes) }

// Node returns the node of that name.
func (c *Cluster) Node(name string) *Node {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.Name == name {
			return n
		}
	}
	c.t.Fatalf("no node %s", name)
	return nil
}

// Connected returns the nodes that run and are not cut off, in name order.
func (c *Cluster) Connected() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.Running() && !n.Isolated() {
			out = append(out, n)
		}
	}
	return out
}

// URLs returns every node's HTTP base URL, for the Go client.
func (c *Cluster) URLs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.URL())
	}
	return out
}

// WaitFor waits until cond holds, for at most Timeout; then it fails the
// test with what the last call of cond said.
func (c *Cluster) WaitFor(what string, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("clustertest: waited %v for %s: %s", Timeout, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// meshed: every connected node's gossip sees exactly the connected nodes.
func (c *Cluster) meshed() (bool, string) {
	var want []string
	for _, n := range c.Connected() {
		want = append(want, n.Name)
	}
	for _, n := range c.Connected() {
		var got []string
		for _, m := range n.node.Members() {
			got = append(got, m.Name)
		}
		if !slices.Equal(got, want) {
			return false, fmt.Sprintf("%s sees %v, want %v", n.Name, got, want)
		}
	}
	return true, ""
}

// Leader waits until the connected nodes agree on a leader among them and
// returns it.
func (c *Cluster) Leader() *Node {
	c.t.Helper()
	var lead *Node
	c.WaitFor("an agreed leader", func() (bool, string) {
		lead = nil
		views := map[string]string{}
		for _, n := range c.Connected() {
			id, _ := n.node.Raft().Leader()
			views[n.Name] = id
			if n.node.Raft().IsLeader() {
				lead = n
			}
		}
		if lead == nil {
			return false, fmt.Sprintf("no connected leader; leaders seen %v", views)
		}
		for _, id := range views {
			if id != lead.Name {
				return false, fmt.Sprintf("leaders seen %v", views)
			}
		}
		return true, ""
	})
	return lead
}

// Followers returns the connected nodes other than the leader.
func (c *Cluster) Followers() []*Node {
	c.t.Helper()
	lead := c.Leader()
	var out []*Node
	for _, n := range c.Connected() {
		if n != lead {
			out = append(out, n)
		}
	}
	return out
}

// Assignments returns the leader's assignments, by destination.
func (c *Cluster) Assignments() map[string]raftstore.Assignment {
	c.t.Helper()
	out := map[string]raftstore.Assignment{}
	for _, a := range c.Leader().node.Raft().Assignments() {
		out[a.Destination] = a
	}
	return out
}

// EnsureSame waits until every connected node holds the same leader,
// destinations and assignments, every destination owned by a connected
// node, and returns those assignments. Cursors are not compared: owners
// write them all the time.
func (c *Cluster) EnsureSame() map[string]raftstore.Assignment {
	c.t.Helper()
	var out map[string]raftstore.Assignment
	c.WaitFor("the nodes to agree on the assignments", func() (bool, string) {
		ok, why := c.same()
		if ok {
			out = map[string]raftstore.Assignment{}
			for _, a := range c.Connected()[0].node.Raft().Assignments() {
				out[a.Destination] = a
			}
		}
		return ok, why
	})
	return out
}

func (c *Cluster) same() (bool, string) {
	conn := c.Connected()
	if len(conn) == 0 {
		return false, "no node connected"
	}
	view := func(n *Node) string {
		id, _ := n.node.Raft().Leader()
		return fmt.Sprintf("leader %s, %v", id, n.node.Raft().Assignments())
	}
	first := view(conn[0])
	for _, n := range conn[1:] {
		if v := view(n); v != first {
			return false, fmt.Sprintf("%s: %s; %s: %s", conn[0].Name, first, n.Name, v)
		}
	}
	for _, a := range conn[0].node.Raft().Assignments() {
		if o := c.find(a.Owner); o == nil || !o.Running() || o.Isolated() {
			return false, fmt.Sprintf("%s is owned by %q, which is not connected: %s", a.Destination, a.Owner, first)
		}
	}
	return true, ""
}

func (c *Cluster) find(name string) *Node {
	for _, n := range c.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Owner waits until the connected nodes agree on the destination's owner
// (EnsureSame) and that owner serves it (past its takeover wait), and
// returns the owner and the assignment's epoch.
func (c *Cluster) Owner(dest string) (*Node, uint64) {
	c.t.Helper()
	return c.WaitOwner(dest, func(*Node, uint64) bool { return true })
}

// WaitOwner is Owner for an owner and epoch that also satisfy cond (a
// takeover: another node, a higher epoch).
func (c *Cluster) WaitOwner(dest string, cond func(owner *Node, epoch uint64) bool) (*Node, uint64) {
	c.t.Helper()
	var (
		owner *Node
		epoch uint64
	)
	c.WaitFor("destination "+dest+" to be served by an owner the nodes agree on", func() (bool, string) {
		if ok, why := c.same(); !ok {
			return false, why
		}
		a, err := c.Connected()[0].node.Raft().Assignment(dest)
		if err != nil {
			return false, err.Error()
		}
		owner, epoch = c.find(a.Owner), a.Epoch
		if !cond(owner, epoch) {
			return false, fmt.Sprintf("owned by %s at epoch %d", a.Owner, a.Epoch)
		}
		if err := owner.Serving(dest); err != nil {
			return false, fmt.Sprintf("owner %s at epoch %d: %v", a.Owner, a.Epoch, err)
		}
		return true, ""
	})
	return owner, epoch
}

// Create stores a destination from its spec (YAML or JSON) through the
// first connected node's HTTP API, as `braid destination create` does;
// the node checks every source first.
func (c *Cluster) Create(spec string) {
	c.t.Helper()
	conn := c.Connected()
	if len(conn) == 0 {
		c.t.Fatal("clustertest: no node connected to create a destination through")
	}
	conn[0].Create(spec)
}

// logWriter passes the nodes' logs to the test's output until the
// harness has stopped them; a line from a goroutine that outlives the
// test is dropped instead of panicking.
type logWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return len(p), nil
	}
	return l.w.Write(p)
}

func (l *logWriter) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// post sends body to url and returns the status and the answer.
func (c *Cluster) post(url, body string) (int, string, error) {
	resp, err := c.http.Post(url, "application/yaml", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	io.Copy(&b, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, b.String(), nil
}
