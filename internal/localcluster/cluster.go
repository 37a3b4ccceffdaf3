package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/ports"
)

// callTimeout bounds each question to a node (status, state); creating a
// destination has createTimeout, since the node checks every source first.
const (
	callTimeout   = 5 * time.Second
	createTimeout = 30 * time.Second
)

// Cluster is braid server processes on loopback ports that form one
// cluster.
type Cluster struct {
	// Bin is the braid binary the nodes run.
	Bin string
	// Nodes are the cluster's nodes, n1, n2, …; set by New.
	Nodes []*Node
	// Security protects the nodes (made by New in dir/security); its
	// Admin is the credential of Client's calls.
	Security *Security

	http *http.Client // shared by the clients of Client
}

// New makes a cluster of size nodes named n1, n2, … on free loopback
// ports, with data directories under dir, each to join the others with
// --bootstrap-expect size and the extra flags args (later flags win:
// --log-level debug, say). It starts nothing: StartAll does, or start
// each node with Restart after setting its OnExit.
func New(bin, dir string, size int, args ...string) (*Cluster, error) {
	if size < 1 {
		return nil, fmt.Errorf("localcluster: a cluster of %d nodes: want 1 or more", size)
	}
	p, err := ports.FreeLoopback(4 * size)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	sec, err := NewSecurity(filepath.Join(dir, "security"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{Bin: bin, Security: sec, http: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	for i := range size {
		name := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, &Node{Name: name, Dir: filepath.Join(dir, name), Security: sec,
			RaftPort: p[4*i], GossipPort: p[4*i+1], HTTPPort: p[4*i+2], CanalPort: p[4*i+3],
			Args: append([]string{"--bootstrap-expect", strconv.Itoa(size)}, args...)})
	}
	return c, nil
}

// Start is New and StartUp: size nodes on free ports, running, with a
// Raft leader. On error it has killed what it started; otherwise the
// caller must call Close (or Stop).
//
// The ports New picks were free a moment before the nodes bind them, and
// another process (a test package running beside this one, the demo) can
// take one in between: a node that exits because its port is taken is
// not a failure of the cluster, so Start tries again on fresh ports, up
// to portTries times, in a directory of its own under dir.
func Start(ctx context.Context, bin, dir string, size int, args ...string) (*Cluster, error) {
	return StartPrepared(ctx, bin, dir, size, nil, args...)
}

// StartPrepared is Start calling prepare, if set, on each try's cluster
// before its nodes start: to set their advertised addresses (proxies in
// front of the ports New picked), say. An error of prepare ends Start.
func StartPrepared(ctx context.Context, bin, dir string, size int, prepare func(*Cluster) error, args ...string) (*Cluster, error) {
	for try := 1; ; try++ {
		tryDir := dir
		if try > 1 {
			tryDir = filepath.Join(dir, fmt.Sprintf("ports-%d", try))
		}
		c, err := New(bin, tryDir, size, args...)
		if err != nil {
			return nil, err
		}
		if prepare != nil {
			if err := prepare(c); err != nil {
				return nil, err
			}
		}
		err = c.StartUp(ctx)
		if err == nil {
			return c, nil
		}
		if try == portTries || !errors.Is(err, ErrPortTaken) {
			return nil, err
		}
	}
}

// portTries bounds Start's tries on fresh ports.
const portTries = 3

// ErrPortTaken is StartUp's error when a node exited because a port it
// was given was in use.
var ErrPortTaken = errors.New("a port was taken before the node bound it")

// StartUp is StartAll, then a wait of up to a minute for a Raft leader
// and every node live (WaitReady) that ends early, with ErrPortTaken,
// when a node exits because its port is taken. On error it has killed
// every node.
func (c *Cluster) StartUp(ctx context.Context) error {
	if err := c.StartAll(); err != nil {
		c.Close()
		return err
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var taken *Node
	err := Poll(waitCtx, time.Minute, c.readyWhat(), func() (bool, string) {
		if taken = c.portTaken(); taken != nil {
			cancel()
			return false, taken.Name + " exited: " + ErrPortTaken.Error()
		}
		return c.ready(waitCtx)
	})
	if err == nil {
		return nil
	}
	c.Close()
	if taken != nil {
		return fmt.Errorf("localcluster: %s: %w\n%s", taken.Name, ErrPortTaken, taken.LogTail(2))
	}
	for _, n := range c.Nodes {
		err = fmt.Errorf("%w\nlog of %s, last lines:\n%s", err, n.Name, n.LogTail(20))
	}
	return err
}

// portTaken returns a node that has exited because a port it was given
// was in use, or nil.
func (c *Cluster) portTaken() *Node {
	for _, n := range c.Nodes {
		if n.PID() != 0 && !n.Running() && strings.Contains(n.LogTail(5), "address already in use") {
			return n
		}
	}
	return nil
}

// StartAll starts every node that does not run. On error the nodes it
// started run on: Close ends them.
func (c *Cluster) StartAll() error {
	for _, n := range c.Nodes {
		if n.Running() {
			continue
		}
		if err := c.Restart(n); err != nil {
			return err
		}
	}
	return nil
}

// Close kills every node that runs and waits until they are gone.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	c.http.CloseIdleConnections()
}

// Stop sends every running node SIGTERM at once and kills those that have
// not exited after grace; it returns the nodes it had to kill.
func (c *Cluster) Stop(grace time.Duration) (killed []*Node) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() {
			if n.Stop(grace) {
				mu.Lock()
				killed = append(killed, n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	c.http.CloseIdleConnections()
	return killed
}

// JoinFor is the gossip addresses of the nodes other than n (where they
// advertise it).
func (c *Cluster) JoinFor(n *Node) []string {
	var join []string
	for _, o := range c.Nodes {
		if o != n {
			join = append(join, o.GossipAddr())
		}
	}
	return join
}

// Restart starts node n, or starts it again after it exited, on its data
// directory and ports, joining the other nodes.
func (c *Cluster) Restart(n *Node) error { return n.Start(c.Bin, c.JoinFor(n)) }

// URLs is every node's HTTP API, comma-separated, as client.New takes
// them.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return strings.Join(urls, ",")
}

// Client returns a client of node n alone, for admin calls (the clients
// share connections, which Close and Stop close).
func (c *Cluster) Client(n *Node) *client.Client {
	cl, err := client.New(n.URL(), client.WithHTTPClient(c.http), client.WithToken(c.Security.Admin.User, c.Security.Admin.Password))
	if err != nil {
		panic(fmt.Sprintf("localcluster: node %s: %v", n.Name, err)) // a loopback URL of our own making
	}
	return cl
}

// Live returns the nodes whose process runs.
func (c *Cluster) Live() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Status asks node n for the cluster's status (GET /v1/cluster), waiting
// at most 5 seconds for the answer.
func (c *Cluster) Status(ctx context.Context, n *Node) (wire.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st, err := c.Client(n).ClusterStatus(ctx)
	if err != nil {
		return wire.ClusterStatus{}, fmt.Errorf("localcluster: status from %s: %w", n.Name, err)
	}
	return *st, nil
}

// LiveStatus asks the running nodes in turn for the cluster's status and
// returns the first answer.
func (c *Cluster) LiveStatus(ctx context.Context) (wire.ClusterStatus, error) {
	err := errors.New("localcluster: no node runs")
	for _, n := range c.Live() {
		var st wire.ClusterStatus
		if st, err = c.Status(ctx, n); err == nil || ctx.Err() != nil {
			return st, err
		}
	}
	return wire.ClusterStatus{}, err
}

// Ready reports whether st shows a Raft leader and size nodes alive in
// gossip and in Raft, and describes what it shows.
func Ready(st wire.ClusterStatus, size int) (bool, string) {
	alive := 0
	for _, n := range st.Nodes {
		if n.State == wire.NodeAlive && n.Raft != "" {
			alive++
		}
	}
	return st.Leader != "" && alive == size, fmt.Sprintf("leader %q, %d of %d nodes alive in Raft", st.Leader, alive, size)
}

// WaitReady waits until every node runs and a running node sees a Raft
// leader and every node of the cluster alive in gossip and in Raft.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	return Poll(ctx, timeout, c.readyWhat(), func() (bool, string) { return c.ready(ctx) })
}

func (c *Cluster) readyWhat() string {
	return fmt.Sprintf("a leader and %d live nodes", len(c.Nodes))
}

// ready is WaitReady's condition, and why it does not hold yet.
func (c *Cluster) ready(ctx context.Context) (bool, string) {
	if live := len(c.Live()); live < len(c.Nodes) {
		return false, fmt.Sprintf("%d of %d processes run", live, len(c.Nodes))
	}
	st, err := c.LiveStatus(ctx)
	if err != nil {
		return false, err.Error()
	}
	return Ready(st, len(c.Nodes))
}

// Owner waits until the running nodes that answer agree on a running
// node as dest's owner, and returns it with its epoch and the Raft
// leader's name. One node's word is not enough: a node just restarted
// answers from its Raft state while it is still catching up, and names
// an owner and epoch of the past.
func (c *Cluster) Owner(ctx context.Context, dest string, timeout time.Duration) (owner *Node, epoch uint64, leader string, err error) {
	err = Poll(ctx, timeout, "an owner of "+dest+" the running nodes agree on", func() (bool, string) {
		owner, epoch, leader = nil, 0, ""
		var said string // the first answer, by its node
		lastErr := "no node runs"
		for _, n := range c.Live() {
			st, err := c.Status(ctx, n)
			if err != nil {
				lastErr = err.Error() // stalled or starting: the others answer
				continue
			}
			i := slices.IndexFunc(st.Destinations, func(d wire.DestinationInfo) bool { return d.Name == dest })
			if i < 0 {
				return false, fmt.Sprintf("%s knows no destination %s among %d", n.Name, dest, len(st.Destinations))
			}
			d := st.Destinations[i]
			if owner == nil {
				o := c.Node(d.Owner)
				if o == nil || !o.Running() {
					return false, fmt.Sprintf("%s names owner %q, not a running node", n.Name, d.Owner)
				}
				owner, epoch, said = o, d.Epoch, fmt.Sprintf("%s names %s at epoch %d", n.Name, d.Owner, d.Epoch)
			} else if d.Owner != owner.Name || d.Epoch != epoch {
				return false, fmt.Sprintf("%s, %s names %s at epoch %d", said, n.Name, d.Owner, d.Epoch)
			}
			if leader == "" {
				leader = st.Leader
			}
		}
		if owner == nil {
			return false, lastErr
		}
		return true, ""
	})
	return owner, epoch, leader, err
}

// State asks node n for destination dest's state (GET
// /v1/destinations/{name}, redirected to the owner), waiting at most 5
// seconds for the answer.
func (c *Cluster) State(ctx context.Context, n *Node, dest string) (wire.State, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st, err := c.Client(n).State(ctx, dest)
	if err != nil {
		return wire.State{}, fmt.Errorf("localcluster: state of %s from %s: %w", dest, n.Name, err)
	}
	return *st, nil
}

// CreateDestination creates a destination from its spec (YAML or JSON)
// through the first running node, waiting at most 30 seconds: the node
// checks every source first.
func (c *Cluster) CreateDestination(ctx context.Context, spec string) error {
	live := c.Live()
	if len(live) == 0 {
		return errors.New("localcluster: create destination: no node runs")
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	if _, err := c.Client(live[0]).CreateDestination(ctx, []byte(spec)); err != nil {
		return fmt.Errorf("localcluster: create destination through %s: %w", live[0].Name, err)
	}
	return nil
}

// DeleteDestination deletes a destination through the first running node,
// with its consumers' cursors (force).
func (c *Cluster) DeleteDestination(ctx context.Context, name string) error {
	live := c.Live()
	if len(live) == 0 {
		return errors.New("localcluster: delete destination: no node runs")
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	if err := c.Client(live[0]).DeleteDestination(ctx, name, true); err != nil {
		return fmt.Errorf("localcluster: delete destination %s through %s: %w", name, live[0].Name, err)
	}
	return nil
}

// Poll calls cond every 100 ms until it holds; after timeout it returns
// an error with cond's last description.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, desc := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localcluster: after %v, still no %s: %s", timeout, what, desc)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
