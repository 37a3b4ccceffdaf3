package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
)

// Issue 42 in a cluster: a destination whose one source sits behind a
// virtual IP (a tcpproxy) in front of a MariaDB primary with a GTID
// replica, under a steady write load, applied by a MySQL sink to the
// machine's MariaDB and read by a consumer, while the primary fails over
// to the replica (cmd/braid's failover tests do the same with braid
// capture).

// sourceFailover is the setup both tests share.
type sourceFailover struct {
	tp      *mysqltest.Topology
	replica *mysqltest.Server
	vip     *tcpproxy.Proxy
	c       *nodes.Cluster
	tg      *auditedTarget
	cs      *consumer
	load    *mysqltest.Load
}

// startSourceFailover starts the topology (the replica's binlog files
// not lined up with the primary's, as in production), the proxy, a
// target database with an audited orders table (id), a three-node
// cluster running the destination with its sink, a consumer, and the
// load (one id a transaction, every 20ms, through the proxy); it returns
// once the sink has applied 20 rows.
func startSourceFailover(t *testing.T) *sourceFailover {
	t.Helper()
	tg := newAuditedTarget(t, "(id BIGINT PRIMARY KEY)")
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	replica.FlushLogs(t)
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)")
	tp.WaitCaughtUp(t)
	vip := tcpproxy.Start(t, primary.Addr())
	c := nodes.Start(t, cli)
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\nsinks:\n  - %s\n",
		vip.Addr(), tg.sinkYAML()))
	if out, errs, code := cli("destination", "create", "-f", spec, "--server", c.Nodes[0].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	c.OwnerOf(t, "shop")
	cs := startConsumer(t, c, "shop", "fo")
	load := mysqltest.StartLoad(t, vip.Addr(), "shop", "orders", 20*time.Millisecond)
	c.WaitFor(t, 90*time.Second, "rows applied before the failover", func() (bool, string) {
		n, _ := tg.audit()
		return n >= 20, fmt.Sprintf("%d applied, want 20", n)
	})
	return &sourceFailover{tp: tp, replica: replica, vip: vip, c: c, tg: tg, cs: cs, load: load}
}

// ids is shop.orders' ids on s, in id order.
func ids(t *testing.T, s *mysqltest.Server) []int64 {
	t.Helper()
	return s.Ints(t, "SELECT id FROM shop.orders ORDER BY id")
}

// finish lets the load write 20 more rows on the promoted replica, stops
// it and checks the outcome against the promoted replica's table (the
// source's history: every acknowledged id is there, and so is each
// unknown one that committed): the target equals it row for row, each
// row applied once (the audit trigger), and the consumer got each id
// once, in commit order (the load writes ids in order on one
// connection), with seqs dense.
func (f *sourceFailover) finish(t *testing.T) {
	t.Helper()
	before := len(ids(t, f.replica))
	retry.Until(t, 90*time.Second, func() error {
		if n := len(ids(t, f.replica)); n < before+20 {
			return fmt.Errorf("%d rows on the promoted replica, want %d: the load goes on there", n, before+20)
		}
		return nil
	})
	res := f.load.Stop()
	want := ids(t, f.replica)
	for _, id := range res.Committed {
		if !slices.Contains(want, id) {
			t.Fatalf("id %d was acknowledged but is not on the promoted replica", id)
		}
	}
	wantRows := make([]string, len(want))
	for i, id := range want {
		wantRows[i] = strconv.FormatInt(id, 10)
	}
	slices.Sort(wantRows) // as sinktest.Query sorts
	f.c.WaitFor(t, 90*time.Second, "the target equal to the promoted replica", func() (bool, string) {
		got := f.tg.read("SELECT id FROM " + f.tg.orders())
		return slices.Equal(got, wantRows), fmt.Sprintf("target has %d rows, the source %d", len(got), len(want))
	})
	if n, _ := f.tg.audit(); n != len(want) {
		t.Errorf("%d applications for %d rows", n, len(want))
	}
	if more := f.tg.read("SELECT id, SUM(n) FROM " + f.tg.name + ".applied GROUP BY id HAVING SUM(n) != 1"); len(more) > 0 {
		t.Errorf("%d rows applied more than once (id, times), e.g. %v", len(more), more[:min(5, len(more))])
	}
	waitRows(t, f.c, f.cs, want)
	var got []int64
	for _, m := range f.cs.snapshot() {
		got = append(got, m.ids...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the consumer got %d ids, want the source's %d, each once in commit order", len(got), len(want))
	}
	checkStream(t, f.cs.snapshot(), want)
	t.Logf("%d rows (%d acknowledged, %d unknown, %d refused) equal at the target and the consumer",
		len(want), len(res.Committed), len(res.Unknown), len(res.Refused))
}

// waitReading waits until the destination's state, as the owner n
// gives it, says source a is read from the promoted replica after a
// switch.
func (f *sourceFailover) waitReading(t *testing.T, n *nodes.Node) {
	t.Helper()
	want := fmt.Sprintf("server_id %d ", f.replica.ServerID)
	f.c.WaitFor(t, 90*time.Second, n.Name+" reading the promoted replica", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		st, err := f.c.State(ctx, n.Node, "shop")
		if err != nil {
			return false, err.Error()
		}
		if len(st.Sources) != 1 {
			return false, fmt.Sprintf("sources %+v", st.Sources)
		}
		s := st.Sources[0]
		return strings.HasPrefix(s.Server+" ", want) && s.Switches > 0, fmt.Sprintf("server %q, %d switches", s.Server, s.Switches)
	})
}

// TestClusterFollowsSourceFailover: the primary SIGKILLed under the
// load once the replica caught up, the replica promoted, the proxy
// switched: the owner node follows by itself (same owner, same epoch; its
// state names the promoted replica and counts the switch), and the sink's
// target equals the promoted server's table, each row applied once, and
// the consumer has every row once, in commit order.
func TestClusterFollowsSourceFailover(t *testing.T) {
	f := startSourceFailover(t)
	owner, epoch := f.c.OwnerOf(t, "shop")
	f.tp.FailOver(t, f.vip, f.replica)
	f.waitReading(t, owner)
	if now, e := f.c.OwnerOf(t, "shop"); now != owner || e != epoch {
		t.Errorf("the source failover moved the destination: owner %s epoch %d, then %s epoch %d", owner.Name, epoch, now.Name, e)
	}
	f.finish(t)
}

// TestClusterOwnerKilledDuringSourceFailover: the same, with the owner
// node SIGKILLed right after the proxy switched (its reader may or may
// not have reached the promoted replica yet): another node takes over,
// resumes the source on the promoted replica by GTID and the sink from
// the target's checkpoints, and the target and the consumer still hold
// every row of the source exactly once.
func TestClusterOwnerKilledDuringSourceFailover(t *testing.T) {
	f := startSourceFailover(t)
	owner, epoch := f.c.OwnerOf(t, "shop")
	f.tp.FailOver(t, f.vip, f.replica)
	owner.Kill()
	var next *nodes.Node
	f.c.WaitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
		n, e := f.c.OwnerOf(t, "shop")
		next = n
		return e != epoch, "no takeover yet"
	})
	owner.MustStart(t, f.c.Bin, f.c.JoinOf(owner))
	t.Logf("owner %s (epoch %d) killed after the source switch; %s took over", owner.Name, epoch, next.Name)
	f.finish(t)
}
