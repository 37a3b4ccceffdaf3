package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
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

// The cluster tests here run braid's commands in-process against real
// `braid server` processes (internal/localcluster, from a binary
// internal/testutil/braidproc builds once per test run). The tests that
// kill those processes are in internal/e2e.

// testNode is one braid server process, with helpers that fail the test.
type testNode struct{ *localcluster.Node }

// start runs the node's process, its log going to a file.
func (n *testNode) start(t *testing.T, bin string, join []string) {
	t.Helper()
	if err := n.Start(bin, join); err != nil {
		t.Fatal(err)
	}
}

// logTail returns the last lines of the node's log above debug level,
// for failure messages.
func (n *testNode) logTail() string { return braidproc.LogTail(n.Node, 60) }

// newNode is a node that is no member of the test's cluster (of another
// cluster, or reusing a name), on free ports under dir, with sec's
// certificates and users; args are extra flags.
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

// freePorts returns n free loopback ports (ports.FreeLoopback).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	p, err := ports.FreeLoopback(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startCluster starts three nodes that bootstrap a new cluster, logging at
// debug level with the extra flags args, and waits for it to have a leader and three live nodes. A
// failed test shows each node's log, and keeps the logs in
// $BRAID_TEST_LOGS when it is set (braidproc.Start).
func startCluster(t *testing.T, args ...string) *testCluster {
	t.Helper()
	cl := braidproc.Start(t, 3, append([]string{"--log-level", "debug"}, args...)...)
	// The CLI calls of the test (cli) are the admin's.
	t.Setenv(tokenEnv, cl.Security.Admin.Token())
	c := &testCluster{Cluster: cl, bin: cl.Bin}
	for _, n := range cl.Nodes {
		c.nodes = append(c.nodes, &testNode{n})
	}
	return c
}

// status asks node n for the cluster's status.
func (c *testCluster) status(n *testNode) (wire.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Status(ctx, n.Node)
}

// waitFor polls cond until it holds; on timeout it fails with cond's last
// description.
func (c *testCluster) waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	retry.Until(t, timeout, func() error {
		if ok, why := cond(); !ok {
			return fmt.Errorf("%s: %s", what, why)
		}
		return nil
	})
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

// cli runs a braid command in-process and returns its stdout, stderr and
// exit code.
func cli(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

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

// TestClusterFormsAndServes: three nodes form a cluster; a destination
// created through one node is run by one of them and streamed through any
// (the others redirect to the owner); `braid cluster status` and
// `braid destination list/show` show it.
func TestClusterFormsAndServes(t *testing.T) {
	srvs := shoptest.Shards(t)
	c := startCluster(t)
	spec := shopSpec(t, srvs)
	if out, errs, code := cli("destination", "create", "-f", spec, "--server", c.nodes[1].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	owner, epoch := c.owner(t, "shop")
	if epoch == 0 {
		t.Fatal("assignment without an epoch")
	}
	// One client id reads through each node in turn: each goes on after
	// what the one before acked (the first also gets the CREATE TABLE of shop.orders).
	for i, n := range c.nodes {
		a, b := fmt.Sprintf("from a %d", i), fmt.Sprintf("from c %d", i)
		srvs[0].Exec(t, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 0, '%s')", 2*i, a))
		srvs[2].Exec(t, fmt.Sprintf("INSERT INTO shop_5.orders VALUES (%d, 5, '%s')", 2*i+1, b))
		want := 2
		if i == 0 {
			want = 3 // and the CREATE TABLE of shop.orders, once for the six shards
		}
		out, errs, code := cli("tail", "shop", "--server", n.URL(), "--client-id", "shared", "--max", strconv.Itoa(want), "--timeout", "30s")
		if code != 0 {
			t.Fatalf("tail through %s (owner %s): exit %d: %s", n.Name, owner.Name, code, errs)
		}
		if got := strings.Count(out, "\n"); got != want || !strings.Contains(out, a) || !strings.Contains(out, b) {
			t.Errorf("tail through %s: %d lines, want %d with %q and %q:\n%s\nstderr: %s", n.Name, got, want, a, b, out, errs)
		}
	}
	out, errs, code := cli("cluster", "status", "--server", c.nodes[2].URL())
	if code != 0 || !strings.Contains(out, "leader") || !strings.Contains(out, "shop") || strings.Count(out, "alive") != 3 {
		t.Errorf("cluster status: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = cli("destination", "list", "--server", c.nodes[0].URL())
	if code != 0 || !strings.Contains(out, "shop") || !strings.Contains(out, owner.Name) {
		t.Errorf("destination list: exit %d\n%s", code, out)
	}
	out, _, code = cli("destination", "show", "shop", "--server", c.nodes[0].URL())
	if code != 0 || !strings.Contains(out, "shared") || !strings.Contains(out, "shop_\\d+") {
		t.Errorf("destination show: exit %d\n%s", code, out)
	}
}

// TestClusterBadInput: each mistake gets a clear error and disturbs
// nothing else.
func TestClusterBadInput(t *testing.T) {
	srvs := shoptest.Shards(t)
	c := startCluster(t)
	url := c.nodes[0].URL()

	// A spec with an unreachable shard, and one with a bad regex.
	dead := freePorts(t, 1)[0]
	bad := writeSpec(t, fmt.Sprintf("name: broken\nsources:\n  - {name: a, address: '127.0.0.1:%d'}\n", dead))
	if _, errs, code := cli("destination", "create", "-f", bad, "--server", url); code == 0 || !strings.Contains(errs, "cannot connect") {
		t.Errorf("unreachable shard: exit %d: %s", code, errs)
	}
	badRe := writeSpec(t, fmt.Sprintf("name: broken\nsources:\n  - {name: a, address: '%s'}\ntables: ['shop_(']\n", srvs[0].Addr()))
	if _, errs, code := cli("destination", "create", "-f", badRe, "--server", url); code != 2 || !strings.Contains(errs, "regex") {
		t.Errorf("bad regex: exit %d: %s", code, errs)
	}

	// Deleting a destination that is being consumed needs --force.
	spec := shopSpec(t, srvs)
	if _, errs, code := cli("destination", "create", "-f", spec, "--server", url); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	if _, errs, code := cli("destination", "create", "-f", spec, "--server", url); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("second create: exit %d: %s", code, errs)
	}
	c.owner(t, "shop")
	srvs[1].Exec(t, "INSERT INTO shop_2.orders VALUES (1, 2, 'x')")
	if _, errs, code := cli("tail", "shop", "--server", url, "--client-id", "keeper", "--max", "7", "--timeout", "30s"); code != 0 {
		t.Fatalf("tail: %s", errs)
	}
	c.waitFor(t, 10*time.Second, "the consumer's cursor in raft", func() (bool, string) {
		_, errs, code := cli("destination", "delete", "shop", "--server", url)
		return code != 0 && strings.Contains(errs, "keeper") && strings.Contains(errs, "delete it with force (--force)"), errs
	})
	if _, errs, code := cli("destination", "delete", "shop", "--force", "--server", url); code != 0 {
		t.Errorf("delete --force: %s", errs)
	}
	if _, errs, code := cli("destination", "show", "shop", "--server", url); code == 0 || !strings.Contains(errs, "unknown destination") {
		t.Errorf("show after delete: exit %d: %s", code, errs)
	}

	// A node of another cluster, and a node reusing a name, are refused.
	other := newNode(t, c.Security, "x1", t.TempDir(), "--cluster", "other")
	other.start(t, c.bin, []string{fmt.Sprintf("127.0.0.1:%d", c.nodes[0].GossipPort)})
	select {
	case <-other.Exited():
	case <-time.After(20 * time.Second):
		t.Fatal("a node of another cluster kept running after joining this one")
	}
	if log := other.logTail(); !strings.Contains(log, "belongs to cluster") {
		t.Errorf("node of another cluster: log does not say why:\n%s", log)
	}
	twin := newNode(t, c.Security, "n1", t.TempDir())
	twin.start(t, c.bin, []string{fmt.Sprintf("127.0.0.1:%d", c.nodes[1].GossipPort)})
	defer twin.Kill()
	c.waitFor(t, 20*time.Second, "a clear error about two nodes named n1", func() (bool, string) {
		logs := twin.logTail() + c.nodes[1].logTail() + c.nodes[0].logTail()
		return strings.Contains(logs, "a name of its own"), ""
	})
	// The cluster still has its three nodes and a leader.
	st, err := c.status(c.nodes[2])
	if err != nil || st.Leader == "" || len(st.Nodes) != 3 {
		t.Errorf("cluster after the bad joins: %+v %v", st, err)
	}
}
