package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
	"github.com/braid-cdc/braid/spec"
)

// lostFailover is the lost-transaction tests' setup: a MariaDB primary
// and one replica (its binlog flushed) holding shop.orders with ids 1, 2,
// and a proxy in front of the primary for braid to read through.
type lostFailover struct {
	tp               *mysqltest.Topology
	primary, replica *mysqltest.Server
	vip              *tcpproxy.Proxy
}

func startLostFailover(t *testing.T) *lostFailover {
	t.Helper()
	tp := mysqltest.StartTopology(t, 1)
	f := &lostFailover{tp: tp, primary: tp.Primary(), replica: tp.Replicas()[0]}
	f.replica.FlushLogs(t)
	f.primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1), (2)")
	tp.WaitCaughtUp(t)
	f.vip = tcpproxy.Start(t, f.primary.Addr())
	return f
}

// writeUnreplicated stops the replica's replication and runs sqls on the
// primary: what failover will lose. It returns the primary's last GTID,
// in its own domain ("D-ID-N").
func (f *lostFailover) writeUnreplicated(t *testing.T, sqls ...string) string {
	t.Helper()
	f.tp.StopReplication(t, f.replica)
	f.primary.Exec(t, sqls...)
	pos := f.primary.GTIDBinlogPos(t)
	for g := range strings.SplitSeq(pos, ",") {
		if strings.Contains(g, fmt.Sprintf("-%d-", f.primary.ServerID)) {
			return g
		}
	}
	t.Fatalf("the primary's gtid_binlog_pos %s has no GTID of its own", pos)
	return ""
}

// failover kills the primary, promotes the replica and moves the proxy
// to it.
func (f *lostFailover) failover(t *testing.T) {
	t.Helper()
	f.tp.KillPrimary(t)
	f.tp.Promote(t, f.replica)
	f.vip.Switch(f.replica.Addr())
}

// TestCaptureNamesLostTransactions: the replica's replication stopped
// before the primary's last transaction, which braid printed; the
// primary killed, the replica promoted, the proxy switched. The promoted
// server will never have that transaction: braid says it was lost in
// the failover, naming its GTID, and waits, printing nothing from the
// new server and not exiting. The old code said the server was catching
// up.
func TestCaptureNamesLostTransactions(t *testing.T) {
	f := startLostFailover(t)
	c := startFailoverCapture(t, f.vip.Addr())
	c.waitIDs(t, []int64{1, 2}, 60*time.Second)

	lost := f.writeUnreplicated(t, "INSERT INTO shop.orders VALUES (3)")
	c.waitIDs(t, []int64{1, 2, 3}, 60*time.Second)
	f.failover(t)
	c.waitLog(t, "lost in the failover")
	var line string
	for l := range strings.Lines(c.errb.String()) {
		if strings.Contains(l, "lost in the failover") {
			line = l
			break
		}
	}
	t.Logf("%s", line)
	if !strings.Contains(line, lost) {
		t.Fatalf("the line does not name the lost GTID %s: %s", lost, line)
	}
	select {
	case code := <-c.code:
		t.Fatalf("capture exited (%d); it should wait; stderr:\n%s", code, c.errb.String())
	default:
	}
	if got := c.inserts(t); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("printed %v, want [1 2 3] and nothing from the new server while waiting", got)
	}
}

// lostStream is what a consumer of braid capture --http-port got: every
// message, in order.
type lostStream struct {
	mu   sync.Mutex
	msgs []client.Message
}

func (s *lostStream) snapshot() []client.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// ids are the INSERTed ids and, for a LOST marker, -1, in stream order.
func (s *lostStream) ids() []int64 {
	var out []int64
	for _, m := range s.snapshot() {
		switch m.Type {
		case client.TypeLost:
			out = append(out, -1)
		case "INSERT":
			for _, d := range m.Data {
				id, _ := strconv.ParseInt(*d["id"], 10, 64)
				out = append(out, id)
			}
		}
	}
	return out
}

// TestAcceptLostGoesOnWithMarker: as above, the promoted replica lacks
// the primary's last two transactions, which braid emitted, and braid
// waits, naming them. `braid destination accept-lost` (here against
// braid capture --http-port) accepts that loss: the source goes on on
// the promoted server, a LOST marker naming the lost GTIDs stands where
// it went on, and the promoted server's rows follow, the one written
// before the accept first; seqs stay dense. Before anything is lost, and
// once the loss is accepted, accept-lost is refused with one line.
func TestAcceptLostGoesOnWithMarker(t *testing.T) {
	f := startLostFailover(t)
	ds, err := spec.Parse(fmt.Appendf(nil, "name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\n", f.vip.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	ac, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	got := &lostStream{}
	ctx, cancel := context.WithCancel(t.Context())
	streamed := make(chan error, 1)
	go func() {
		streamed <- ac.Stream(ctx, "shop", "lost", func(m client.Message) error {
			got.mu.Lock()
			got.msgs = append(got.msgs, m)
			got.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-streamed })
	waitIDs := func(want []int64) {
		t.Helper()
		retry.Until(t, 90*time.Second, func() error {
			if ids := got.ids(); !slices.Equal(ids, want) {
				if len(ids) > len(want) || !slices.Equal(ids, want[:len(ids)]) {
					t.Fatalf("the consumer got %v, want %v (-1: the LOST marker)", ids, want)
				}
				return fmt.Errorf("got %v, want %v", ids, want)
			}
			return nil
		})
	}
	waitIDs([]int64{1, 2})
	refused := func(when string) {
		t.Helper()
		out, errs, code := cli("destination", "accept-lost", "shop", "a", "--server", base)
		if code != 1 || !strings.Contains(errs, "nothing to accept") || strings.Count(errs, "\n") != 1 {
			t.Fatalf("accept-lost %s: exit %d, %q %q; want 1 and one line saying there is nothing to accept", when, code, out, errs)
		}
	}
	refused("before anything is lost")

	lastGTID := f.writeUnreplicated(t, "INSERT INTO shop.orders VALUES (3)", "INSERT INTO shop.orders VALUES (4)")
	waitIDs([]int64{1, 2, 3, 4})
	f.failover(t)
	f.replica.Exec(t, "INSERT INTO shop.orders VALUES (10)")

	var lost string
	retry.Until(t, 90*time.Second, func() error {
		out, errs, code := cli("destination", "show", "shop", "--server", base, "--json")
		var info wire.DestinationInfo
		if code != 0 || json.Unmarshal([]byte(out), &info) != nil || len(info.Sources) != 1 {
			return fmt.Errorf("show: exit %d %s %s", code, out, errs)
		}
		if lost = info.Sources[0].Lost; lost == "" {
			return fmt.Errorf("source a has lost nothing yet: %+v", info.Sources[0])
		}
		return nil
	})
	if out, _, _ := cli("destination", "show", "shop", "--server", base); !strings.Contains(out, "LOST on source a") || !strings.Contains(out, "braid destination accept-lost shop a") {
		t.Errorf("destination show does not name the loss and the command:\n%s", out)
	}
	if !strings.Contains(lost, lastGTID) {
		t.Fatalf("lost %q does not name the primary's last GTID %s", lost, lastGTID)
	}
	if ids := got.ids(); !slices.Equal(ids, []int64{1, 2, 3, 4}) {
		t.Fatalf("while waiting the consumer got %v, want [1 2 3 4] and nothing from the new server", ids)
	}

	out, errs, code := cli("destination", "accept-lost", "shop", "a", "--server", base)
	if code != 0 || !strings.Contains(out, lost) {
		t.Fatalf("accept-lost: exit %d: %s%s", code, out, errs)
	}
	f.replica.Exec(t, "INSERT INTO shop.orders VALUES (11)")
	waitIDs([]int64{1, 2, 3, 4, -1, 10, 11})
	refused("once the loss is accepted")

	var seq, markerSeq uint64
	for _, m := range got.snapshot() {
		if m.Seq != seq && m.Seq != seq+1 {
			t.Fatalf("seq %d after %d: the stream's seqs are not dense", m.Seq, seq)
		}
		seq = m.Seq
		if m.Type == client.TypeLost {
			if m.SQL != lost || m.Source != "a" {
				t.Errorf("the marker names %q of source %q, want %q of a", m.SQL, m.Source, lost)
			}
			t.Logf("marker: seq %d, lost %s", m.Seq, m.SQL)
			markerSeq = m.Seq
		}
	}
	// The accept is shown: what, when, and where its marker went out.
	out, errs, code = cli("destination", "show", "shop", "--server", base, "--json")
	var info wire.DestinationInfo
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || len(info.Sources) != 1 {
		t.Fatalf("show: exit %d %s %s", code, out, errs)
	}
	if acc := info.Sources[0].Accepted; len(acc) != 1 || acc[0].Lost != lost || acc[0].AcceptedAt == nil || acc[0].MarkerSeq != markerSeq || markerSeq == 0 || info.Sources[0].Lost != "" {
		t.Errorf("show after the accept: lost %q, accepted %+v; want the accept of %q with its time and its marker at seq %d", info.Sources[0].Lost, acc, lost, markerSeq)
	}
	want := fmt.Sprintf("ACCEPTED LOSS on source a: %s", lost)
	if out, _, _ := cli("destination", "show", "shop", "--server", base); !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("its LOST marker: seq %d", markerSeq)) {
		t.Errorf("destination show does not name the accepted loss and its marker's seq %d:\n%s", markerSeq, out)
	}
}
