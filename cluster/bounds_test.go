package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/spec"
)

// callAs makes one request as user and returns its status and body.
func callAs(t *testing.T, hc *http.Client, method, url, user, pw string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.SetBasicAuth(user, pw)
	req.Header.Set("X-Braid-Request", "1") // what a form cannot send
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && resp.StatusCode != http.StatusOK {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestClientIDsBoundedPerUser: one consumer making 20,000 client ids (the
// probe's attack) gets consumers.max_client_ids of them; the rest are
// answered 429 naming the cap, and /v1/status, /metrics and the cursors
// in Raft hold only the ones accepted.
func TestClientIDsBoundedPerUser(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 1, clustertest.WithConfig(func(cfg *cluster.Config) { cfg.CursorInterval = 100 * time.Millisecond }))
	c.Create(destSpec("shop", src))
	owner, _ := c.Owner("shop")
	insert(t, src, 1, 2, 3)

	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var ok, refused atomic.Int64
	var firstRefusal, accepted atomic.Value
	const ids, workers = 20000, 4
	began := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < ids; i += workers {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/destinations/shop/stream?client-id=probe-%d", owner.URL(), i), nil)
				req.SetBasicAuth(clustertest.ConsumerUser, clustertest.ConsumerPassword)
				resp, err := hc.Do(req)
				if err != nil {
					cancel()
					t.Error(err)
					return
				}
				switch resp.StatusCode {
				case http.StatusOK:
					ok.Add(1)
					accepted.CompareAndSwap(nil, fmt.Sprintf("probe-%d", i))
				case http.StatusTooManyRequests:
					if refused.Add(1) == 1 {
						b, _ := io.ReadAll(resp.Body)
						firstRefusal.Store(string(b))
					}
				default:
					t.Errorf("client id probe-%d: status %d", i, resp.StatusCode)
				}
				cancel()
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	t.Logf("%d client ids tried in %v: %d accepted, %d refused", ids, time.Since(began).Round(time.Millisecond), ok.Load(), refused.Load())
	if ok.Load() != spec.DefaultMaxClientIDs || refused.Load() != ids-spec.DefaultMaxClientIDs {
		t.Fatalf("%d accepted, %d refused: want %d accepted", ok.Load(), refused.Load(), spec.DefaultMaxClientIDs)
	}
	if msg, _ := firstRefusal.Load().(string); !strings.Contains(msg, "consumers.max_client_ids") || !strings.Contains(msg, "braid consumer drop") {
		t.Errorf("the refusal %q names neither the cap nor braid consumer drop", msg)
	}

	st, body := callAs(t, hc, "GET", owner.URL()+"/v1/status", clustertest.AdminUser, clustertest.AdminPassword)
	var status wire.Status
	if st != 200 || json.Unmarshal(body, &status) != nil || len(status.Destinations) != 1 {
		t.Fatalf("status: %d %.300s", st, body)
	}
	if n := len(status.Destinations[0].State.Clients); n != spec.DefaultMaxClientIDs || len(body) > 256<<10 {
		t.Errorf("/v1/status shows %d clients in %d bytes: want %d in a few dozen KiB", n, len(body), spec.DefaultMaxClientIDs)
	}
	st, body = callAs(t, hc, "GET", owner.URL()+"/metrics", clustertest.AdminUser, clustertest.AdminPassword)
	clients := map[string]bool{}
	for _, m := range regexp.MustCompile(`client="([^"]*)"`).FindAllStringSubmatch(string(body), -1) {
		clients[m[1]] = true
	}
	if st != 200 || len(clients) != spec.DefaultMaxClientIDs {
		t.Errorf("/metrics: %d, series of %d client ids in %d bytes: want %d", st, len(clients), len(body), spec.DefaultMaxClientIDs)
	}
	time.Sleep(500 * time.Millisecond) // a few cursor writes
	cursors, err := owner.Raft().Cursors("shop")
	delete(cursors, group.StartCursorID) // the destination's, no client's
	if err != nil || len(cursors) > spec.DefaultMaxClientIDs {
		t.Errorf("Raft holds %d cursors of shop (%v): want at most %d", len(cursors), err, spec.DefaultMaxClientIDs)
	}
	// The admin drops one (which ids got in depends on the workers' pace);
	// the consumer may make one more.
	dropped, _ := accepted.Load().(string)
	if st, body := callAs(t, hc, "DELETE", owner.URL()+"/v1/destinations/shop/consumers/"+dropped, clustertest.AdminUser, clustertest.AdminPassword); st != 200 {
		t.Fatalf("drop: %d %s", st, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, owner.URL()+"/v1/destinations/shop/stream?client-id=fresh", nil)
	req.SetBasicAuth(clustertest.ConsumerUser, clustertest.ConsumerPassword)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Errorf("a new client id after one was dropped: %d", resp.StatusCode)
	}
	cancel()
	resp.Body.Close()
}

// TestConsumerCannotActAsSink: no user, consumer or admin, streams or
// acks as a sink's client id over HTTP (403, saying the prefix is
// reserved), so none can move the cursor a takeover resumes a sink
// from; nothing of the id reaches Raft.
func TestConsumerCannotActAsSink(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 1, clustertest.WithConfig(func(cfg *cluster.Config) { cfg.CursorInterval = 100 * time.Millisecond }))
	c.Create(destSpec("shop", src))
	owner, _ := c.Owner("shop")
	insert(t, src, 1)
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second} // a stream let through would never end
	defer hc.CloseIdleConnections()
	for _, u := range [][2]string{{clustertest.ConsumerUser, clustertest.ConsumerPassword}, {clustertest.AdminUser, clustertest.AdminPassword}} {
		for _, r := range []struct{ method, path string }{
			{"GET", "/v1/destinations/shop/stream?client-id=sink:copy"},
			{"POST", "/v1/destinations/shop/ack?client-id=sink:copy&seq=1"},
		} {
			st, body := callAs(t, hc, r.method, owner.URL()+r.path, u[0], u[1])
			if st != http.StatusForbidden || !strings.Contains(string(body), `prefix \"sink:\" is reserved`) {
				t.Errorf("%s: %s %s: %d %s, want 403 saying the prefix is reserved", u[0], r.method, r.path, st, body)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	cursors, _ := owner.Raft().Cursors("shop")
	if _, ok := cursors["sink:copy"]; ok {
		t.Error("Raft holds a cursor of sink:copy")
	}
}

// TestWrongPasswordsBounded: 300 wrong passwords for one user (the
// probe's finding: each a PBKDF2 of ~60 ms and a log line naming the
// user) cost auth.FailBurst PBKDF2s; the rest are answered 429 with a
// Retry-After, or 401 from the failure cache for a repeated password,
// and the log has a line or two, not 300. The consumer's good login,
// cached, goes on working.
func TestWrongPasswordsBounded(t *testing.T) {
	src := startSource(t)
	var (
		users *auth.Users
		logs  logline.Buffer
	)
	c := clustertest.Start(t, 1, clustertest.WithConfig(func(cfg *cluster.Config) {
		users = cfg.Users
		cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))
	c.Create(destSpec("shop", src))
	owner, _ := c.Owner("shop")
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	url := owner.URL() + "/v1/destinations/shop"
	if st, _ := callAs(t, hc, "GET", url, clustertest.ConsumerUser, clustertest.ConsumerPassword); st != 200 {
		t.Fatalf("the consumer's good login: %d", st)
	}
	before := users.Derivations()
	began := time.Now()
	codes := map[int]int{}
	for i := range 300 {
		pw := fmt.Sprint("guess-", i%150) // each wrong password twice
		req, _ := http.NewRequest("GET", url, nil)
		req.SetBasicAuth(clustertest.ConsumerUser, pw)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Error("a 429 without Retry-After")
		}
		resp.Body.Close()
	}
	// The bucket refills FailBurst per FailWindow: a slow machine that
	// takes a while over the 300 calls earns those refills honestly.
	allowed := auth.FailBurst + int(time.Since(began)*auth.FailBurst/auth.FailWindow)
	if n := users.Derivations() - before; n > int64(allowed) {
		t.Errorf("300 wrong passwords cost %d PBKDF2s, want at most %d (the burst and its refills)", n, allowed)
	}
	if codes[http.StatusTooManyRequests] < 250 || codes[http.StatusOK] > 0 {
		t.Errorf("answers %v: want mostly 429, no 200", codes)
	}
	if n := strings.Count(logs.String(), "bad credentials"); n == 0 || n > 2 {
		t.Errorf("%d log lines about bad credentials, want 1 or 2:\n%s", n, logs.String())
	}
	if st, _ := callAs(t, hc, "GET", url, clustertest.ConsumerUser, clustertest.ConsumerPassword); st != 200 {
		t.Errorf("the consumer's cached good login during the limit: %d", st)
	}
}
