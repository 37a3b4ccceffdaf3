package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// testNode is one braid server process, with helpers that fail the test.
type testNode struct{ *localcluster.Node }

// start runs the node's process, its log going to a file.
func (n *testNode) start(t *testing.T, bin string, join []string) {
	t.Helper()
	if err := n.Start(bin, join); err != nil {
		t.Fatal(err)
	}
}

// signal sends sig to the node's process.
func (n *testNode) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := n.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, n.Name, err)
	}
}

// newNode is a node that is no member of the test's cluster (a
// replacement, of another cluster, or reusing a name), on free ports under
// dir, with sec's certificates and users; args are extra flags.
func newNode(t *testing.T, sec *localcluster.Security, name, dir string, args ...string) *testNode {
	t.Helper()
	return &testNode{braidproc.NewNode(t, sec, name, dir, args...)}
}

// testCluster is three braid servers on loopback ports.
type testCluster struct {
	*localcluster.Cluster
	bin   string
	nodes []*testNode
}

// startCluster starts three nodes that bootstrap a new cluster, logging
// at debug level with the extra flags args, and waits for it to have a
// leader and three live nodes. A failed test shows each node's log, and
// keeps the logs in $BRAID_TEST_LOGS when it is set (braidproc.Start).
// The test's braid commands (cli) are the cluster's admin's.
func startCluster(t *testing.T, args ...string) *testCluster {
	t.Helper()
	cl := braidproc.Start(t, 3, append([]string{"--log-level", "debug"}, args...)...)
	t.Setenv("BRAID_TOKEN", cl.Security.Admin.Token())
	c := &testCluster{Cluster: cl, bin: cl.Bin}
	for _, n := range cl.Nodes {
		c.nodes = append(c.nodes, &testNode{n})
	}
	return c
}

// joinFor is the gossip addresses of the other nodes.
func (c *testCluster) joinFor(n *testNode) []string { return c.JoinFor(n.Node) }

// status asks node n for the cluster's status.
func (c *testCluster) status(n *testNode) (wire.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Status(ctx, n.Node)
}

// waitFor waits until cond holds (retry.Until); on timeout it fails with
// cond's last description.
func (c *testCluster) waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	retry.Until(t, timeout, func() error {
		if ok, why := cond(); !ok {
			return fmt.Errorf("%s: %s", what, why)
		}
		return nil
	})
}

// live returns the nodes whose process runs.
func (c *testCluster) live() []*testNode {
	var out []*testNode
	for _, n := range c.nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// node is the test node of a cluster node.
func (c *testCluster) node(n *localcluster.Node) *testNode {
	for _, tn := range c.nodes {
		if tn.Node == n {
			return tn
		}
	}
	return nil
}

// owner returns the node that owns dest as a live node sees it, once it
// has one that is running.
func (c *testCluster) owner(t *testing.T, dest string) (*testNode, uint64) {
	t.Helper()
	n, epoch, _, err := c.Owner(t.Context(), dest, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c.node(n), epoch
}

// cliTimeout bounds one braid command of a test.
const cliTimeout = 2 * time.Minute

// cli runs the braid binary with args, as an operator would, and returns
// its stdout, stderr and exit code (-1 when it could not run).
func cli(args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, braidproc.Built(), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	return out.String(), errb.String() + err.Error(), -1
}

// writeSpec writes a destination spec to a file of the test's and
// returns its path.
func writeSpec(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// shopSpec writes the shop destination's spec (shoptest.SpecYAML) to a file.
func shopSpec(t *testing.T, srvs []*mysqltest.Server) string {
	t.Helper()
	return writeSpec(t, shoptest.SpecYAML(srvs, "max_clock_skew: 200ms\n"))
}

// shopCluster starts the shop shards and a cluster, and creates the shop
// destination through n1.
func shopCluster(t *testing.T) ([]*mysqltest.Server, *testCluster) {
	t.Helper()
	srvs := shoptest.Shards(t)
	c := startCluster(t)
	if _, errs, code := cli("destination", "create", "-f", shopSpec(t, srvs), "--server", c.nodes[0].URL()); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	return srvs, c
}

// freePorts returns n free loopback ports (ports.FreeLoopback).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	p, err := ports.FreeLoopback(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startCapture runs `braid capture -f spec` with args as a process of
// the test, its stderr in the test's output; it is killed when the test
// ends.
func startCapture(t *testing.T, spec string, args ...string) {
	t.Helper()
	cmd := exec.Command(braidproc.Binary(t), append([]string{"capture", "-f", spec}, args...)...)
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}
