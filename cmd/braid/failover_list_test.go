package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
	"github.com/braid-cdc/braid/spec"
)

// Issue 42 point 2: a source whose address lists its servers. braid
// follows a failover by itself, no virtual IP in front of it: it retries
// the server it lost for failover_after, then reads another listed one
// (writable, or with read_from: replica read-only), resuming there by
// GTID.

// listSpec is a spec of one source a reading shop.orders from start
// earliest at the servers' addresses, in order, with the source keys
// extra ("failover_after: 1s, read_from: replica").
func listSpec(extra string, servers ...*mysqltest.Server) string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = "'" + s.Addr() + "'"
	}
	if extra != "" {
		extra = ", " + extra
	}
	return fmt.Sprintf("name: shop\nsources: [{name: a, address: [%s], start: earliest%s}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\n",
		strings.Join(addrs, ", "), extra)
}

// switchLine is the log line of a switch to the server with id.
func switchLine(log string, id uint32) string {
	re := regexp.MustCompile(`(?m)^.*source switched servers.*new_server="server_id ` + fmt.Sprint(id) + ` .*$`)
	return re.FindString(log)
}

// TestCaptureFollowsAddressList: a source listing its primary and two
// replicas, no proxy in front of braid; the primary SIGKILLed under a
// steady write load (which reaches it through the application's own
// virtual IP) once the replicas caught up, the first replica promoted:
// braid retries the dead primary for failover_after, then reads the
// promoted replica by itself, and prints every committed row exactly
// once, in commit order, with one switch line naming both servers. The
// old spec refused the list.
func TestCaptureFollowsAddressList(t *testing.T) {
	tp := mysqltest.StartTopology(t, 2)
	primary, r1, r2 := tp.Primary(), tp.Replicas()[0], tp.Replicas()[1]
	r1.FlushLogs(t) // files and offsets that do not line up with the primary's
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)")
	app := tcpproxy.Start(t, primary.Addr())
	c := startCaptureSpec(t, listSpec("failover_after: 2s", primary, r1, r2))
	load := mysqltest.StartLoad(t, app.Addr(), "shop", "orders", 20*time.Millisecond)
	retry.Until(t, 60*time.Second, func() error {
		if n := len(c.inserts(t)); n < 20 {
			return fmt.Errorf("%d rows printed, want 20 before the failover", n)
		}
		return nil
	})

	app.Pause() // the application's writes stall while the replicas catch up
	tp.WaitCaughtUp(t)
	tp.KillPrimary(t)
	tp.Promote(t, r1)
	app.Switch(r1.Addr())
	app.Resume()
	want, res := load.StopAfter(t, r1, 20)
	if lost := res.NotIn(want); len(lost) > 0 {
		t.Fatalf("ids %v were acknowledged but are not on the promoted replica", lost)
	}
	c.waitIDs(t, want, 60*time.Second)
	line := switchLine(c.errb.String(), r1.ServerID)
	if line == "" || !strings.Contains(line, fmt.Sprintf(`old_server="server_id %d `, primary.ServerID)) || !strings.Contains(line, "took=") {
		t.Fatalf("no switch line from server %d to %d (with how long it took):\n%s", primary.ServerID, r1.ServerID, c.errb.String())
	}
	if n := strings.Count(c.errb.String(), "source switched servers"); n != 1 {
		t.Errorf("%d switch lines, want 1:\n%s", n, c.errb.String())
	}
}

// TestCaptureRefusesPurgedReplica: the cursor at the primary's row 2;
// the primary dies after row 3 reached both replicas, and the first
// listed replica purged the binlog that holds row 3. braid refuses that
// replica, naming the purged GTIDs, and reads row 3 from the next one.
func TestCaptureRefusesPurgedReplica(t *testing.T) {
	tp := mysqltest.StartTopology(t, 2)
	primary, r1, r2 := tp.Primary(), tp.Replicas()[0], tp.Replicas()[1]
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)", "INSERT INTO shop.orders VALUES (2)")
	tp.WaitCaughtUp(t)
	text := listSpec("failover_after: 1s", primary, r1, r2)
	dir := t.TempDir()
	code, c := captureSpecOnce(t, text, dir, 3) // CREATE TABLE, 1, 2
	if got := c.inserts(t); code != 0 || !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("first run: exit %d, printed %v, want 0 and [1 2]; stderr:\n%s", code, got, c.errb.String())
	}
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)")
	tp.WaitCaughtUp(t)
	gtid3 := primary.GTIDBinlogPos(t) // "0-<primary>-N": row 3's
	r1.PurgeBinlogs(t)
	tp.KillPrimary(t)

	code, c = captureSpecOnce(t, text, dir, 1)
	if got := c.inserts(t); code != 0 || !slices.Equal(got, []int64{3}) {
		t.Fatalf("after the failover: exit %d, printed %v, want 0 and [3]; stderr:\n%s", code, got, c.errb.String())
	}
	stderr := c.errb.String()
	refusal := regexp.MustCompile(`(?m)^.*server of the source not read.*addr=` + regexp.QuoteMeta(r1.Addr()) + `.*$`).FindString(stderr)
	if refusal == "" || !strings.Contains(refusal, "purged GTIDs braid has not read yet") || !strings.Contains(refusal, gtid3) {
		t.Fatalf("no line refusing %s naming the purged %s:\n%s", r1.Addr(), gtid3, stderr)
	}
	if switchLine(stderr, r2.ServerID) == "" {
		t.Fatalf("no switch line to server %d:\n%s", r2.ServerID, stderr)
	}
}

// TestCaptureSkipsPurgedReplicaLive: the same refusal while braid
// runs, with read_from: replica. braid reads replica r2, which stops
// replicating after row 2; row 3 reaches r1, which then purges the
// binlog holding it. r2 killed, braid tries the list after
// failover_after: r1, a replica as asked, is refused with the purged
// GTIDs named, and the primary, the only server left, is read instead
// (a primary rather than none), so row 3 is printed once.
func TestCaptureSkipsPurgedReplicaLive(t *testing.T) {
	tp := mysqltest.StartTopology(t, 2)
	primary, r1, r2 := tp.Primary(), tp.Replicas()[0], tp.Replicas()[1]
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)", "INSERT INTO shop.orders VALUES (2)")
	tp.WaitCaughtUp(t)
	c := startCaptureSpec(t, listSpec("failover_after: 1s, read_from: replica", r2, r1, primary))
	c.waitIDs(t, []int64{1, 2}, 60*time.Second)
	tp.StopReplication(t, r2)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)")
	tp.WaitCaughtUp(t, r1)
	gtid3 := primary.GTIDBinlogPos(t)
	r1.PurgeBinlogs(t)
	r2.Kill(t)
	c.waitIDs(t, []int64{1, 2, 3}, 60*time.Second)
	stderr := c.errb.String()
	refusal := regexp.MustCompile(`(?m)^.*server of the source not read.*addr=` + regexp.QuoteMeta(r1.Addr()) + `.*$`).FindString(stderr)
	if refusal == "" || !strings.Contains(refusal, "purged GTIDs braid has not read yet") || !strings.Contains(refusal, gtid3) {
		t.Fatalf("no line refusing %s naming the purged %s:\n%s", r1.Addr(), gtid3, stderr)
	}
	line := switchLine(stderr, primary.ServerID)
	if line == "" || !strings.Contains(line, fmt.Sprintf(`old_server="server_id %d `, r2.ServerID)) || !strings.Contains(line, "lost "+r2.Addr()) {
		t.Fatalf("no switch line from server %d to the primary %d saying it lost %s:\n%s", r2.ServerID, primary.ServerID, r2.Addr(), stderr)
	}
	if !strings.Contains(stderr, "no server of the kind read_from prefers can be read") {
		t.Fatalf("no line saying braid reads a primary for want of a replica:\n%s", stderr)
	}
}

// captureSpecOnce is captureOnce for a spec text.
func captureSpecOnce(t *testing.T, text, dir string, max int) (int, *failoverCapture) {
	t.Helper()
	c := &failoverCapture{code: make(chan int, 1)}
	code := run([]string{"capture", "-f", nodes.WriteSpec(t, text), "--cursor-dir", dir, "--max", fmt.Sprint(max), "--timeout", "90s"}, &c.out, &c.errb)
	return code, c
}

// TestCaptureReadsReplicaAndShowsSwitch: with read_from: replica braid
// reads the first listed read-only server, not the primary listed
// before it; killed, that replica is followed by the next one. What the
// API (which `braid destination show --json` prints), the text of
// `braid destination show` and /metrics say of the source changes with
// the switch: the server read, the GTID position,
// the switches and the last switch's time.
func TestCaptureReadsReplicaAndShowsSwitch(t *testing.T) {
	tp := mysqltest.StartTopology(t, 2)
	primary, r1, r2 := tp.Primary(), tp.Replicas()[0], tp.Replicas()[1]
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)")
	tp.WaitCaughtUp(t)
	ds, err := spec.Parse([]byte(listSpec("failover_after: 1s, read_from: replica", primary, r1, r2)))
	if err != nil {
		t.Fatal(err)
	}
	var logs logline.Buffer
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil)))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	// The source as the API shows it (GET /v1/destinations/shop, which
	// braid destination show reads from a cluster's owner).
	source := func() (wire.SourceState, error) {
		resp, err := http.Get(url + "/v1/destinations/shop")
		if err != nil {
			return wire.SourceState{}, err
		}
		defer resp.Body.Close()
		var st wire.State
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.Sources) != 1 {
			return wire.SourceState{}, fmt.Errorf("GET /v1/destinations/shop: %s: %v: %+v", resp.Status, err, st)
		}
		return st.Sources[0], nil
	}
	metric := func(name string) string {
		t.Helper()
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + name + `\{dest="shop",source="a"\} (\S+)$`).FindStringSubmatch(string(b))
		if m == nil {
			return ""
		}
		return m[1]
	}
	onR1 := fmt.Sprintf("server_id %d ", r1.ServerID)
	var before wire.SourceState
	retry.Until(t, 60*time.Second, func() error {
		var err error
		if before, err = source(); err != nil {
			return err
		}
		if !strings.HasPrefix(before.Server, onR1) || before.GTIDs == "" {
			return fmt.Errorf("source reads %q at %q, want %s… (the first replica) and a GTID position", before.Server, before.GTIDs, onR1)
		}
		return nil
	})
	if before.Switches != 0 || before.LastSwitchAt != nil || metric("braid_source_switches_total") != "0" {
		t.Fatalf("switches before any: %+v, metric %s", before, metric("braid_source_switches_total"))
	}

	primary.Exec(t, "INSERT INTO shop.orders VALUES (2)")
	tp.WaitCaughtUp(t)
	r1.Kill(t)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)")
	onR2 := fmt.Sprintf("server_id %d ", r2.ServerID)
	var after wire.SourceState
	retry.Until(t, 90*time.Second, func() error {
		var err error
		if after, err = source(); err != nil {
			return err
		}
		if !strings.HasPrefix(after.Server, onR2) || after.Switches != 1 {
			return fmt.Errorf("source reads %q after %d switches, want %s… (the second replica) after 1", after.Server, after.Switches, onR2)
		}
		return nil
	})
	if after.LastSwitchAt == nil || after.GTIDs == before.GTIDs {
		t.Fatalf("after the switch: last switch %v, gtids %q (were %q)", after.LastSwitchAt, after.GTIDs, before.GTIDs)
	}
	if got := metric("braid_source_switches_total"); got != "1" {
		t.Fatalf("braid_source_switches_total %s, want 1", got)
	}
	if metric("braid_source_last_switch_timestamp_seconds") == "" {
		t.Fatal("no braid_source_last_switch_timestamp_seconds")
	}
	// braid destination show, pointed at the capture.
	var text, errText strings.Builder
	if code := runDestinationShow([]string{"shop", "--server", url}, &text, &errText); code != 0 {
		t.Fatalf("braid destination show against a capture: exit %d: %s", code, errText.String())
	}
	if !strings.HasPrefix(text.String(), "destination shop (a braid capture's") || !regexp.MustCompile(`SERVER +SWITCHES`).MatchString(text.String()) || !strings.Contains(text.String(), onR2) || !strings.Contains(text.String(), "1, last ") {
		t.Fatalf("braid destination show does not show the server read and one switch:\n%s", text.String())
	}
	if switchLine(logs.String(), r2.ServerID) == "" {
		t.Fatalf("no switch line to server %d:\n%s", r2.ServerID, logs.String())
	}
	if strings.Contains(logs.String(), fmt.Sprintf(`new_server="server_id %d `, primary.ServerID)) {
		t.Fatalf("read the primary though read_from is replica:\n%s", logs.String())
	}
}
