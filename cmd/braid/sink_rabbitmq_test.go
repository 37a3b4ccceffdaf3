package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/rabbittest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

// TestCaptureRabbitMQSinkSurvivesKills: `braid capture --quiet
// --cursor-dir` relays six shard tables on three servers, merged to
// shop.orders, to the machine's RabbitMQ (a vhost of the test's own) with
// queues: per-table, under a workload of single-row and multi-row
// inserts, updates (one changes a key) and deletes, every statement its
// own transaction and so its own message; it is SIGKILLed twice while it
// publishes. A consumer of the shop.orders queue, once it de-duplicates
// by message_id, has every message exactly once (as many as the
// statements, plus the CREATE TABLE) in stream order, and the rows they
// carry, applied in that order, equal the shards'.
func TestCaptureRabbitMQSinkSurvivesKills(t *testing.T) {
	url := rabbittest.Vhost(t)
	shards := sinktest.StartShop(t)
	specFile := writeSpec(t, shopSpecYAML(shards[:3], fmt.Sprintf(
		"sinks:\n  - {name: mq, type: rabbitmq, url: '%s', password: guest, queues: per-table}\n", url)))
	cursorDir := t.TempDir()
	capture := newCaptureRun(t, specFile)
	start := func() *exec.Cmd { return capture.start("--quiet", "--cursor-dir", cursorDir) }

	cmd := start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	c := rabbittest.Consume(t, url, "shop.orders")
	const rounds, perRound = 8, 6 * 38 // messages a round: 38 statements on each shard
	written := 1                       // the shards' CREATE TABLE, merged into one
	for round := range rounds {
		killed := make(chan *exec.Cmd, 1)
		if round == 2 || round == 5 {
			// Killed while it publishes this round, as it is written:
			// once the queue holds some of it.
			go func(old *exec.Cmd, n int) {
				for deadline := time.Now().Add(30 * time.Second); len(c.Deliveries()) <= n && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				old.Process.Kill() // SIGKILL
				old.Wait()
				killed <- start()
			}(cmd, written+rand.IntN(perRound/2))
		} else {
			killed <- cmd
		}
		for n, s := range shards {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 40 {
				vals = append(vals, fmt.Sprintf("(%d, 'c%d', %d, 'r%d')", base+int64(k), base+int64(k), k, round))
			}
			stmts := []string{"INSERT INTO shop_%[1]d.orders (id, code, amount, note) VALUES " + strings.Join(vals, ", ")}
			for k := range 20 {
				id := base + 100 + int64(k)
				stmts = append(stmts, fmt.Sprintf("INSERT INTO shop_%%[1]d.orders VALUES (%d, 'c%d', %d, NULL)", id, id, k))
			}
			for k := range 10 {
				stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET amount = amount + 1, note = 'u' WHERE id = %d", base+10+int64(k)))
			}
			stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET id = id + 500 WHERE id = %d", base+1))
			for k := range 5 {
				stmts = append(stmts, fmt.Sprintf("DELETE FROM shop_%%[1]d.orders WHERE id = %d", base+100+2*int64(k)))
			}
			stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET amount = amount * 2 WHERE id BETWEEN %d AND %d", base+20, base+39))
			for _, q := range stmts {
				s.Exec(t, fmt.Sprintf(q, n))
			}
		}
		written += perRound
		cmd = <-killed
	}

	want := sinktest.SourceRows(t, shards, func(n int) string {
		return fmt.Sprintf("SELECT id, code, amount, IFNULL(note, 'NULL') FROM shop_%d.orders", n)
	})
	var got rabbittest.Received
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		got = rabbittest.Dedup(t, c.Deliveries(), "shop")
		rows := got.Rows("id", "id", "code", "amount", "note")
		return len(got.Pos) >= written && slices.Equal(rows, want),
			fmt.Sprintf("the queue has %d messages of %d (%d delivered again; %s), %d rows of %d",
				len(got.Pos), written, got.Dups, got.Gaps(), len(rows), len(want))
	})
	if len(got.Pos) != written {
		t.Fatalf("the queue has %d distinct messages, the shards wrote %d", len(got.Pos), written)
	}
	got.Ordered(t)
	t.Logf("%d messages once each, in stream order, after 2 SIGKILLs (%d delivered again); %d rows equal the shards",
		written, got.Dups, len(want))
}

// TestCaptureShowsRabbitMQReturns: a rabbitmq sink whose exchange has no
// queue bound to its routing key, run by `braid capture --http-port`,
// stops at its first message: `braid sink list` shows the error naming
// the routing key, the returns and nothing published; the metrics count
// the returns; `braid sink verify` says what it can of a broker (the
// last seq published) and `braid sink show` the state in words.
func TestCaptureShowsRabbitMQReturns(t *testing.T) {
	url := rabbittest.Vhost(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id BIGINT PRIMARY KEY, note VARCHAR(40))",
		"INSERT INTO shop_0.orders VALUES (1, 'one')")
	ds, err := spec.Parse([]byte(fmt.Sprintf(`
name: shop
sources: [{name: a, address: '%s', start: earliest}]
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
heartbeat: 100ms
sinks: [{name: mq, type: rabbitmq, url: '%s', password: guest}]
`, srv.Addr(), url)))
	if err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	var s wire.SinkState
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		out, errs, code := cli("sink", "list", "shop", "--json", "--server", api)
		var sinks []wire.SinkState
		if code != 0 || json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 {
			return false, fmt.Sprintf("sink list: exit %d: %s%s", code, out, errs)
		}
		s = sinks[0]
		return s.Running && s.Returns > 0 && strings.Contains(s.LastError, "shop.orders"), fmt.Sprintf("sink list: %+v", s)
	})
	if s.Type != "rabbitmq" || s.Address != url || s.AppliedSeq != 0 || s.Rows != 0 || s.Pending != 0 {
		t.Errorf("sink list of a sink stopped by a return: %+v", s)
	}
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`braid_sink_returns_total\{dest="shop",sink="mq"\} [1-9]`).Match(body) ||
		!strings.Contains(string(body), `braid_sink_pending_confirms{dest="shop",sink="mq"} 0`) ||
		!strings.Contains(string(body), `braid_sink_up{dest="shop",sink="mq"} 0`) {
		t.Errorf("/metrics of a sink stopped by a return:\n%s", grepLines(string(body), `sink="mq"`))
	}
	if out, errs, code := cli("sink", "verify", "shop", "mq", "--server", api); code != 0 || !strings.Contains(out, "the last seq published and confirmed is 0") {
		t.Errorf("verify: exit %d: %s%s", code, out, errs)
	}
	if out, errs, code := cli("sink", "show", "shop", "mq", "--server", api); code != 0 || !strings.Contains(out, "retrying: ") || !strings.Contains(out, "messages confirmed:") || strings.Contains(out, `"password": "guest"`) {
		t.Errorf("show: exit %d: %s%s", code, out, errs)
	}
}

// grepLines returns the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
