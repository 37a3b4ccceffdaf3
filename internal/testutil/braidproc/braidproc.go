// Package braidproc runs real `braid server` processes on loopback ports
// for the cluster tests, the cluster benchmarks and anything else that
// must see braid as a user runs it: it builds the binary, starts nodes
// that form a cluster, kills, stops and restarts them, and talks to their
// HTTP API.
package braidproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/internal/ports"
)

// Build builds the braid binary (./cmd/braid of this module, found
// with `go env GOMOD`) into dir and returns its path.
func Build(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("braidproc: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("braidproc: go env GOMOD: not inside the braid module")
	}
	bin := filepath.Join(dir, "braid")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/braid")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("braidproc: go build ./cmd/braid: %w\n%s", err, out)
	}
	return bin, nil
}

// Node is one `braid server` process of a Cluster.
type Node struct {
	Name string
	// Dir is the node's --data-dir; its log is Dir + ".log".
	Dir                                       string
	RaftPort, GossipPort, HTTPPort, CanalPort int
	// Args are extra flags, e.g. --bootstrap-expect 3.
	Args []string
	// OnExit, when set, is called with how each process of the node
	// exited (cmd.Wait's error), on a goroutine of its own.
	OnExit func(err error)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	waitErr error         // how cmd exited, once exited is closed
}

// URL is the node's HTTP API.
func (n *Node) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", n.HTTPPort) }

// LogPath is the file the node's stderr and stdout go to, over restarts.
func (n *Node) LogPath() string { return n.Dir + ".log" }

// Start runs the node's process, joining the gossip addresses in join.
// A node that runs already is an error.
func (n *Node) Start(bin string, join []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !closed(n.exited) {
		return fmt.Errorf("braidproc: node %s runs already", n.Name)
	}
	args := []string{"server", "--name", n.Name, "--data-dir", n.Dir, "--addr", "127.0.0.1",
		"--raft-port", strconv.Itoa(n.RaftPort), "--gossip-port", strconv.Itoa(n.GossipPort),
		"--http-port", strconv.Itoa(n.HTTPPort), "--canal-port", strconv.Itoa(n.CanalPort),
		"--join", strings.Join(join, ","), "--log-level", "info"}
	args = append(args, n.Args...)
	f, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("braidproc: node %s: %w", n.Name, err)
	}
	fmt.Fprintf(f, "=== %s start %v\n", time.Now().Format(time.StampMilli), args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = nodeProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("braidproc: node %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		f.Close()
		n.mu.Lock()
		n.waitErr = err
		n.mu.Unlock()
		close(exited)
		if n.OnExit != nil {
			n.OnExit(err)
		}
	}()
	n.cmd, n.exited, n.waitErr = cmd, exited, nil
	return nil
}

// ExitErr waits for the node's current process to exit and says how it
// did ("exit status 0" when it ended cleanly).
func (n *Node) ExitErr() error {
	exited := n.Exited()
	if exited == nil {
		return errors.New("never started")
	}
	<-exited
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waitErr == nil {
		return errors.New("exit status 0")
	}
	return n.waitErr
}

// Stop sends the node SIGTERM and, if it has not exited after grace,
// SIGKILL; it reports whether it had to kill.
func (n *Node) Stop(grace time.Duration) (killed bool) {
	if !n.Running() {
		return false
	}
	_ = n.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-n.Exited():
		return false
	case <-t.C:
		n.Kill()
		return true
	}
}

// Running reports whether the node's process runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !closed(n.exited)
}

// PID is the process id of the node's current (or last) process, 0 if it
// never started.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Signal sends sig to the node's current process: SIGSTOP and SIGCONT
// stall and resume it as a stuck machine would.
func (n *Node) Signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("braidproc: node %s never started", n.Name)
	}
	return cmd.Process.Signal(sig)
}

// Exited is closed when the node's current process has exited (nil before
// the node first starts).
func (n *Node) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exited
}

// Kill sends the node SIGKILL, as a crash would, and waits until its
// process is gone. Killing a node that does not run does nothing.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || closed(exited) {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once resumed
	_ = cmd.Process.Kill()
	<-exited
}

// LogTail returns the last lines of the node's log.
func (n *Node) LogTail(lines int) string {
	b, _ := os.ReadFile(n.LogPath())
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Cluster is braid server processes on loopback ports that form one
// cluster.
type Cluster struct {
	Bin   string
	Nodes []*Node
	http  *http.Client
}

// Start starts size nodes named n1, n2, … with data directories under
// dir, each joining the others with --bootstrap-expect size and the extra
// flags args (later flags win: --log-level debug, say), and waits up to a
// minute for a Raft leader and size live nodes. On error it has killed
// what it started; otherwise the caller must call Close.
func Start(ctx context.Context, bin, dir string, size int, args ...string) (*Cluster, error) {
	ports, err := ports.FreeLoopback(4 * size)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Bin: bin, http: &http.Client{Timeout: 5 * time.Second}}
	for i := range size {
		name := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, &Node{Name: name, Dir: filepath.Join(dir, name),
			RaftPort: ports[4*i], GossipPort: ports[4*i+1], HTTPPort: ports[4*i+2], CanalPort: ports[4*i+3],
			Args: append([]string{"--bootstrap-expect", strconv.Itoa(size)}, args...)})
	}
	for _, n := range c.Nodes {
		if err := n.Start(bin, c.JoinFor(n)); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx, time.Minute); err != nil {
		c.Close()
		for _, n := range c.Nodes {
			err = fmt.Errorf("%w\nlog of %s, last lines:\n%s", err, n.Name, n.LogTail(20))
		}
		return nil, err
	}
	return c, nil
}

// Close kills every node that runs and waits until they are gone.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// JoinFor is the gossip addresses of the nodes other than n.
func (c *Cluster) JoinFor(n *Node) []string {
	var join []string
	for _, o := range c.Nodes {
		if o != n {
			join = append(join, fmt.Sprintf("127.0.0.1:%d", o.GossipPort))
		}
	}
	return join
}

// Restart starts a killed node again on its data directory and ports.
func (c *Cluster) Restart(n *Node) error { return n.Start(c.Bin, c.JoinFor(n)) }

// URLs is every node's HTTP API, comma-separated, as the Go client takes
// them.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return strings.Join(urls, ",")
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

// Status asks node n for the cluster's status (GET /v1/cluster).
func (c *Cluster) Status(ctx context.Context, n *Node) (cluster.ClusterStatus, error) {
	var st cluster.ClusterStatus
	err := c.call(ctx, http.MethodGet, n.URL()+"/v1/cluster", "", nil, http.StatusOK, &st)
	return st, err
}

// WaitReady waits until a live node sees a Raft leader and every node of
// the cluster alive in gossip and in Raft.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	return Poll(ctx, timeout, fmt.Sprintf("a leader and %d live nodes", len(c.Nodes)), func() (bool, string) {
		live := c.Live()
		if len(live) < len(c.Nodes) {
			return false, fmt.Sprintf("%d of %d processes run", len(live), len(c.Nodes))
		}
		st, err := c.Status(ctx, live[0])
		if err != nil {
			return false, err.Error()
		}
		alive := 0
		for _, n := range st.Nodes {
			if n.State == "alive" && n.Raft != "" {
				alive++
			}
		}
		return st.Leader != "" && alive == len(c.Nodes), fmt.Sprintf("leader %q, nodes %+v", st.Leader, st.Nodes)
	})
}

// Owner waits until a live node names a running node as dest's owner,
// and returns it with its epoch and the Raft leader's name.
func (c *Cluster) Owner(ctx context.Context, dest string, timeout time.Duration) (owner *Node, epoch uint64, leader string, err error) {
	err = Poll(ctx, timeout, "an owner of "+dest, func() (bool, string) {
		live := c.Live()
		if len(live) == 0 {
			return false, "no node runs"
		}
		st, err := c.Status(ctx, live[0])
		if err != nil {
			return false, err.Error()
		}
		for _, d := range st.Destinations {
			if d.Name != dest {
				continue
			}
			if n := c.Node(d.Owner); n != nil && n.Running() {
				owner, epoch, leader = n, d.Epoch, st.Leader
				return true, ""
			}
			return false, fmt.Sprintf("owner %q, not a running node", d.Owner)
		}
		return false, fmt.Sprintf("no destination %s among %d", dest, len(st.Destinations))
	})
	return owner, epoch, leader, err
}

// State asks node n for destination dest's state (GET
// /v1/destinations/{name}, redirected to the owner).
func (c *Cluster) State(ctx context.Context, n *Node, dest string) (wire.State, error) {
	var st wire.State
	err := c.call(ctx, http.MethodGet, n.URL()+"/v1/destinations/"+dest, "", nil, http.StatusOK, &st)
	return st, err
}

// CreateDestination posts a destination spec (YAML or JSON) to a live
// node (POST /v1/destinations).
func (c *Cluster) CreateDestination(ctx context.Context, spec string) error {
	live := c.Live()
	if len(live) == 0 {
		return errors.New("braidproc: create destination: no node runs")
	}
	return c.call(ctx, http.MethodPost, live[0].URL()+"/v1/destinations", spec, &http.Client{Timeout: 30 * time.Second}, http.StatusCreated, nil)
}

// DeleteDestination deletes a destination, with its consumers' cursors
// (DELETE /v1/destinations/{name}?force=true).
func (c *Cluster) DeleteDestination(ctx context.Context, name string) error {
	live := c.Live()
	if len(live) == 0 {
		return errors.New("braidproc: delete destination: no node runs")
	}
	return c.call(ctx, http.MethodDelete, live[0].URL()+"/v1/destinations/"+name+"?force=true", "", nil, 0, nil)
}

// call makes one request and decodes the answer into out, if set; an
// answer other than want (any 2xx if want is 0) is an error carrying the
// server's explanation.
func (c *Cluster) call(ctx context.Context, method, url, body string, hc *http.Client, want int, out any) error {
	if hc == nil {
		hc = c.http
	}
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("braidproc: %s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("braidproc: %s %s: %w", method, url, err)
	}
	if (want != 0 && resp.StatusCode != want) || (want == 0 && resp.StatusCode/100 != 2) {
		return fmt.Errorf("braidproc: %s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("braidproc: %s %s: %w", method, url, err)
		}
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
			return fmt.Errorf("braidproc: after %v, still no %s: %s", timeout, what, desc)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("braidproc: waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
