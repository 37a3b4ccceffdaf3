package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
)

// Issue 42: a source behind a virtual IP (a tcpproxy here) whose primary
// fails over to a replica. braid must find its place on the new server by
// GTID, never at the old server's file:pos.

// failoverCapture runs `braid capture` on one source at addr, start
// earliest, selecting shop.orders, until it exits (code) or the test
// ends.
type failoverCapture struct {
	out  lineSink
	errb logline.Buffer
	code chan int
}

func startFailoverCapture(t *testing.T, addr string) *failoverCapture {
	t.Helper()
	return startCaptureSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\n", addr))
}

// startCaptureSpec runs `braid capture` on the spec text, as
// startFailoverCapture does.
func startCaptureSpec(t *testing.T, text string) *failoverCapture {
	t.Helper()
	spec := nodes.WriteSpec(t, text)
	c := &failoverCapture{code: make(chan int, 1)}
	go func() {
		c.code <- run([]string{"capture", "-f", spec, "--cursor-dir", t.TempDir(), "--timeout", "2m"}, &c.out, &c.errb)
	}()
	return c
}

// inserts returns the ids of the INSERT lines printed so far, in order,
// and fails the test on a line that is not one of shop.orders' INSERTs
// or DDL.
func (c *failoverCapture) inserts(t *testing.T) []int64 {
	t.Helper()
	out := c.out.String()
	var ids []int64
	var last uint64
	for line := range strings.Lines(out) {
		if !strings.HasSuffix(line, "\n") {
			break
		}
		var m struct {
			Seq         uint64
			Type, Table string
			IsDdl       bool
			Data        []map[string]*string
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		if m.Seq <= last && m.Seq != last {
			t.Fatalf("seq %d after %d: %s", m.Seq, last, line)
		}
		last = m.Seq
		if m.IsDdl {
			continue
		}
		if m.Type != "INSERT" || m.Table != "orders" {
			t.Fatalf("unexpected line: %s", line)
		}
		for _, d := range m.Data {
			id, err := strconv.ParseInt(*d["id"], 10, 64)
			if err != nil {
				t.Fatalf("id of %s: %v", line, err)
			}
			ids = append(ids, id)
		}
	}
	return ids
}

// waitIDs waits until the capture printed want (exactly, in order), and
// fails at once when it printed something else or exited.
func (c *failoverCapture) waitIDs(t *testing.T, want []int64, timeout time.Duration) {
	t.Helper()
	var exited bool
	err := retry.Wait(t.Context(), timeout, func() error {
		select {
		case code := <-c.code:
			c.code <- code
			exited = true
			return nil
		default:
		}
		got := c.inserts(t)
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("printed ids %v, want %v (each once, in commit order); stderr:\n%s", got, want, c.errb.String())
		}
		if len(got) < len(want) {
			return fmt.Errorf("printed %d of %d ids (last %v)", len(got), len(want), got[max(0, len(got)-1):])
		}
		return nil
	})
	if exited {
		t.Fatalf("capture exited (%d) before printing %d ids; printed %v; stderr:\n%s", <-c.code, len(want), c.inserts(t), c.errb.String())
	}
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, c.errb.String())
	}
}

// TestCaptureFollowsFailover: the primary SIGKILLed under a steady write
// load once its replica has caught up, the replica promoted, the proxy
// switched: braid resumes on the promoted replica by GTID and prints
// every committed row exactly once, in commit order (the load writes ids
// in order on one connection), those written after the switch included.
// The old code asked the promoted replica for the old primary's file:pos
// and exited 1 (impossible position).
func TestCaptureFollowsFailover(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	// As in production, the replica's binlog files do not line up with
	// the primary's (here the old code's file:pos would re-read it).
	replica.FlushLogs(t)
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)")
	vip := tcpproxy.Start(t, primary.Addr())
	c := startFailoverCapture(t, vip.Addr())
	load := mysqltest.StartLoad(t, vip.Addr(), "shop", "orders", 20*time.Millisecond)
	retry.Until(t, 60*time.Second, func() error {
		if n := len(c.inserts(t)); n < 20 {
			return fmt.Errorf("%d rows printed, want 20 before the failover", n)
		}
		return nil
	})

	// The virtual IP stops forwarding (the load's writes and braid's
	// stream stall, as when a primary hangs), the replica catches up,
	// the primary dies, the replica is promoted and the IP moves to it.
	tp.FailOver(t, vip, replica)
	want, res := load.StopAfter(t, replica, 20) // committed ones and the unknown ones that were
	if lost := res.NotIn(want); len(lost) > 0 {
		t.Fatalf("ids %v were acknowledged but are not on the promoted replica", lost)
	}
	c.waitIDs(t, want, 60*time.Second)
	if !strings.Contains(c.errb.String(), "source switched servers") {
		t.Errorf("no switch line in the log:\n%s", c.errb.String())
	}
}

// startBehindProxy starts a primary with one replica (opts apply to
// both), whose binlog files do not line up with the primary's, as in
// production (there the old code's file:pos would re-read the replica);
// shop.orders with rows 1 and 2, replicated; and a capture reading the
// primary through a proxy, the virtual IP, once it printed both rows.
func startBehindProxy(t *testing.T, opts ...mysqltest.Option) (tp *mysqltest.Topology, primary, replica *mysqltest.Server, vip *tcpproxy.Proxy, c *failoverCapture) {
	t.Helper()
	tp = mysqltest.StartTopology(t, 1, opts...)
	primary, replica = tp.Primary(), tp.Replicas()[0]
	replica.FlushLogs(t)
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1), (2)")
	tp.WaitCaughtUp(t)
	vip = tcpproxy.Start(t, primary.Addr())
	c = startFailoverCapture(t, vip.Addr())
	c.waitIDs(t, []int64{1, 2}, 60*time.Second)
	return tp, primary, replica, vip, c
}

// TestCaptureWaitsForLaggingReplica: the proxy switched to a replica one
// transaction behind what braid printed: braid waits for it (saying so),
// then goes on once it caught up, with no row lost or printed twice.
func TestCaptureWaitsForLaggingReplica(t *testing.T) {
	tp, primary, replica, vip, c := startBehindProxy(t)

	tp.StopReplication(t, replica)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)")
	c.waitIDs(t, []int64{1, 2, 3}, 60*time.Second)
	vip.Switch(replica.Addr())
	retry.Until(t, 60*time.Second, func() error {
		if !strings.Contains(c.errb.String(), "waiting for it to catch up") {
			return fmt.Errorf("no waiting line yet")
		}
		return nil
	})
	if got := c.inserts(t); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("printed %v while waiting, want [1 2 3]", got)
	}
	tp.StartReplication(t, replica)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (4)", "INSERT INTO shop.orders VALUES (5)")
	tp.WaitCaughtUp(t)
	c.waitIDs(t, []int64{1, 2, 3, 4, 5}, 60*time.Second)
	if !strings.Contains(c.errb.String(), "source switched servers") {
		t.Errorf("no switch line in the log:\n%s", c.errb.String())
	}
}

// TestCaptureStopsOnSwitchWithoutStrictGTID: without gtid_strict_mode a
// switch of servers stops the source with one line naming the setting,
// and nothing is printed from the new server.
func TestCaptureStopsOnSwitchWithoutStrictGTID(t *testing.T) {
	tp, primary, replica, vip, c := startBehindProxy(t, mysqltest.WithArgs("--gtid-strict-mode=OFF"))
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)")
	tp.WaitCaughtUp(t)
	c.waitIDs(t, []int64{1, 2, 3}, 60*time.Second)

	vip.Switch(replica.Addr())
	var code int
	select {
	case code = <-c.code:
	case <-time.After(60 * time.Second):
		t.Fatalf("capture did not stop; stderr:\n%s", c.errb.String())
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, c.errb.String())
	}
	var lines []string
	for l := range strings.Lines(c.errb.String()) {
		if strings.Contains(l, "gtid_strict_mode") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 || !strings.Contains(lines[0], "gtid_strict_mode=ON") {
		t.Fatalf("no line naming gtid_strict_mode; stderr:\n%s", c.errb.String())
	}
	if got := c.inserts(t); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("printed %v, want [1 2 3] and nothing from the new server", got)
	}
}

// captureOnce runs `braid capture --max max` on one source at addr with
// its cursors in dir, and returns its exit code, output and standard
// error.
func captureOnce(t *testing.T, addr, dir string, max int) (int, *failoverCapture) {
	t.Helper()
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\n", addr))
	c := &failoverCapture{code: make(chan int, 1)}
	code := run([]string{"capture", "-f", spec, "--cursor-dir", dir, "--max", strconv.Itoa(max), "--timeout", "60s"}, &c.out, &c.errb)
	return code, c
}

// TestCaptureRestartsOnAnotherServer: a capture restarted from its
// cursor after the address moved to a replica goes on there by GTID,
// printing only what came after the cursor; one whose new server purged
// binlogs past the cursor is refused, the purged GTIDs named. The old
// code asked the replica for the primary's file:pos.
func TestCaptureRestartsOnAnotherServer(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	replica.FlushLogs(t)
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)", "INSERT INTO shop.orders VALUES (2)")
	vip := tcpproxy.Start(t, primary.Addr())
	dir := t.TempDir()
	code, c := captureOnce(t, vip.Addr(), dir, 3) // CREATE TABLE, 1, 2
	if got := c.inserts(t); code != 0 || !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("first run: exit %d, printed %v, want 0 and [1 2]; stderr:\n%s", code, got, c.errb.String())
	}
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)", "INSERT INTO shop.orders VALUES (4)")
	tp.WaitCaughtUp(t)
	vip.Switch(replica.Addr())
	code, c = captureOnce(t, vip.Addr(), dir, 2)
	if got := c.inserts(t); code != 0 || !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("on the replica: exit %d, printed %v, want 0 and [3 4]; stderr:\n%s", code, got, c.errb.String())
	}

	// The cursor is now on the replica; back to the primary, which
	// purged what follows it.
	replica.Exec(t, "SET GLOBAL read_only = OFF")
	primary.Exec(t, "INSERT INTO shop.orders VALUES (5)")
	primary.PurgeBinlogs(t)
	vip.Switch(primary.Addr())
	code, c = captureOnce(t, vip.Addr(), dir, 1)
	purged := fmt.Sprintf("purged GTIDs braid has not read yet (domain 0 seq 7 to 0-%d-7", primary.ServerID)
	if code != 1 || !strings.Contains(c.errb.String(), purged) {
		t.Fatalf("purged primary: exit %d, want 1 naming the purged GTIDs; stderr:\n%s", code, c.errb.String())
	}
	if got := c.inserts(t); len(got) != 0 {
		t.Fatalf("printed %v from a server that purged what follows the cursor", got)
	}
}

// TestCaptureFollowsFailoverThenAlter: the promoted replica's binlog
// files are numbered below the old primary's (the primary rotated more),
// and a shard ALTER runs on it after the switch. braid reads the ALTER
// and the rows written with the new column. The old code kept the
// schema model's positions from the old primary, skipped the new
// server's ALTER as applied already (its position compared lower), and
// stopped on the next row: "the row has 3 columns but the schema known
// there has 2" (found by an hour-long make chaos run, where a source
// failed over back and forth under shard ALTERs).
func TestCaptureFollowsFailoverThenAlter(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	for range 3 {
		primary.FlushLogs(t) // not replicated: the replica stays on its first file
	}
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)", "ALTER TABLE shop.orders ADD COLUMN a INT", "INSERT INTO shop.orders VALUES (2, 2)")
	tp.WaitCaughtUp(t)
	vip := tcpproxy.Start(t, primary.Addr())
	c := startFailoverCapture(t, vip.Addr())
	c.waitIDs(t, []int64{1, 2}, 60*time.Second)

	tp.FailOver(t, vip, replica)
	replica.Exec(t, "ALTER TABLE shop.orders ADD COLUMN b VARCHAR(8)", "INSERT INTO shop.orders VALUES (3, 3, 'after')")
	c.waitIDs(t, []int64{1, 2, 3}, 60*time.Second)
	out := c.out.String()
	if !strings.Contains(out, `"b":"after"`) {
		t.Errorf("row 3 came without its new column b:\n%s", out)
	}
}

// TestCaptureRestartAfterFailoverThenAlter: as above, but braid stops
// after the failover, having read a row of the promoted replica and no
// DDL there: its cursor holds the replica's position and the schema
// history of the old primary's positions. Started again on the replica,
// it must still apply the ALTER that runs there next. The old code
// resumed on the same server without a switch, kept the old primary's
// positions in the model, and skipped that ALTER as applied already.
func TestCaptureRestartAfterFailoverThenAlter(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	for range 3 {
		primary.FlushLogs(t)
	}
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)", "ALTER TABLE shop.orders ADD COLUMN a INT", "INSERT INTO shop.orders VALUES (2, 2)")
	tp.WaitCaughtUp(t)
	vip := tcpproxy.Start(t, primary.Addr())
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\n", vip.Addr()))
	cursors := t.TempDir()
	capture := func(max int) (string, string, int) {
		t.Helper()
		var out, errb logline.Buffer
		code := run([]string{"capture", "-f", spec, "--cursor-dir", cursors, "--max", strconv.Itoa(max), "--timeout", "60s"}, &out, &errb)
		return out.String(), errb.String(), code
	}
	if out, errb, code := capture(4); code != 0 { // CREATE TABLE, row 1, ALTER, row 2
		t.Fatalf("first capture: exit %d\n%s\n%s", code, out, errb)
	}
	tp.FailOver(t, vip, replica)
	replica.Exec(t, "INSERT INTO shop.orders VALUES (3, 3)")
	if out, errb, code := capture(1); code != 0 || !strings.Contains(out, `"id":"3"`) {
		t.Fatalf("capture across the failover: exit %d, want row 3\n%s\n%s", code, out, errb)
	}
	replica.Exec(t, "ALTER TABLE shop.orders ADD COLUMN b VARCHAR(8)", "INSERT INTO shop.orders VALUES (4, 4, 'after')")
	out, errb, code := capture(2) // the ALTER, then row 4
	if code != 0 || !strings.Contains(out, `"b":"after"`) {
		t.Fatalf("capture started again on the promoted replica: exit %d, want row 4 with its new column b\n%s\n%s", code, out, errb)
	}
}
