package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/rabbittest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

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
	port := nodes.FreePorts(t, 1)[0]
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
