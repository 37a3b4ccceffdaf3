// Package nodes is the one harness of the process-level cluster tests
// (cmd/braid's, which run braid's commands in-process, and internal/e2e's,
// which run the built binary): a Cluster of real `braid server` processes
// that braidproc starts, its Nodes with helpers that fail the test, and
// the few questions those tests ask it. How a test runs a braid command is
// a parameter (Runner), so one copy serves both. Like braidproc, it
// imports no server package: a test sees braid as a user runs it.
//
//	c := nodes.Start(t, cli)          // three nodes, stopped when t ends
//	owner, epoch := c.OwnerOf(t, "shop")
//	c.WaitFor(t, 20*time.Second, "a leader", func() (bool, string) { ... })
package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/ports"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
)

// Runner runs one braid command with args, as an operator would, and
// returns its stdout, stderr and exit code: cmd/braid's tests run it
// in-process, internal/e2e's run the binary.
type Runner func(args ...string) (stdout, stderr string, code int)

// TokenEnv is the variable braid's commands take their token from; Start
// sets it to the cluster admin's for the rest of the test.
const TokenEnv = "BRAID_TOKEN"

// Node is one braid server process, with helpers that fail the test.
type Node struct{ *localcluster.Node }

// MustStart runs the node's process (its log going to a file), joining
// the gossip addresses join, and fails t if it cannot.
func (n *Node) MustStart(t testing.TB, bin string, join []string) {
	t.Helper()
	if err := n.Start(bin, join); err != nil {
		t.Fatal(err)
	}
}

// MustSignal sends sig to the node's process, and fails t if it cannot.
func (n *Node) MustSignal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := n.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, n.Name, err)
	}
}

// Tail returns the last lines of the node's log above debug level, for
// failure messages (braidproc.LogTail).
func (n *Node) Tail() string { return braidproc.LogTail(n.Node, 60) }

// NewNode is a node that is no member of the test's cluster (a
// replacement, of another cluster, or reusing a name), on free ports
// under dir, with sec's certificates and users; args are extra flags
// (braidproc.NewNode). It is not started.
func NewNode(t testing.TB, sec *localcluster.Security, name, dir string, args ...string) *Node {
	t.Helper()
	return &Node{braidproc.NewNode(t, sec, name, dir, args...)}
}

// Cluster is braid servers on loopback ports. Its Nodes field shadows
// the embedded localcluster.Cluster's (the same nodes, as *Node).
type Cluster struct {
	*localcluster.Cluster
	Nodes []*Node
	// CLI runs the test's braid commands, as the cluster's admin.
	CLI Runner
}

// Start starts three nodes that bootstrap a new cluster, logging at debug
// level with the extra flags args, and waits for it to have a leader and
// three live nodes (braidproc.Start). A failed test shows each node's
// log, and keeps the logs in $BRAID_TEST_LOGS when it is set. The test's
// braid commands, run by cli, are the admin's: Start sets TokenEnv for t.
func Start(t *testing.T, cli Runner, args ...string) *Cluster {
	t.Helper()
	return StartSize(t, cli, 3, args...)
}

// StartSize is Start with size nodes.
func StartSize(t *testing.T, cli Runner, size int, args ...string) *Cluster {
	t.Helper()
	cl := braidproc.Start(t, size, append([]string{"--log-level", "debug"}, args...)...)
	t.Setenv(TokenEnv, cl.Security.Admin.Token())
	c := &Cluster{Cluster: cl, CLI: cli}
	for _, n := range cl.Nodes {
		c.Nodes = append(c.Nodes, &Node{n})
	}
	return c
}

// StartShop starts the shop shards (shoptest.Shards) and a cluster, and
// creates the shop destination (ShopSpec) through the first node.
func StartShop(t *testing.T, cli Runner) ([]*mysqltest.Server, *Cluster) {
	t.Helper()
	srvs := shoptest.Shards(t)
	c := Start(t, cli)
	if _, errs, code := cli("destination", "create", "-f", ShopSpec(t, srvs), "--server", c.Nodes[0].URL()); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	return srvs, c
}

// ShopSpec writes the shop destination's spec (shoptest.SpecYAML, with a
// max_clock_skew of 200ms) to a file of the test's and returns its path.
func ShopSpec(t testing.TB, srvs []*mysqltest.Server) string {
	t.Helper()
	return WriteSpec(t, shoptest.SpecYAML(srvs, "max_clock_skew: 200ms\n"))
}

// WriteSpec writes a destination spec to a file of the test's and
// returns its path.
func WriteSpec(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// FreePorts returns n free loopback ports (ports.FreeLoopback), and
// fails t if it cannot.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	p, err := ports.FreeLoopback(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// JoinOf is the gossip addresses of the nodes other than n.
func (c *Cluster) JoinOf(n *Node) []string { return c.JoinFor(n.Node) }

// StatusOf asks node n for the cluster's status.
func (c *Cluster) StatusOf(n *Node) (wire.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Status(ctx, n.Node)
}

// WaitFor waits until cond holds (retry.Until); on timeout it fails t
// with what and cond's last description.
func (c *Cluster) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	retry.Until(t, timeout, func() error {
		if ok, why := cond(); !ok {
			return fmt.Errorf("%s: %s", what, why)
		}
		return nil
	})
}

// LiveNodes returns the nodes whose process runs.
func (c *Cluster) LiveNodes() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// Member is the Node of the cluster's node n; nil if n is none of them.
func (c *Cluster) Member(n *localcluster.Node) *Node {
	for _, tn := range c.Nodes {
		if tn.Node == n {
			return tn
		}
	}
	return nil
}

// OwnerOf returns the node that owns dest as a live node sees it, once
// it has one that is running, and its epoch; it fails t if none does
// within 30 seconds.
func (c *Cluster) OwnerOf(t testing.TB, dest string) (*Node, uint64) {
	t.Helper()
	n, epoch, _, err := c.Owner(t.Context(), dest, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c.Member(n), epoch
}

// DDLList runs `braid ddl list dest --json` against url with cli.
func DDLList(cli Runner, dest, url string) (wire.DDLState, error) {
	out, errs, code := cli("ddl", "list", dest, "--json", "--server", url)
	var st wire.DDLState
	if code != 0 {
		return st, fmt.Errorf("exit %d: %s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return st, fmt.Errorf("%v: %s", err, out)
	}
	return st, nil
}
