package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
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
	want, res := f.load.StopAfter(t, f.replica, 20)
	if lost := res.NotIn(want); len(lost) > 0 {
		t.Fatalf("ids %v were acknowledged but are not on the promoted replica", lost)
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

// TestClusterAcceptsLostTransactions: the replica's replication stopped
// under the load, the primary writes on and braid emits rows the replica
// never receives; the primary SIGKILLed, the replica promoted, the proxy
// switched. The promoted server lacks those rows: the owner names the
// loss and waits. `braid destination accept-lost` (the CLI, against the
// cluster) accepts it; once every kept cursor but one is past the
// marker, the owner is SIGKILLed and the next one goes on on the
// promoted server. The consumer gets every row once, in order, the lost
// ones before one LOST marker naming them and the promoted server's
// after it; the MySQL sink's target holds every row emitted, each
// applied once (the lost ones stay: they went out), and `braid sink
// verify` against the new primary names exactly the lost rows as extra,
// nothing else. The one left behind, a consumer that stopped reading
// before the failover, is refused alone by the new owner (410, one line
// naming the loss, the marker's seq and the fix); the old code started
// the new owner's run from its cursor, and the destination stopped.
func TestClusterAcceptsLostTransactions(t *testing.T) {
	f := startSourceFailover(t)
	owner, epoch := f.c.OwnerOf(t, "shop")
	state := func(n *nodes.Node) (wire.State, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		return f.c.State(ctx, n.Node, "shop")
	}
	// A consumer that catches up (its replay from the start, if it has
	// one, over: it reads the shared store), then stops reading, its
	// cursor kept before what the failover will lose: the slowest.
	slow := startConsumer(t, f.c, "shop", "slow")
	f.c.WaitFor(t, 60*time.Second, "the slow consumer caught up", func() (bool, string) {
		st, err := state(owner)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range st.Clients {
			if c.ID == "slow" {
				return !c.Detached && !c.Replaying && c.AckedSeq+2 >= st.Seq, fmt.Sprintf("%+v at seq %d", c, st.Seq)
			}
		}
		return false, "no client slow"
	})
	slow.stop()
	// The consumer keeps up (its replay reader from the start, if it has
	// one, caught up): one behind when the primary dies would have its
	// place inside the lost transactions.
	f.c.WaitFor(t, 60*time.Second, "the consumer caught up", func() (bool, string) {
		st, err := state(owner)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range st.Clients {
			if c.ID == "fo" {
				return c.AckedSeq+2 >= st.Seq, fmt.Sprintf("acked %d of %d", c.AckedSeq, st.Seq)
			}
		}
		return false, "no client fo"
	})
	// The receiver stops: what it received is applied (Promote waits for
	// it), what the primary writes after never reaches the replica.
	f.replica.Exec(t, "STOP SLAVE IO_THREAD")
	received := f.replica.ReplicationStatus(t).IOPos
	var last int64
	f.c.WaitFor(t, 30*time.Second, "the replica applying what it received", func() (bool, string) {
		got := f.replica.Query(t, "SELECT MASTER_GTID_WAIT('"+received+"', 0.5)")
		kept := ids(t, f.replica)
		last = kept[len(kept)-1]
		return len(got) == 1 && got[0][0] == "0", "applying"
	})
	f.c.WaitFor(t, 60*time.Second, "rows the replica never received at the consumer", func() (bool, string) {
		n := 0
		for _, m := range f.cs.snapshot() {
			for _, id := range m.ids {
				if id > last {
					n++
				}
			}
		}
		return n >= 10, fmt.Sprintf("%d past id %d", n, last)
	})
	f.tp.KillPrimary(t)
	f.tp.Promote(t, f.replica)
	f.vip.Switch(f.replica.Addr())

	var lost string
	f.c.WaitFor(t, 90*time.Second, "the loss named", func() (bool, string) {
		st, err := state(owner)
		if err != nil || len(st.Sources) != 1 {
			return false, fmt.Sprint(st.Sources, err)
		}
		lost = st.Sources[0].Lost
		return lost != "", "nothing lost yet"
	})
	out, errs, code := cli("destination", "accept-lost", "shop", "a", "--server", f.c.Nodes[0].URL())
	if code != 0 || !strings.Contains(out, lost) {
		t.Fatalf("accept-lost: exit %d: %s%s", code, out, errs)
	}
	// Once every client's kept cursor but slow's is past the marker, and
	// the sink has applied a second of the load past it (its cursor is
	// kept every 500ms), the owner is killed: the next one resumes on the
	// promoted server from there, and refuses slow alone.
	var marker uint64
	f.c.WaitFor(t, 90*time.Second, "every kept cursor past the marker", func() (bool, string) {
		for _, m := range f.cs.snapshot() {
			if m.lost != "" {
				marker = m.seq
			}
		}
		if marker == 0 {
			return false, "no marker at the consumer yet"
		}
		st, err := state(owner)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range st.Clients {
			if c.ID != "slow" && (c.Cursor == nil || c.Cursor.Seq <= marker) {
				return false, fmt.Sprintf("client %s kept at %v, the marker is seq %d", c.ID, c.Cursor, marker)
			}
		}
		out, errs, code := cli("sink", "list", "shop", "--json", "--server", owner.URL())
		var sinks []wire.SinkState
		if code != 0 || json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 {
			return false, fmt.Sprintf("sink list: exit %d %s%s", code, out, errs)
		}
		return sinks[0].AppliedSeq > marker+50, fmt.Sprintf("the sink applied seq %d, the marker is %d", sinks[0].AppliedSeq, marker)
	})
	owner.Kill()
	f.c.WaitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
		_, e := f.c.OwnerOf(t, "shop")
		return e != epoch, "no takeover yet"
	})
	owner.MustStart(t, f.c.Bin, f.c.JoinOf(owner))
	t.Logf("lost %s accepted; owner %s (epoch %d) killed after it", lost, owner.Name, epoch)

	now, _ := f.load.StopAfter(t, f.replica, 20) // acknowledged ids were lost: not checked

	// The consumer: every row once, in order; one marker, after the last
	// row the promoted server lacks and before its own.
	var pre, post []int64
	markers := 0
	f.c.WaitFor(t, 90*time.Second, "the promoted server's rows at the consumer", func() (bool, string) {
		pre, post, markers = nil, nil, 0
		for _, m := range f.cs.snapshot() {
			if m.lost != "" {
				markers++
				if m.lost != lost {
					t.Fatalf("the marker names %q; want %q", m.lost, lost)
				}
				continue
			}
			if markers == 0 {
				pre = append(pre, m.ids...)
			} else {
				post = append(post, m.ids...)
			}
		}
		return markers == 1 && len(post) > 0 && post[len(post)-1] == now[len(now)-1], fmt.Sprintf("%d markers, %d rows after", markers, len(post))
	})
	if markers != 1 {
		t.Fatalf("%d LOST markers; want one", markers)
	}
	var lostIDs []int64
	for _, id := range pre {
		if !slices.Contains(now, id) {
			lostIDs = append(lostIDs, id)
		}
	}
	for _, id := range post {
		if !slices.Contains(now, id) || slices.Contains(pre, id) {
			t.Fatalf("id %d after the marker: not the promoted server's, or twice", id)
		}
	}
	if len(lostIDs) < 10 {
		t.Errorf("%d rows the promoted server lacks went out before the marker; want the 10 or more written after its replication stopped", len(lostIDs))
	}
	all := append(slices.Clone(pre), post...)
	if !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Errorf("the consumer's ids are not each once in commit order: %v", all)
	}
	for _, id := range now {
		if !slices.Contains(all, id) {
			t.Errorf("id %d of the promoted server never reached the consumer", id)
		}
	}
	checkStream(t, f.cs.snapshot(), now)
	// slow is refused, with one line, and nothing more.
	urls := make([]string, 0, len(f.c.Nodes))
	for _, n := range f.c.Nodes {
		urls = append(urls, n.URL())
	}
	app := f.c.Security.Consumer
	cl, err := client.New(strings.Join(urls, ","), client.WithToken(app.User, app.Password))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	err = cl.Stream(ctx, "shop", "slow", func(m client.Message) error {
		return fmt.Errorf("slow got seq %d", m.Seq)
	})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusGone || !strings.Contains(ce.Message, "braid consumer drop shop slow") ||
		!strings.Contains(ce.Message, fmt.Sprintf("seq:%d", marker)) || !strings.Contains(ce.Message, lost) {
		t.Errorf("slow after the owner change: %v; want 410 naming the loss %s, seq:%d and braid consumer drop", err, lost, marker)
	} else {
		t.Logf("slow was refused: %v", err)
	}
	out, errs, code = cli("consumer", "list", "shop", "--json", "--server", f.c.Nodes[0].URL())
	var listed []wire.ClientState
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil {
		t.Fatalf("consumer list: exit %d: %s%s", code, out, errs)
	}
	for _, c := range listed {
		if (c.ID == "slow") != strings.Contains(c.Refused, "braid consumer drop shop slow") {
			t.Errorf("consumer list: %s refused %q; want slow alone refused", c.ID, c.Refused)
		}
	}
	// The new owner, which started past the marker, knows where it went
	// out: kept in Raft with the accept.
	f.c.WaitFor(t, 60*time.Second, "the new owner showing the marker's seq", func() (bool, string) {
		next, _ := f.c.OwnerOf(t, "shop")
		st, err := state(next)
		if err != nil || len(st.Sources) != 1 {
			return false, fmt.Sprint(st.Sources, err)
		}
		acc := st.Sources[0].Accepted
		return len(acc) == 1 && acc[0].Lost == lost && acc[0].MarkerSeq == marker, fmt.Sprintf("accepted %+v; want %s, its marker at seq %d", acc, lost, marker)
	})

	// The sink: every row emitted, each applied once; verify against the
	// new primary equal.
	want := make([]string, len(all))
	for i, id := range all {
		want[i] = strconv.FormatInt(id, 10)
	}
	slices.Sort(want)
	f.c.WaitFor(t, 90*time.Second, "the target holding every row emitted", func() (bool, string) {
		got := f.tg.read("SELECT id FROM " + f.tg.orders())
		return slices.Equal(got, want), fmt.Sprintf("target has %d rows, the stream %d", len(got), len(want))
	})
	if n, _ := f.tg.audit(); n != len(all) {
		t.Errorf("%d applications for %d rows", n, len(all))
	}
	// verify against the new primary: every row it has is in the target,
	// and the lost rows, which went out, are named as the target's extra
	// rows, no other difference.
	out, errs, code = cli("sink", "verify", "shop", "copy", "--sample", "100000", "--json", "--server", f.c.Nodes[0].URL())
	var v wire.SinkVerify
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("sink verify: exit %d: %s%s", code, out, errs)
	}
	var extra []int64
	for _, d := range v.Differences {
		id, _ := strconv.ParseInt(*d.Key[0].Value, 10, 64)
		if d.Kind != "extra" {
			t.Errorf("sink verify: %s difference at id %d; want only the lost rows, extra", d.Kind, id)
		}
		extra = append(extra, id)
	}
	slices.Sort(extra)
	if !slices.Equal(extra, lostIDs) {
		t.Errorf("sink verify names %v as extra in the target; want the lost rows %v", extra, lostIDs)
	}
	t.Logf("%d rows before the marker (%d lost in the failover), %d after", len(pre), len(lostIDs), len(post))
}
