package cluster_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// scrape is one /metrics answer of a node, parsed.
type scrape map[string]*dto.MetricFamily

// getMetrics scrapes node's /metrics as user (none: no credential) and
// returns the status and, for 200, the parsed families.
func getMetrics(t *testing.T, n *clustertest.Node, user, password string) (int, scrape) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.URL()+"/metrics", nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics on %s: %v", n.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics on %s: the exposition does not parse: %v", n.Name, err)
	}
	return resp.StatusCode, fams
}

// metrics scrapes as the consumer user, which must be let in.
func metrics(t *testing.T, n *clustertest.Node) scrape {
	t.Helper()
	status, s := getMetrics(t, n, clustertest.ConsumerUser, clustertest.ConsumerPassword)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics on %s as %s: %d", n.Name, clustertest.ConsumerUser, status)
	}
	return s
}

// value is family name's value for exactly these labels ("k=v").
func (s scrape) value(name string, labels ...string) (float64, bool) {
	fam := s[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if !strings.Contains(","+strings.Join(labels, ",")+",", ","+l.GetName()+"="+l.GetValue()+",") {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		default:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// must is value for a metric that has to be there.
func (s scrape) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.value(name, labels...)
	if !ok {
		t.Fatalf("no %s{%s} in the scrape", name, strings.Join(labels, ","))
	}
	return v
}

// waitMetrics scrapes n until cond holds.
func waitMetrics(t *testing.T, n *clustertest.Node, what string, cond func(scrape) (bool, string)) scrape {
	t.Helper()
	var s scrape
	retry.Until(t, 2*clustertest.Timeout, func() error {
		s = metrics(t, n)
		if ok, why := cond(s); !ok {
			return fmt.Errorf("%s: %s", what, why)
		}
		return nil
	})
	return s
}

// state GETs the destination's wire.State from its owner n.
func state(t *testing.T, n *clustertest.Node, dest string) wire.State {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.URL()+"/v1/destinations/"+dest, nil)
	req.SetBasicAuth(clustertest.ConsumerUser, clustertest.ConsumerPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st wire.State
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET state of %s on %s: %s", dest, n.Name, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitSeen waits until every id has arrived, and checks each came once.
// (consumer.waitRows also checks that ids come in seq order, which the
// rows of two shards need not.)
func waitSeen(t *testing.T, cs *consumer, ids ...int64) {
	t.Helper()
	retry.Until(t, clustertest.Timeout, func() error {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		var missing, twice []int64
		for _, id := range ids {
			switch cs.seen[id] {
			case 0:
				missing = append(missing, id)
			case 1:
			default:
				twice = append(twice, id)
			}
		}
		if len(twice) > 0 {
			t.Fatalf("rows %v delivered more than once", twice)
		}
		if len(missing) > 0 {
			return fmt.Errorf("rows %v never arrived", missing)
		}
		return nil
	})
}

// TestMetricsScrape scrapes the nodes of a cluster whose destination reads
// two shards: every node shows its Raft state (one leader) and raft's own
// raft_* metrics; the owner shows the sources idle with lag 0 and the
// consumer's lag 0; while one shard's server is stopped its lag rises
// scrape after scrape and it shows disconnected with an error counted,
// and once it is back its lag falls to 0 again. /metrics needs a user's
// credential, and shows a user only the destinations it may read.
func TestMetricsScrape(t *testing.T) {
	c := clustertest.Start(t, 3)
	a, b := startSource(t), startSource(t)
	c.Create(fmt.Sprintf(`
name: shop
sources:
  - {name: a, address: '%s', start: earliest}
  - {name: b, address: '%s', start: earliest}
tables: ['app\.orders']
heartbeat: 100ms
`, a.Addr(), b.Addr()))
	owner, epoch := c.Owner("shop")
	cs := consume(t, c.URLs(), "shop", "app")
	insert(t, a, 1, 2, 3)
	insert(t, b, 11, 12, 13)
	waitSeen(t, cs, 1, 2, 3, 11, 12, 13)

	dest := "dest=shop"
	srcIdle := func(s scrape, src string) (bool, string) {
		l := []string{dest, "source=" + src}
		idle, _ := s.value("braid_source_idle", l...)
		lag, _ := s.value("braid_source_lag_seconds", l...)
		conn, _ := s.value("braid_source_connected", l...)
		return idle == 1 && lag == 0 && conn == 1, fmt.Sprintf("source %s: idle %v lag %vs connected %v", src, idle, lag, conn)
	}
	s := waitMetrics(t, owner, "sources idle and the consumer caught up on the owner", func(s scrape) (bool, string) {
		for _, src := range []string{"a", "b"} {
			if ok, why := srcIdle(s, src); !ok {
				return false, why
			}
		}
		lag, ok := s.value("braid_consumer_lag_seq", dest, "client=app")
		return ok && lag == 0, fmt.Sprintf("consumer app lag_seq %v (shown: %v)", lag, ok)
	})
	if got := s.must(t, "braid_consumer_lag_seconds", dest, "client=app"); got != 0 {
		t.Errorf("consumer app: lag_seconds %v, want 0", got)
	}
	for _, src := range state(t, owner, "shop").Sources {
		if !src.Connected || !src.Idle || src.Behind || src.BehindMs != 0 || src.LastError != "" || src.ReadPos == "" || src.ServerPos != src.ReadPos {
			t.Errorf("state of idle source %s: %+v", src.Name, src)
		}
	}
	if got := s.must(t, "braid_node_destination_epoch", dest); got != float64(epoch) {
		t.Errorf("owner %s: epoch %v, want %d", owner.Name, got, epoch)
	}
	if got := s.must(t, "braid_node_destination_serving", dest); got != 1 {
		t.Errorf("owner %s: serving %v, want 1", owner.Name, got)
	}
	if got := s.must(t, "braid_node_lease_remaining_seconds", dest); got <= 0 {
		t.Errorf("owner %s: lease remaining %vs, want > 0", owner.Name, got)
	}

	// Every node: its Raft state, one leader among them; raft's own metrics.
	leaders := 0
	for _, n := range c.Nodes() {
		s := metrics(t, n)
		leaders += int(s.must(t, "braid_node_raft_state", "state=leader"))
		if s.must(t, "braid_node_raft_commit_index") == 0 || s.must(t, "braid_node_raft_leader_known") != 1 {
			t.Errorf("%s: no commit index or no leader known", n.Name)
		}
		if got := s.must(t, "braid_node_raft_servers"); got != 3 {
			t.Errorf("%s: %v raft servers, want 3", n.Name, got)
		}
		raft := 0
		for name := range s {
			if strings.HasPrefix(name, "raft_") {
				raft++
			}
		}
		if raft == 0 {
			t.Errorf("%s: no raft_* family: raft's own metrics are not bridged", n.Name)
		}
		if n != owner {
			if _, ok := s.value("braid_source_lag_seconds", dest, "source=a"); ok {
				t.Errorf("%s shows the sources of a destination it does not own", n.Name)
			}
		}
	}
	if leaders != 1 {
		t.Errorf("%d nodes say they are the Raft leader, want 1", leaders)
	}

	// Credentials: none is refused; a user sees only what it may read.
	if status, _ := getMetrics(t, owner, "", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a credential: %d, want 401", status)
	}
	_, narrow := getMetrics(t, owner, clustertest.NarrowUser, clustertest.NarrowPassword)
	if narrow == nil {
		t.Fatalf("GET /metrics as %s refused", clustertest.NarrowUser)
	}
	if _, ok := narrow.value("braid_destination_head_seq", dest); ok {
		t.Errorf("%s, who may read only %s, sees destination shop", clustertest.NarrowUser, clustertest.NarrowDestination)
	}
	if _, ok := narrow.value("braid_node_raft_state", "state=leader"); !ok {
		t.Errorf("%s does not see the node's families", clustertest.NarrowUser)
	}

	// Stop b: its lag rises scrape after scrape, it shows disconnected
	// with the error counted; a stays idle.
	b.Stop(t)
	lb := []string{dest, "source=b"}
	var lags []float64
	for range 4 {
		time.Sleep(time.Second)
		s := metrics(t, owner)
		lags = append(lags, s.must(t, "braid_source_lag_seconds", lb...))
		if ok, why := srcIdle(s, "a"); !ok {
			t.Errorf("while b is down: %s", why)
		}
	}
	t.Logf("b's lag, a scrape a second while it is down: %v", lags)
	for i := 1; i < len(lags); i++ {
		if lags[i] <= lags[i-1] {
			t.Errorf("b's lag did not rise while it was down: %v", lags)
			break
		}
	}
	s = waitMetrics(t, owner, "b shown disconnected", func(s scrape) (bool, string) {
		conn, _ := s.value("braid_source_connected", lb...)
		errs, _ := s.value("braid_source_errors_total", lb...)
		return conn == 0 && errs >= 1, fmt.Sprintf("b connected %v, errors %v", conn, errs)
	})
	if _, ok := s.value("braid_source_last_error_timestamp_seconds", lb...); !ok {
		t.Errorf("b down: no last error time")
	}
	down := s.must(t, "braid_source_lag_seconds", lb...)
	if src := state(t, owner, "shop").Sources[1]; src.Connected || src.Idle || src.BehindMs < 4000 || src.LastError == "" || src.LastErrorAt == nil {
		t.Errorf("state of source b while down: %+v", src)
	}

	// Back: b's lag falls to 0 and what was written meanwhile arrives.
	b.Restart(t)
	insert(t, b, 14)
	insert(t, a, 4)
	s = waitMetrics(t, owner, "b idle again after its restart", func(s scrape) (bool, string) { return srcIdle(s, "b") })
	t.Logf("b's lag: %vs while down, %vs once back", down, s.must(t, "braid_source_lag_seconds", lb...))
	waitSeen(t, cs, 1, 2, 3, 4, 11, 12, 13, 14)
	waitMetrics(t, owner, "the consumer caught up again", func(s scrape) (bool, string) {
		lag, _ := s.value("braid_consumer_lag_seq", dest, "client=app")
		acked, _ := s.value("braid_consumer_acked_seq", dest, "client=app")
		return lag == 0 && acked > 0, fmt.Sprintf("consumer app: lag_seq %v, acked %v", lag, acked)
	})
}
