package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/braid-cdc/braid/api/metrics"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// families is one scrape, parsed.
type families map[string]*dto.MetricFamily

// scrape GETs url's exposition (the text format) and parses it.
func scrape(t *testing.T, url string) families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: the exposition does not parse: %v", url, err)
	}
	return fams
}

// value is the value of family name's metric with exactly these labels
// ("k=v" pairs); ok is false when there is none.
func (f families) value(name string, labels ...string) (v float64, ok bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			if !containsString(labels, l.GetName()+"="+l.GetValue()) {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// must is value for a metric that has to be there.
func (f families) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := f.value(name, labels...)
	if !ok {
		t.Fatalf("no %s{%s} in the scrape", name, strings.Join(labels, ","))
	}
	return v
}

// waitScrape scrapes url until cond holds on a scrape and returns that
// scrape, failing after timeout with what cond last said.
func waitScrape(t *testing.T, url string, timeout time.Duration, what string, cond func(families) (bool, string)) families {
	t.Helper()
	var f families
	retry.Until(t, timeout, func() error {
		f = scrape(t, url)
		if ok, why := cond(f); !ok {
			return fmt.Errorf("%s: %s", what, why)
		}
		return nil
	})
	return f
}

// stall stops srv's process with SIGSTOP (found through its pid file)
// and returns the function that continues it; the test's cleanup
// continues it too, before the server is shut down.
func stall(t *testing.T, srv *mysqltest.Server) (resume func()) {
	t.Helper()
	rows := srv.Query(t, "SELECT @@pid_file")
	path := rows[0][0]
	if !filepath.IsAbs(path) {
		path = filepath.Join(srv.DataDir, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// consume reads and acks everything the store hands client, as a
// consumer that keeps up would, until the test ends.
func consume(t *testing.T, store *stream.Store, client string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			b, err := store.Get(ctx, client, 256, 100*time.Millisecond)
			if err != nil {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, stream.ErrClosed) {
					t.Errorf("consumer %s: %v", client, err)
				}
				return
			}
			if len(b.Events) > 0 {
				if err := store.Ack(client, b.ID); err != nil {
					t.Errorf("consumer %s: ack: %v", client, err)
					return
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestScrapeSourceLag runs a destination of two shards with a consumer
// that keeps up and one that never reads, and scrapes /metrics while one
// shard's server is stalled (SIGSTOP), then continued: the stalled
// shard's lag rises, scrape after scrape, while it is stalled, and falls
// back to 0 (idle) after; the other shard stays idle with lag 0 all
// along; consumer lag is 0 for the one that keeps up and the whole
// stream for the other.
func TestScrapeSourceLag(t *testing.T) {
	srvs := mysqltest.StartN(t, 2)
	for _, s := range srvs {
		s.Exec(t, "CREATE DATABASE app", "CREATE TABLE app.orders (id INT PRIMARY KEY)")
	}
	ds := spec.Spec{Name: "shop", Tables: []string{`app\.orders`}, Heartbeat: spec.Duration(100 * time.Millisecond)}
	for i, s := range srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: &ds,
		Clients: map[string]*group.Cursor{"app": nil, "idle": nil}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	reg := stream.NewRegistry()
	reg.Add(p.Served(nil))
	web := httptest.NewServer(metrics.RegistryHandler(reg))
	t.Cleanup(web.Close)
	url := web.URL + "/metrics"
	consume(t, p.Store, "app")

	for i, s := range srvs {
		for k := range 5 {
			s.Exec(t, fmt.Sprintf("INSERT INTO app.orders VALUES (%d)", 10*i+k))
		}
	}
	dest := "dest=shop"
	idle := func(f families, src string) (bool, string) {
		l := []string{dest, "source=" + src}
		lag, _ := f.value("braid_source_lag_seconds", l...)
		idle, _ := f.value("braid_source_idle", l...)
		conn, _ := f.value("braid_source_connected", l...)
		return idle == 1 && lag == 0 && conn == 1, fmt.Sprintf("source %s: idle %v, lag %vs, connected %v", src, idle, lag, conn)
	}
	f := waitScrape(t, url, 30*time.Second, "both shards read, idle, and the consumer caught up", func(f families) (bool, string) {
		for _, src := range []string{"s0", "s1"} {
			if ok, why := idle(f, src); !ok {
				return false, why
			}
		}
		head, _ := f.value("braid_destination_head_seq", dest)
		acked, _ := f.value("braid_consumer_acked_seq", dest, "client=app")
		return head >= 10 && acked == head, fmt.Sprintf("head %v, app acked %v", head, acked)
	})
	head := f.must(t, "braid_destination_head_seq", dest)
	if got := f.must(t, "braid_consumer_lag_seq", dest, "client=app"); got != 0 {
		t.Errorf("app: lag_seq %v, want 0", got)
	}
	if got := f.must(t, "braid_consumer_lag_seconds", dest, "client=app"); got != 0 {
		t.Errorf("app: lag_seconds %v, want 0 (it acked the head)", got)
	}
	if got := f.must(t, "braid_consumer_lag_seq", dest, "client=idle"); got != head {
		t.Errorf("idle: lag_seq %v, want the head %v", got, head)
	}
	if _, ok := f.value("braid_consumer_lag_seconds", dest, "client=idle"); ok {
		t.Errorf("idle: lag_seconds shown before its first ack")
	}
	for _, src := range []string{"s0", "s1"} {
		l := []string{dest, "source=" + src}
		if got := f.must(t, "braid_source_rows_total", l...); got != 5 {
			t.Errorf("source %s: rows_total %v, want 5", src, got)
		}
		if f.must(t, "braid_source_events_total", l...) == 0 || f.must(t, "braid_source_bytes_total", l...) == 0 {
			t.Errorf("source %s: no events or bytes counted", src)
		}
	}
	for _, name := range []string{"braid_destination_late_transactions_total", "braid_destination_undercut_transactions_total"} {
		if got := f.must(t, name, dest); got != 0 {
			t.Errorf("%s %v with the shards' clocks right, want 0", name, got)
		}
	}

	// Stall s1. Its lag rises from one scrape to the next; s0 stays idle.
	resume := stall(t, srvs[1])
	l1 := []string{dest, "source=s1"}
	var lags []float64
	for range 4 {
		time.Sleep(time.Second)
		f := scrape(t, url)
		lags = append(lags, f.must(t, "braid_source_lag_seconds", l1...))
		if got := f.must(t, "braid_source_idle", l1...); got != 0 {
			t.Errorf("stalled s1 shown idle")
		}
		if ok, why := idle(f, "s0"); !ok {
			t.Errorf("s0 while s1 is stalled: %s", why)
		}
	}
	t.Logf("s1's lag, a scrape a second while it is stalled: %v", lags)
	for i := 1; i < len(lags); i++ {
		if lags[i] <= lags[i-1] {
			t.Errorf("s1's lag did not rise while it was stalled: %v", lags)
			break
		}
	}
	if lags[len(lags)-1] < 3 {
		t.Errorf("s1's lag after 4 s stalled is %vs, want 3 s or more: %v", lags[len(lags)-1], lags)
	}
	// A transaction on s0 waits for s1 in strict order.
	srvs[0].Exec(t, "INSERT INTO app.orders VALUES (100)")
	waitScrape(t, url, 10*time.Second, "strict order waits for s1", func(f families) (bool, string) {
		w, _ := f.value("braid_destination_waiting_sources", dest)
		ws, _ := f.value("braid_source_waiting", l1...)
		return w == 1 && ws == 1, fmt.Sprintf("waiting_sources %v, s1 waiting %v", w, ws)
	})

	// Continued, s1 is idle again (lag 0), and the consumer catches up.
	resume()
	f = waitScrape(t, url, 30*time.Second, "s1 idle again and the consumer caught up", func(f families) (bool, string) {
		if ok, why := idle(f, "s1"); !ok {
			return false, why
		}
		now, _ := f.value("braid_destination_head_seq", dest)
		acked, _ := f.value("braid_consumer_acked_seq", dest, "client=app")
		return now == head+1 && acked == now, fmt.Sprintf("head %v (want %v), app acked %v", now, head+1, acked)
	})
	if got := f.must(t, "braid_consumer_lag_seq", dest, "client=idle"); got != head+1 {
		t.Errorf("idle: lag_seq %v, want %v", got, head+1)
	}
}
