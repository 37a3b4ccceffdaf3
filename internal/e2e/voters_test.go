package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
)

// raftMembers is the Raft configuration as a node's status shows it: the
// nodes with a Raft role, by name.
func raftMembers(st wire.ClusterStatus) []string {
	var names []string
	for _, n := range st.Nodes {
		if n.Raft != "" {
			names = append(names, n.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestClusterRemoveDeadVoter: a SIGKILLed voter is taken out of Raft with
// braid cluster remove (a live one is refused), and the two nodes left
// have a leader and serve: a destination created after is streamed.
func TestClusterRemoveDeadVoter(t *testing.T) {
	srvs := shoptest.Shards(t)
	c := nodes.Start(t, cli)
	url := c.Nodes[0].URL()
	if _, errs, code := cli("cluster", "remove", "n2", "--server", url); code == 0 || !strings.Contains(errs, "alive") {
		t.Errorf("removing a live node: exit %d: %s", code, errs)
	}
	c.Nodes[2].MustSignal(t, syscall.SIGKILL)
	<-c.Nodes[2].Exited()
	c.WaitFor(t, 30*time.Second, "n3 dead in gossip", func() (bool, string) {
		_, errs, code := cli("cluster", "remove", "n3", "--server", url)
		return code == 0, errs
	})
	c.WaitFor(t, 20*time.Second, "a leader and raft {n1 n2}", func() (bool, string) {
		st, err := c.StatusOf(c.Nodes[1])
		if err != nil {
			return false, err.Error()
		}
		return st.Leader != "" && slices.Equal(raftMembers(st), []string{"n1", "n2"}), fmt.Sprintf("%+v", st)
	})
	if _, errs, code := cli("destination", "create", "-f", nodes.ShopSpec(t, srvs), "--server", c.Nodes[1].URL()); code != 0 {
		t.Fatalf("create after the removal: %s", errs)
	}
	srvs[0].Exec(t, "INSERT INTO shop_0.orders VALUES (1, 0, 'after removal')")
	out, errs, code := cli("tail", "shop", "--server", url, "--client-id", "after", "--max", "7", "--timeout", "30s")
	if code != 0 || !strings.Contains(out, "after removal") {
		t.Errorf("tail after the removal: exit %d: %s\n%s", code, errs, out)
	}
}

// TestDeadVoterReapedOnceReplaced: with --reap-dead-after 10s, a SIGKILLed
// voter stays in Raft while only two voters would be left, and is removed
// by the leader by itself once a replacement has joined.
func TestDeadVoterReapedOnceReplaced(t *testing.T) {
	c := nodes.Start(t, cli, "--reap-dead-after", "10s")
	c.Nodes[2].MustSignal(t, syscall.SIGKILL)
	<-c.Nodes[2].Exited()
	time.Sleep(12 * time.Second)
	st, err := c.StatusOf(c.Nodes[0])
	if err != nil || !slices.Contains(raftMembers(st), "n3") {
		t.Fatalf("n3 was removed while only two voters would stay: %+v %v", st, err)
	}
	n4 := nodes.NewNode(t, c.Security, "n4", t.TempDir())
	n4.MustStart(t, c.Bin, c.JoinFor(c.Nodes[2].Node))
	c.WaitFor(t, 40*time.Second, "raft {n1 n2 n4} with a leader", func() (bool, string) {
		st, err := c.StatusOf(c.Nodes[0])
		if err != nil {
			return false, err.Error()
		}
		return st.Leader != "" && slices.Equal(raftMembers(st), []string{"n1", "n2", "n4"}), fmt.Sprintf("%+v", raftMembers(st))
	})
}
