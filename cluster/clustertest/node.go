package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/raftstore"
)

// Node is one node of a Cluster: a cluster.Node while it runs, its data
// directory and ports across restarts.
type Node struct {
	// Name is the node's name in gossip and Raft: n1, n2, …
	Name string

	c     *Cluster
	cfg   cluster.Config
	proxy *raftProxy  // in front of the Raft port
	cut   atomic.Bool // gossip cut off (read by the node's transport)

	isolated bool
	node     *cluster.Node // nil while down
	stop     context.CancelFunc
	done     chan error // Run's result
}

// start starts the node (Start and Run) with the harness's settings.
func (n *Node) start() {
	n.c.t.Helper()
	cfg := n.cfg
	cfg.RaftAdvertise = n.proxy.addr()
	for _, o := range n.c.nodes {
		if o != n {
			cfg.Join = append(cfg.Join, hostPort(o.cfg.GossipPort))
		}
	}
	cfg.Logger = slog.New(slog.NewTextHandler(n.c.log, &slog.HandlerOptions{Level: n.c.opts.level}))
	cfg.GossipTransport = func(t memberlist.Transport) memberlist.Transport { return newCutTransport(t, &n.cut) }
	if f := n.c.opts.config; f != nil {
		f(&cfg)
	}
	n.cut.Store(false)
	n.isolated = false
	n.proxy.setCut(false)
	node, err := cluster.Start(cfg)
	if err != nil {
		n.c.t.Fatalf("clustertest: start %s: %v", n.Name, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	n.node, n.stop, n.done = node, stop, make(chan error, 1)
	go func() { n.done <- node.Run(ctx) }()
}

// shutdown stops the node and waits for Run to return; crash first cuts
// it off, so that the others see it fail rather than leave. It is safe
// on a node that is down.
func (n *Node) shutdown(crash bool) error {
	if n.node == nil {
		return nil
	}
	if crash {
		n.cut.Store(true)
		n.proxy.setCut(true)
	}
	n.stop()
	var err error
	select {
	case err = <-n.done:
	case <-time.After(Timeout):
		err = fmt.Errorf("clustertest: %s did not stop in %v", n.Name, Timeout)
	}
	n.proxy.setCut(false)
	n.node, n.stop, n.done, n.isolated = nil, nil, nil, false
	return err
}

// URL is the node's HTTP base URL (http://127.0.0.1:port), up or down.
func (n *Node) URL() string { return "http://" + hostPort(n.cfg.HTTPPort) }

// Running reports whether the node is up.
func (n *Node) Running() bool { return n.node != nil }

// Isolated reports whether the node is cut off (Isolate).
func (n *Node) Isolated() bool { return n.isolated }

// Node returns the running cluster.Node (nil while down).
func (n *Node) Node() *cluster.Node { return n.node }

// Raft returns the node's replicated store, to read its local view
// (Leader, Assignment, Stats); the test fails if the node is down.
func (n *Node) Raft() *raftstore.Store {
	n.c.t.Helper()
	n.mustRun("read its raft state")
	return n.node.Raft()
}

// Serving reports whether the node hands the destination's events out
// now (cluster.Node.Serving): nil, or why not. A node that is down
// serves nothing.
func (n *Node) Serving(dest string) error {
	if n.node == nil {
		return fmt.Errorf("node %s is down", n.Name)
	}
	return n.node.Serving(dest)
}

func (n *Node) mustRun(what string) {
	n.c.t.Helper()
	if n.node == nil {
		n.c.t.Fatalf("clustertest: %s is down: cannot %s", n.Name, what)
	}
}

// Stop stops the node gracefully, as SIGTERM does: it stops its
// destinations (their last cursors written), leaves the gossip, so the
// others notice at once, and shuts Raft down.
func (n *Node) Stop() {
	n.c.t.Helper()
	n.mustRun("stop")
	if err := n.shutdown(false); err != nil {
		n.c.t.Fatalf("clustertest: stop %s: %v", n.Name, err)
	}
}

// Crash stops the node so that the others see it fail, not leave: its
// gossip and its inbound Raft connections are cut first, then it stops.
// Unlike a killed process it still stops its goroutines in order; its
// last cursor writes may still reach the leader (a crash just after a
// flush). Process kills are cmd/braid's tests.
func (n *Node) Crash() {
	n.c.t.Helper()
	n.mustRun("crash")
	if err := n.shutdown(true); err != nil {
		n.c.t.Logf("clustertest: crash %s: %v", n.Name, err)
	}
}

// Restart starts a stopped or crashed node again on its data directory
// and ports; it rejoins the cluster with its Raft state. It waits until
// every connected node sees it alive.
func (n *Node) Restart() {
	n.c.t.Helper()
	if n.node != nil {
		n.c.t.Fatalf("clustertest: restart %s: it is running", n.Name)
	}
	n.start()
	n.c.WaitFor(n.Name+" to rejoin the gossip", func() (bool, string) { return n.c.meshed() })
}

// Isolate cuts the node off while it keeps running: its gossip is cut
// both ways (each side sees the other fail) and the others can no longer
// reach its Raft port, so it receives no log entries, loses its leader
// and cannot confirm an ownership lease. The Raft connections it dials
// itself are not cut (raftstore offers no hook for that), which is why
// only a follower can be isolated: a leader would keep replicating. Its
// HTTP API stays reachable, so a test can see what it still serves.
func (n *Node) Isolate() {
	n.c.t.Helper()
	n.mustRun("isolate")
	if n.node.Raft().IsLeader() {
		n.c.t.Fatalf("clustertest: isolate %s: it is the Raft leader, which the harness cannot cut off (see Isolate)", n.Name)
	}
	n.isolated = true
	n.cut.Store(true)
	n.proxy.setCut(true)
}

// Reconnect ends an isolation as a network partition ends: the cut goes
// and nothing is joined, so the nodes must find each other by themselves
// (cluster's rejoin). It waits until the connected nodes see each other.
func (n *Node) Reconnect() {
	n.c.t.Helper()
	if !n.isolated {
		n.c.t.Fatalf("clustertest: reconnect %s: it is not isolated", n.Name)
	}
	n.cut.Store(false)
	n.proxy.setCut(false)
	n.isolated = false
	n.c.WaitFor(n.Name+" to be found again", n.c.meshed)
}

// Heal reconnects an isolated node: the others reach its Raft port
// again, and it joins their gossip again (memberlist does so by itself
// only after a cut shorter than its GossipToTheDeadTime, 30 s). It waits until the connected nodes
// see each other, and the healed node has caught up with the leader's
// log.
func (n *Node) Heal() {
	n.c.t.Helper()
	if !n.isolated {
		n.c.t.Fatalf("clustertest: heal %s: it is not isolated", n.Name)
	}
	n.cut.Store(false)
	n.proxy.setCut(false)
	n.isolated = false
	var join []string
	for _, o := range n.c.Connected() {
		if o != n {
			join = append(join, hostPort(o.cfg.GossipPort))
		}
	}
	n.c.WaitFor(n.Name+" to rejoin the gossip", func() (bool, string) {
		if ok, why := n.c.meshed(); !ok {
			if err := n.node.Join(join...); err != nil {
				why += "; join: " + err.Error()
			}
			return false, why
		}
		return true, ""
	})
	n.c.WaitFor(n.Name+" to catch up", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := n.node.Raft().Consistent(ctx); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// Create stores a destination from its spec (YAML or JSON) through this
// node's HTTP API (POST /v1/destinations).
func (n *Node) Create(spec string) {
	n.c.t.Helper()
	status, body, err := n.c.post(n.URL()+"/v1/destinations", spec)
	if err != nil || status != http.StatusCreated {
		n.c.t.Fatalf("clustertest: create a destination through %s: %d %s %v", n.Name, status, body, err)
	}
}

// Get asks this node for path (GET, redirects not followed) and returns
// the status and, for a redirect, where to.
func (n *Node) Get(path string) (status int, location string) {
	n.c.t.Helper()
	resp, err := n.c.http.Get(n.URL() + path)
	if err != nil {
		n.c.t.Fatalf("clustertest: GET %s on %s: %v", path, n.Name, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// Members returns the names of the nodes this node's gossip sees alive.
func (n *Node) Members() []string {
	n.c.t.Helper()
	n.mustRun("list its members")
	var out []string
	for _, m := range n.node.Members() {
		out = append(out, m.Name)
	}
	return slices.Sorted(slices.Values(out))
}

// RaftAddr is the node's own Raft port (its node port), not the proxy it
// advertises: where a test dials it as an outsider would.
func (n *Node) RaftAddr() string { return hostPort(n.cfg.RaftPort) }

// GossipAddr is the node's gossip address (TCP and UDP).
func (n *Node) GossipAddr() string { return hostPort(n.cfg.GossipPort) }
