package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
)

// waitIDs waits until cc has n distinct ids and returns its ids without
// repeats, in arrival order.
func (cc *canalConsumer) waitIDs(t *testing.T, n int, limit time.Duration) []int64 {
	t.Helper()
	var ids []int64
	retry.Until(t, limit, func() error {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		ids = ids[:0]
		seen := map[int64]bool{}
		for _, id := range cc.ids {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if len(ids) < n {
			return fmt.Errorf("canal consumer: %d of %d rows", len(ids), n)
		}
		return nil
	})
	return ids
}

func (cc *canalConsumer) close() {
	close(cc.stop)
	<-cc.done
}

// TestLateCanalClientInCluster: canal-go client 1001 reads a destination's
// rows and acks them; client 1002, started afterwards on the same
// destination, gets every row too, in the same order (a replay reader
// serves it what the store let go). `braid consumer list` shows both;
// `braid consumer drop` forgets one, cursor included.
func TestLateCanalClientInCluster(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	owner, _ := c.OwnerOf(t, "shop")
	const n = 120
	for i := range n {
		srvs[i%3].Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, %d, 'row %d')", 2*(i%3), i, 2*(i%3), i))
	}
	first := startCanalConsumer(t, owner, "shop", 1001)
	want := first.waitIDs(t, n, time.Minute)
	first.close()
	// The store let go of what 1001 acked: nothing else holds it.
	c.WaitFor(t, 20*time.Second, "the store to let the acked rows go", func() (bool, string) {
		st, err := c.Cluster.State(context.Background(), owner.Node, "shop")
		return err == nil && st.Store.Floor > 0, fmt.Sprintf("store %+v, err %v", st.Store, err)
	})
	second := startCanalConsumer(t, c.Nodes[0], "shop", 1002) // through any node
	got := second.waitIDs(t, n, time.Minute)
	second.close()
	if !slices.Equal(got, want) {
		t.Fatalf("client 1002 got\n%v\nclient 1001 got\n%v", got, want)
	}

	out, errs, code := cli("consumer", "list", "shop", "--server", c.Nodes[1].URL(), "--json")
	var cs []wire.ClientState
	if code != 0 || json.Unmarshal([]byte(out), &cs) != nil {
		t.Fatalf("consumer list: exit %d: %s%s", code, out, errs)
	}
	ids := map[string]uint64{}
	for _, x := range cs {
		ids[x.ID] = x.AckedSeq
	}
	if len(ids) != 2 || ids["1001"] == 0 || ids["1001"] != ids["1002"] {
		t.Fatalf("consumer list: %v, want 1001 and 1002 at the same acked seq", ids)
	}
	if out, errs, code := cli("consumer", "drop", "shop", "1001", "--server", c.Nodes[2].URL()); code != 0 || !strings.Contains(out, "dropped") {
		t.Fatalf("consumer drop: exit %d: %s%s", code, out, errs)
	}
	if _, errs, code := cli("consumer", "drop", "shop", "nobody", "--server", c.Nodes[2].URL()); code != 1 || !strings.Contains(errs, "no consumer") {
		t.Errorf("dropping an unknown consumer: exit %d: %s", code, errs)
	}
	// Its Raft cursor goes too: a new owner knows only 1002, at its seq.
	time.Sleep(2 * time.Second) // the owner writes cursors every Lease/4
	owner.Kill()
	c.WaitFor(t, 30*time.Second, "a new owner that knows 1002 only, at its acked seq", func() (bool, string) {
		out, _, code := cli("consumer", "list", "shop", "--server", c.LiveNodes()[0].URL(), "--json")
		var cs []wire.ClientState
		if code != 0 || json.Unmarshal([]byte(out), &cs) != nil {
			return false, out
		}
		return len(cs) == 1 && cs[0].ID == "1002" && cs[0].AckedSeq == ids["1002"], out
	})
}

// TestLateCanalClientCapture: the same in `braid capture` serving mode
// (a braid capture process; the consumers retry until it listens).
func TestLateCanalClientCapture(t *testing.T) {
	srvs := shoptest.Shards(t)
	p := nodes.FreePorts(t, 2)
	startCapture(t, nodes.WriteSpec(t, shoptest.SpecYAML(srvs, "")), "--http-port", strconv.Itoa(p[0]), "--canal-port", strconv.Itoa(p[1]))
	const n = 60
	for i := range n {
		srvs[i%3].Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 0, 'row %d')", 2*(i%3)+1, i, i))
	}
	node := &nodes.Node{Node: &localcluster.Node{CanalPort: p[1], Security: &localcluster.Security{}}} // no login
	first := startCanalConsumer(t, node, "shop", 1001)
	want := first.waitIDs(t, n, time.Minute)
	first.close()
	second := startCanalConsumer(t, node, "shop", 1002)
	got := second.waitIDs(t, n, time.Minute)
	second.close()
	if !slices.Equal(got, want) {
		t.Fatalf("client 1002 got\n%v\nclient 1001 got\n%v", got, want)
	}
}
