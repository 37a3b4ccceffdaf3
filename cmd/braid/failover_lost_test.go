package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
)

// TestCaptureNamesLostTransactions: the replica's replication stopped
// before the primary's last transaction, which braid printed; the
// primary killed, the replica promoted, the proxy switched. The promoted
// server will never have that transaction: braid says it was lost in
// the failover, naming its GTID, and waits, printing nothing from the
// new server and not exiting. The old code said the server was catching
// up.
func TestCaptureNamesLostTransactions(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	replica.FlushLogs(t)
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1), (2)")
	tp.WaitCaughtUp(t)
	vip := tcpproxy.Start(t, primary.Addr())
	c := startFailoverCapture(t, vip.Addr())
	c.waitIDs(t, []int64{1, 2}, 60*time.Second)

	tp.StopReplication(t, replica)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)")
	last := primary.GTIDBinlogPos(t)
	c.waitIDs(t, []int64{1, 2, 3}, 60*time.Second)
	tp.KillPrimary(t)
	tp.Promote(t, replica)
	vip.Switch(replica.Addr())
	c.waitLog(t, "lost in the failover")
	var line string
	for l := range strings.Lines(c.errb.String()) {
		if strings.Contains(l, "lost in the failover") {
			line = l
			break
		}
	}
	// The primary's last GTID, in its own domain: "D-ID-N".
	var lost string
	for g := range strings.SplitSeq(last, ",") {
		if strings.Contains(g, fmt.Sprintf("-%d-", primary.ServerID)) {
			lost = g
		}
	}
	t.Logf("%s", line)
	if lost == "" || !strings.Contains(line, lost) {
		t.Fatalf("the line does not name the lost GTID %s (primary's gtid_binlog_pos %s): %s", lost, last, line)
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
