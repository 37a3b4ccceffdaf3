package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/localcluster"
)

// The demo's braid nodes: a localcluster.Cluster run from the demo's own
// binary (startNodes), each node reporting its exit on the demo's deaths
// channel, asked through package client how the cluster is doing.

// startNodes starts n1, n2, n3 on free ports, each joining the others.
func (d *demo) startNodes(ctx context.Context) error {
	c, err := localcluster.New(d.bin, d.dir, 3, "--log-level", d.opts.LogLevel)
	if err != nil {
		return err
	}
	for _, n := range c.Nodes {
		// A node's exit goes to deaths, which has room: a node has at
		// most one exit not yet read.
		n.OnExit = func(err error) {
			select {
			case d.deaths <- nodeExit{node: n, err: err}:
			default:
			}
		}
	}
	d.cluster = c
	d.con.sayf("starting three braid nodes (%s server ...; their logs go to files, not here)", d.braid)
	for _, n := range c.Nodes {
		if err := d.startNode(n); err != nil {
			return err
		}
		d.con.sayf("  node %s  %s  pid %d   (log: %s)", n.Name, n.URL(), n.PID(), d.rel(n.LogPath()))
	}
	return ctx.Err()
}

// startNode runs node n, or runs it again on its data directory, joining
// the demo's other nodes.
func (d *demo) startNode(n *localcluster.Node) error {
	if err := d.cluster.Restart(n); err != nil {
		return fmt.Errorf("starting node %s: %w", n.Name, err)
	}
	return nil
}

// status asks the running nodes, in turn, for the cluster's status.
func (d *demo) status(ctx context.Context) (wire.ClusterStatus, error) {
	return d.cluster.LiveStatus(ctx)
}

// deadDuringSetup fails set-up when a node process exited.
func (d *demo) deadDuringSetup() error {
	for _, n := range d.cluster.Nodes {
		if !n.Running() {
			return fmt.Errorf("node %s exited: %v; the end of its log (%s):\n%s", n.Name, n.ExitErr(), n.LogPath(), n.LogTail(15))
		}
	}
	return nil
}

// waitCluster waits for a Raft leader and three live nodes, saying what it
// waits for as that changes.
func (d *demo) waitCluster(ctx context.Context) error {
	began := time.Now()
	last := ""
	return d.poll(ctx, "cluster of three nodes with a leader", func() (bool, error) {
		if err := d.deadDuringSetup(); err != nil {
			return false, err
		}
		st, err := d.status(ctx)
		alive := 0
		for _, n := range st.Nodes {
			if n.State == wire.NodeAlive && n.Raft != "" {
				alive++
			}
		}
		var now string
		switch {
		case err != nil:
			now = "waiting for the nodes to answer"
		case st.Leader == "":
			now = fmt.Sprintf("waiting for the cluster to form: %d of 3 nodes in it, no Raft leader yet", alive)
		case alive < 3:
			now = fmt.Sprintf("waiting for the cluster: Raft leader %s, %d of 3 nodes in it", st.Leader, alive)
		default:
			d.con.sayf("cluster up after %v: Raft leader %s, three nodes alive", time.Since(began).Round(100*time.Millisecond), st.Leader)
			return true, nil
		}
		if now != last {
			d.con.sayf("  %s", now)
			last = now
		}
		return false, nil
	})
}

// waitOwner waits until shop has a running owner other than not, and
// records it.
func (d *demo) waitOwner(ctx context.Context, not string) error {
	return d.poll(ctx, "owner of shop", func() (bool, error) {
		if not == "" {
			if err := d.deadDuringSetup(); err != nil {
				return false, err
			}
		}
		owner, epoch, ok := d.currentOwner(ctx)
		if ok && owner != not {
			d.owner, d.epoch = owner, epoch
			return true, nil
		}
		return false, nil
	})
}

// currentOwner is shop's owner and epoch when a running node owns it.
func (d *demo) currentOwner(ctx context.Context) (string, uint64, bool) {
	st, err := d.status(ctx)
	if err != nil {
		return "", 0, false
	}
	for _, dest := range st.Destinations {
		if dest.Name == demoDest {
			if n := d.node(dest.Owner); n != nil && n.Running() {
				return dest.Owner, dest.Epoch, true
			}
		}
	}
	return "", 0, false
}

// node is the demo's node named name, or nil.
func (d *demo) node(name string) *localcluster.Node {
	if d.cluster == nil {
		return nil
	}
	return d.cluster.Node(name)
}
