package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
)

// The cluster tests here run braid's commands in-process against real
// `braid server` processes (internal/localcluster, from a binary
// internal/testutil/braidproc builds once per test run). The tests that
// kill those processes are in internal/e2e.

// cli runs a braid command in-process and returns its stdout, stderr and
// exit code.
func cli(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestClusterFormsAndServes: three nodes form a cluster; a destination
// created through one node is run by one of them and streamed through any
// (the others redirect to the owner); `braid cluster status` and
// `braid destination list/show` show it.
func TestClusterFormsAndServes(t *testing.T) {
	srvs := shoptest.Shards(t)
	c := nodes.Start(t, cli)
	spec := nodes.ShopSpec(t, srvs)
	if out, errs, code := cli("destination", "create", "-f", spec, "--server", c.Nodes[1].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	owner, epoch := c.OwnerOf(t, "shop")
	if epoch == 0 {
		t.Fatal("assignment without an epoch")
	}
	// One client id reads through each node in turn: each goes on after
	// what the one before acked (the first also gets the CREATE TABLE of shop.orders).
	for i, n := range c.Nodes {
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
	out, errs, code := cli("cluster", "status", "--server", c.Nodes[2].URL())
	if code != 0 || !strings.Contains(out, "leader") || !strings.Contains(out, "shop") || strings.Count(out, "alive") != 3 {
		t.Errorf("cluster status: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = cli("destination", "list", "--server", c.Nodes[0].URL())
	if code != 0 || !strings.Contains(out, "shop") || !strings.Contains(out, owner.Name) {
		t.Errorf("destination list: exit %d\n%s", code, out)
	}
	out, _, code = cli("destination", "show", "shop", "--server", c.Nodes[0].URL())
	if code != 0 || !strings.Contains(out, "shared") || !strings.Contains(out, "shop_\\d+") {
		t.Errorf("destination show: exit %d\n%s", code, out)
	}
}

// TestClusterBadInput: each mistake gets a clear error and disturbs
// nothing else.
func TestClusterBadInput(t *testing.T) {
	srvs := shoptest.Shards(t)
	c := nodes.Start(t, cli)
	url := c.Nodes[0].URL()

	// A spec with an unreachable shard, and one with a bad regex.
	dead := nodes.FreePorts(t, 1)[0]
	bad := nodes.WriteSpec(t, fmt.Sprintf("name: broken\nsources:\n  - {name: a, address: '127.0.0.1:%d'}\n", dead))
	if _, errs, code := cli("destination", "create", "-f", bad, "--server", url); code == 0 || !strings.Contains(errs, "cannot connect") {
		t.Errorf("unreachable shard: exit %d: %s", code, errs)
	}
	badRe := nodes.WriteSpec(t, fmt.Sprintf("name: broken\nsources:\n  - {name: a, address: '%s'}\ntables: ['shop_(']\n", srvs[0].Addr()))
	if _, errs, code := cli("destination", "create", "-f", badRe, "--server", url); code != 2 || !strings.Contains(errs, "regex") {
		t.Errorf("bad regex: exit %d: %s", code, errs)
	}

	// Deleting a destination that is being consumed needs --force.
	spec := nodes.ShopSpec(t, srvs)
	if _, errs, code := cli("destination", "create", "-f", spec, "--server", url); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	if _, errs, code := cli("destination", "create", "-f", spec, "--server", url); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("second create: exit %d: %s", code, errs)
	}
	c.OwnerOf(t, "shop")
	srvs[1].Exec(t, "INSERT INTO shop_2.orders VALUES (1, 2, 'x')")
	if _, errs, code := cli("tail", "shop", "--server", url, "--client-id", "keeper", "--max", "7", "--timeout", "30s"); code != 0 {
		t.Fatalf("tail: %s", errs)
	}
	c.WaitFor(t, 10*time.Second, "the consumer's cursor in raft", func() (bool, string) {
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
	other := nodes.NewNode(t, c.Security, "x1", t.TempDir(), "--cluster", "other")
	other.MustStart(t, c.Bin, []string{fmt.Sprintf("127.0.0.1:%d", c.Nodes[0].GossipPort)})
	select {
	case <-other.Exited():
	case <-time.After(20 * time.Second):
		t.Fatal("a node of another cluster kept running after joining this one")
	}
	if log := other.Tail(); !strings.Contains(log, "belongs to cluster") {
		t.Errorf("node of another cluster: log does not say why:\n%s", log)
	}
	twin := nodes.NewNode(t, c.Security, "n1", t.TempDir())
	twin.MustStart(t, c.Bin, []string{fmt.Sprintf("127.0.0.1:%d", c.Nodes[1].GossipPort)})
	defer twin.Kill()
	c.WaitFor(t, 20*time.Second, "a clear error about two nodes named n1", func() (bool, string) {
		logs := twin.Tail() + c.Nodes[1].Tail() + c.Nodes[0].Tail()
		return strings.Contains(logs, "a name of its own"), ""
	})
	// The cluster still has its three nodes and a leader.
	st, err := c.StatusOf(c.Nodes[2])
	if err != nil || st.Leader == "" || len(st.Nodes) != 3 {
		t.Errorf("cluster after the bad joins: %+v %v", st, err)
	}
}
