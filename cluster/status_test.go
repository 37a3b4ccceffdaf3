package cluster_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/cluster/statuspage"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// TestStatusPage loads the status page of a node that does not own the
// destination in headless Chromium and checks what it shows against
// GET /v1/status on that node: the nodes and their states, the
// destination, its owner and its source, the lag chart, a consumer with the
// seq it acked, and "none" for sinks and DDL locks. The page's requests all
// go to the node that served it. The page itself needs no credential; its
// data does, and no answer makes the browser ask for a Basic credential it
// would then send to the node from any page. A browser with a credential
// set sends it on every request; one without logs in with the page's own
// form, and its polls carry the session cookie, until it logs out.
func TestStatusPage(t *testing.T) {
	browser := chromium(t)
	src := startSource(t)
	c := clustertest.Start(t, 3)
	c.Create(destSpec("shop", src))
	owner, _ := c.Owner("shop")
	insert(t, src, span(1, 5)...)
	cs := consume(t, c.URLs(), "shop", "app")
	cs.waitRows(t, span(1, 5)...)
	cs.mu.Lock()
	acked := cs.seqs[5]
	cs.mu.Unlock()
	var viewer *clustertest.Node
	for _, n := range c.Nodes() {
		if n != owner {
			viewer = n
			break
		}
	}

	for path, want := range map[string]int{"/": http.StatusOK, "/ui/status.js": http.StatusOK, "/v1/status": http.StatusUnauthorized} {
		resp, err := http.Get(viewer.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != want || strings.HasPrefix(strings.ToLower(got), "basic") {
			t.Fatalf("GET %s without a credential: %d, WWW-Authenticate %q; want %d and no Basic challenge, which a browser would keep the answer to", path, resp.StatusCode, got, want)
		}
	}

	// What the API says, once the consumer's last ack reached the owner.
	var api wire.Status
	c.WaitFor("the consumer's ack to show in GET /v1/status", func() (bool, string) {
		api = getStatus(t, viewer.URL())
		for _, d := range api.Destinations {
			if d.State == nil {
				return false, fmt.Sprintf("%s: %s", d.Name, d.StateError)
			}
			for _, cl := range d.State.Clients {
				if cl.ID == "app" && cl.AckedSeq == acked {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("no client app at acked seq %d in %+v", acked, api.Destinations)
	})
	want := pageFromAPI(api)
	if len(want.Dests) != 1 || want.Dests[0].Owner != owner.Name || !slices.Equal(want.Dests[0].Sources, []string{"a"}) {
		t.Fatalf("GET /v1/status on %s: %+v; want shop owned by %s with source a", viewer.Name, want, owner.Name)
	}

	admin := clustertest.AdminUser + ":" + clustertest.AdminPassword
	for _, tc := range []struct {
		name   string
		header bool // the credential as a header; else the user logs in with the page's form
	}{{"credential in a header", true}, {"user logs in with the form", false}} {
		t.Run(tc.name, func(t *testing.T) {
			tab := newTab(t, browser)
			var (
				mu      sync.Mutex
				urls    []string
				prompts int
				errs    []string       // the page's script errors and the browser's error log (CSP refusals too)
				answers sync.WaitGroup // the replies to paused requests, sent off the event loop
			)
			t.Cleanup(answers.Wait)
			user, pass, _ := strings.Cut(admin, ":")
			err := chromedp.Listen(tab, func(ev any) {
				switch e := ev.(type) {
				case *network.EventRequestWillBeSent:
					mu.Lock()
					urls = append(urls, e.Request.URL)
					mu.Unlock()
				case *runtime.EventExceptionThrown:
					d := e.ExceptionDetails
					text := d.Text
					if d.Exception != nil && d.Exception.Description != "" {
						text = d.Exception.Description
					}
					mu.Lock()
					errs = append(errs, fmt.Sprintf("an exception at %s:%d:%d: %s", d.URL, d.LineNumber+1, d.ColumnNumber+1, text))
					mu.Unlock()
				case *log.EventEntryAdded:
					// A 401 is how the page learns it must log in.
					if e.Entry.Level == log.EntryLevelError && !(e.Entry.Source == log.EntrySourceNetwork && strings.Contains(e.Entry.Text, "status of 401")) {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("%s: %s (%s)", e.Entry.Source, e.Entry.Text, e.Entry.URL))
						mu.Unlock()
					}
				case *fetch.EventRequestPaused:
					answers.Go(func() { chromedp.Call(tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID}) })
				case *fetch.EventAuthRequired:
					mu.Lock()
					prompts++
					mu.Unlock()
					answers.Go(func() {
						chromedp.Call(tab, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: e.RequestID,
							AuthChallengeResponse: &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: user, Password: pass}})
					})
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); err != nil {
				t.Fatal(err)
			}
			if _, err := chromedp.Call(tab, runtime.Enable, cdp.Empty{}); err != nil {
				t.Fatal(err)
			}
			if tc.header {
				_, err = chromedp.Call(tab, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{
					"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(admin))}})
			} else {
				handle := true
				_, err = chromedp.Call(tab, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handle})
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := chromedp.Do(tab, chromedp.Navigate(viewer.URL()+"/")); err != nil {
				t.Fatalf("loading %s/: %v", viewer.URL(), err)
			}
			if !tc.header {
				logIn(t, c, tab, user, pass)
			}
			var got shown
			read := func() error {
				ctx, cancel := context.WithTimeout(tab, 5*time.Second)
				defer cancel()
				var err error
				got, err = chromedp.Run(ctx, chromedp.Evaluate[shown](readPage))
				return err
			}
			c.WaitFor("the page to show what GET /v1/status says", func() (bool, string) {
				if err := read(); err != nil {
					return false, err.Error()
				}
				// What the API says now: under load Raft may elect
				// another leader while the page loads, and the page
				// shows the cluster as it is, not as it was.
				want := pageFromAPI(getStatus(t, viewer.URL()))
				if why := got.differs(want); why != "" {
					return false, why
				}
				return true, ""
			})
			polls := got.Updated
			c.WaitFor("the page to poll again", func() (bool, string) {
				if err := read(); err != nil {
					return false, err.Error()
				}
				return got.Updated != polls && got.Error == "", fmt.Sprintf("updated %s, error %q", got.Updated, got.Error)
			})
			if !strings.Contains(got.Summary, "node "+viewer.Name) {
				t.Errorf("summary %q does not name the node that served the page, %s", got.Summary, viewer.Name)
			}
			mu.Lock()
			for _, u := range urls {
				if !strings.HasPrefix(u, viewer.URL()+"/") && !strings.HasPrefix(u, "data:") {
					t.Errorf("the page asked %s; it may ask only the node that served it, %s", u, viewer.URL())
				}
			}
			for _, e := range errs {
				t.Errorf("the browser reported %s", e)
			}
			if prompts != 0 {
				t.Errorf("the browser was asked for a Basic credential %d times; want never: the page logs in with its form", prompts)
			}
			mu.Unlock()
			if tc.header {
				return
			}
			cookie := sessionCookie(t, tab, viewer.URL())
			if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#logout"))); err != nil {
				t.Fatal(err)
			}
			c.WaitFor("the page to show its login form after the log-out", func() (bool, string) {
				ctx, cancel := context.WithTimeout(tab, 5*time.Second)
				defer cancel()
				hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('login').hidden`))
				return err == nil && !hidden, fmt.Sprintf("login form hidden %v (%v)", hidden, err)
			})
			req, _ := http.NewRequest(http.MethodGet, viewer.URL()+"/v1/status", nil)
			req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET /v1/status with the session cookie after the log-out: %d, want 401", resp.StatusCode)
			}
		})
	}
}

// TestStatusPageSnapshot loads the page from a server that answers GET
// /v1/status with a status made up here, and checks each source's
// initial-snapshot cell: its progress while it runs (the rate and the
// time left once known), "done" after, and no column at all for a
// destination whose spec has none. No cluster: the page draws whatever
// the status says.
func TestStatusPageSnapshot(t *testing.T) {
	browser := chromium(t)
	state := func(sources ...wire.SourceState) *wire.State {
		return &wire.State{Seq: 3, Sources: sources, Clients: []wire.ClientState{}}
	}
	st := wire.Status{Time: time.Now(), LagEveryMs: 5000, LagWindowMs: 600000,
		Cluster: wire.ClusterStatus{Node: "n1", Leader: "n1", Nodes: []wire.NodeStatus{{Name: "n1", State: wire.NodeAlive, Raft: wire.RaftLeader}}},
		Destinations: []wire.DestinationStatus{
			{Name: "shop", Owner: "n1", State: state(
				wire.SourceState{Name: "a", Snapshot: &wire.SnapshotState{Tables: 6, TablesDone: 3, Rows: 120000, EstimatedRows: 660000, RowsPerSecond: 45000.4, EtaSeconds: 12}},
				wire.SourceState{Name: "b", Snapshot: &wire.SnapshotState{Tables: 1, Rows: 0}},
				wire.SourceState{Name: "c", Snapshot: &wire.SnapshotState{Tables: 2, TablesDone: 2, Rows: 500, Done: true}})},
			{Name: "plain", Owner: "n1", State: state(wire.SourceState{Name: "a"})},
		}}
	tab := newTab(t, browser)
	got := showStatus(t, tab, st)
	want := map[string][]string{
		"shop":  {"3/6 tables, 120,000 rows, 45,000 rows/s, eta 12 s", "0/1 tables, 0 rows", "done"},
		"plain": {""},
	}
	for _, d := range got.Dests {
		if !slices.Equal(d.Snapshots, want[d.Name]) {
			t.Errorf("destination %s: snapshot cells %q, want %q", d.Name, d.Snapshots, want[d.Name])
		}
	}
	headers := sourceHeaders(t, tab)
	if len(headers) < 2 || !strings.Contains(headers[0], "initial snapshot") || strings.Contains(strings.Join(headers[1:], ""), "snapshot") {
		t.Errorf("the sources' headers %q: want an initial snapshot column for shop only", headers)
	}
}

// showStatus loads the page in tab from a server that answers GET
// /v1/status with st, and returns what the page shows once it drew
// st's destinations.
func showStatus(t *testing.T, tab context.Context, st wire.Status) shown {
	t.Helper()
	body, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	index, err := fs.ReadFile(statuspage.Assets, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { w.Write(index) })
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(statuspage.Assets)))
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	web := httptest.NewServer(mux)
	t.Cleanup(web.Close)
	if err := chromedp.Do(tab, chromedp.Navigate(web.URL+"/")); err != nil {
		t.Fatalf("loading %s/: %v", web.URL, err)
	}
	var got shown
	retry.Until(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		got, err = chromedp.Run(ctx, chromedp.Evaluate[shown](readPage))
		if err == nil && len(got.Dests) == len(st.Destinations) && got.Error == "" {
			return nil
		}
		return fmt.Errorf("the page did not show the %d destinations: %+v, %v", len(st.Destinations), got, err)
	})
	return got
}

// sourceHeaders are the header rows of each destination's sources
// table, in page order.
func sourceHeaders(t *testing.T, tab context.Context) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	headers, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('section[data-dest] table[data-section=sources]')].map(t => t.tHead.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	return headers
}

// TestStatusPageLost loads the page from a server that answers GET
// /v1/status with a status made up here: a source waiting for an accept
// of lost transactions shows a notice naming them and the exact command
// to run, and is marked in the sources table; the losses accepted are
// listed per source with what was lost, from where, when and the LOST
// marker's seq (a dash where the API has none). A destination with no
// loss shows neither, nor the column.
func TestStatusPageLost(t *testing.T) {
	browser := chromium(t)
	accepted := time.Date(2026, 12, 7, 1, 2, 3, 456000000, time.UTC)
	state := func(sources ...wire.SourceState) *wire.State {
		return &wire.State{Seq: 50, Sources: sources, Clients: []wire.ClientState{}}
	}
	st := wire.Status{Time: time.Now(), LagEveryMs: 5000, LagWindowMs: 600000,
		Cluster: wire.ClusterStatus{Node: "n1", Leader: "n1", Nodes: []wire.NodeStatus{{Name: "n1", State: wire.NodeAlive, Raft: wire.RaftLeader}}},
		Destinations: []wire.DestinationStatus{
			{Name: "shop", Owner: "n1", State: state(
				wire.SourceState{Name: "a", Server: "server_id 102 (db3:3306)", Lost: "domain 0 seq 12 to 0-100-13 (the server is at 0-100-11)",
					Accepted: []wire.AcceptedLoss{{Lost: "domain 0 seq 5 to 0-100-6 (the server is at 0-100-4)", From: "0-100-6", Server: "server_id 101 (db2:3306)",
						AcceptedAt: &accepted, MarkerSeq: 41}}},
				wire.SourceState{Name: "b", Accepted: []wire.AcceptedLoss{{Lost: "domain 1 seq 7 to 1-200-7 (the server is at 1-200-6)", From: "1-200-7"}}},
				wire.SourceState{Name: "c"})},
			{Name: "plain", Owner: "n1", State: state(wire.SourceState{Name: "a"})},
		}}
	tab := newTab(t, browser)
	got := showStatus(t, tab, st)
	want := pageFromAPI(st)
	if w := want.Dests[0]; len(w.Awaiting) != 1 || w.Awaiting[0].Command != "braid destination accept-lost shop a" || len(w.Losses) != 2 ||
		w.Losses[0].MarkerSeq != "41" || w.Losses[1].MarkerSeq != "—" || w.Losses[1].AcceptedAt != "" {
		t.Fatalf("what the page should show of shop: %+v", w) // the expectation itself, lest it say nothing
	}
	for i, w := range want.Dests {
		g := got.Dests[i]
		if g.Name != w.Name || !slices.Equal(g.Awaiting, w.Awaiting) || !slices.Equal(g.Losses, w.Losses) {
			t.Errorf("destination %s: waiting %+v, losses %+v; want waiting %+v, losses %+v", g.Name, g.Awaiting, g.Losses, w.Awaiting, w.Losses)
		}
	}
	ctx, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('section[data-dest=shop] [data-section=sources] tr[data-source]')].map(r => r.querySelector('[data-field=lost]').textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cells, []string{"waiting for an accept", "1 loss accepted", ""}) {
		t.Errorf("shop's lost transactions cells %q", cells)
	}
	headers := sourceHeaders(t, tab)
	if len(headers) != 2 || !strings.Contains(headers[0], "lost transactions") || strings.Contains(headers[1], "lost") {
		t.Errorf("the sources' headers %q: want a lost transactions column for shop only", headers)
	}
}

// chromium finds a Chromium to drive; without one the test skips, or
// fails under CI=true (.ci/run installs Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test drives Chromium")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH: install Debian's (apt-get install chromium) to test the status page"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// newTab starts a headless browser for the test (with the given flags
// beyond the harness's) and opens a tab in a browser context of its own
// (its own cookies and auth cache); both close when the test ends.
func newTab(t *testing.T, path string, flags ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-gpu", true))
	opts = append(opts, flags...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	var logMu sync.Mutex
	done := false
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if !done {
			t.Logf("chromedp: "+format, args...)
		}
	}
	browser, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithErrorf(logf))
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		logMu.Lock()
		done = true
		logMu.Unlock()
	})
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	tab, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("opening a tab in %s: %v", path, err)
	}
	return tab
}

// getStatus asks GET /v1/status of the node at url, as an admin.
func getStatus(t *testing.T, url string) wire.Status {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/v1/status", nil)
	req.SetBasicAuth(clustertest.AdminUser, clustertest.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st wire.Status
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/status: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /v1/status: %v", err)
	}
	return st
}

// readPage reads what the page shows, by the data- attributes that name
// each thing (package cluster/statuspage's invariants).
const readPage = `(() => {
  const text = (root, sel) => { const e = root.querySelector(sel); return e ? e.textContent : ''; };
  const table = (root, section, shown) => { const e = root.querySelector('[data-section=' + section + ']'); return !e ? '' : e.tagName === 'TABLE' ? shown : e.textContent; };
  const err = document.getElementById('error');
  return {
    updated: document.body.dataset.updated || '',
    error: err.hidden ? '' : err.textContent,
    summary: text(document, '#summary'),
    nodes: [...document.querySelectorAll('#nodes tr[data-node]')].map(r => ({
      name: r.dataset.node, state: text(r, '[data-field=state]'), raft: text(r, '[data-field=raft]')})),
    dests: [...document.querySelectorAll('section[data-dest]')].map(d => ({
      name: d.dataset.dest,
      owner: d.querySelector('[data-field=meta]').dataset.owner || '',
      sources: [...d.querySelectorAll('[data-section=sources] tr[data-source]')].map(r => r.dataset.source),
      snapshots: [...d.querySelectorAll('[data-section=sources] tr[data-source]')].map(r => text(r, '[data-field=snapshot]')),
      awaiting: [...d.querySelectorAll('[data-field=awaitAccept]')].map(e => ({source: e.dataset.source, lost: text(e, '[data-field=lost]'), command: text(e, '[data-field=command]')})),
      losses: [...d.querySelectorAll('[data-section=losses] tr[data-source]')].map(r => ({source: r.dataset.source, lost: text(r, '[data-field=lost]'),
        from: text(r, '[data-field=from]'), acceptedAt: r.querySelector('[data-field=acceptedAt]').dataset.value, markerSeq: text(r, '[data-field=markerSeq]')})),
      clients: [...d.querySelectorAll('tr[data-client]')].map(r => ({id: r.dataset.client, ackedSeq: text(r, '[data-field=ackedSeq]')})),
      charted: [...d.querySelectorAll('svg.chart g[data-series]')].filter(g => g.querySelector('polyline, circle')).map(g => g.dataset.series),
      sinks: table(d, 'sinks', '(sinks)'),
      sinkNames: [...d.querySelectorAll('[data-section=sinks] tr[data-item]')].map(r => r.dataset.item),
      ddlLocks: table(d, 'ddlLocks', '(locks)'),
      lockIDs: [...d.querySelectorAll('[data-section=ddlLocks] tr[data-item]')].map(r => r.dataset.item),
    })),
  };
})()`

// shown is what readPage returns.
type shown struct {
	Updated string `json:"updated"`
	Error   string `json:"error"`
	Summary string `json:"summary"`
	Nodes   []struct {
		Name, State, Raft string
	} `json:"nodes"`
	Dests []shownDest `json:"dests"`
}

type shownDest struct {
	Name    string   `json:"name"`
	Owner   string   `json:"owner"`
	Sources []string `json:"sources"`
	// Snapshots are the sources' snapshot cells ("" without one).
	Snapshots []string `json:"snapshots"`
	// Awaiting are the notices of sources waiting for an accept of lost
	// transactions, Losses the rows of the losses accepted.
	Awaiting []shownAwait `json:"awaiting"`
	Losses   []shownLoss  `json:"losses"`
	Clients  []struct {
		ID       string `json:"id"`
		AckedSeq string `json:"ackedSeq"`
	} `json:"clients"`
	Charted []string `json:"charted"`
	// Sinks and DDLLocks are "none" or, when the page shows a table,
	// "(sinks)" and "(locks)", with the rows' names in SinkNames and
	// LockIDs.
	Sinks     string   `json:"sinks"`
	SinkNames []string `json:"sinkNames"`
	DDLLocks  string   `json:"ddlLocks"`
	LockIDs   []string `json:"lockIDs"`
}

// shownAwait is a source's notice that it waits for an accept: the
// transactions it names and the command it gives.
type shownAwait struct {
	Source  string `json:"source"`
	Lost    string `json:"lost"`
	Command string `json:"command"`
}

// shownLoss is a row of the accepted losses; AcceptedAt is the time as
// the API gave it ("" when it gave none), MarkerSeq the cell's text.
type shownLoss struct {
	Source     string `json:"source"`
	Lost       string `json:"lost"`
	From       string `json:"from"`
	AcceptedAt string `json:"acceptedAt"`
	MarkerSeq  string `json:"markerSeq"`
}

// lossesShown is what the page should show of a destination's losses.
func lossesShown(dest string, sources []wire.SourceState) (awaiting []shownAwait, losses []shownLoss) {
	for _, s := range sources {
		if s.Lost != "" {
			awaiting = append(awaiting, shownAwait{s.Name, s.Lost, "braid destination accept-lost " + dest + " " + s.Name})
		}
		for _, a := range s.Accepted {
			l := shownLoss{Source: s.Name, Lost: a.Lost, From: a.From, MarkerSeq: "—"}
			if a.AcceptedAt != nil {
				l.AcceptedAt = a.AcceptedAt.Format(time.RFC3339Nano)
			}
			if a.MarkerSeq != 0 {
				l.MarkerSeq = strconv.FormatUint(a.MarkerSeq, 10)
			}
			losses = append(losses, l)
		}
	}
	return awaiting, losses
}

// pageFromAPI is what the page should show of st.
func pageFromAPI(st wire.Status) shown {
	var want shown
	for _, n := range st.Cluster.Nodes {
		want.Nodes = append(want.Nodes, struct{ Name, State, Raft string }{n.Name, n.State, n.Raft})
	}
	for _, d := range st.Destinations {
		sd := shownDest{Name: d.Name, Owner: d.Owner, Sinks: "none", DDLLocks: "none"}
		if len(d.Sinks) > 0 {
			sd.Sinks = "(sinks)"
			for _, sk := range d.Sinks {
				sd.SinkNames = append(sd.SinkNames, sk.Name)
			}
		}
		if d.DDL != nil && len(d.DDL.Locks) > 0 {
			sd.DDLLocks = "(locks)"
			for _, l := range d.DDL.Locks {
				sd.LockIDs = append(sd.LockIDs, strconv.Itoa(l.ID))
			}
		}
		if d.State != nil {
			for _, s := range d.State.Sources {
				sd.Sources = append(sd.Sources, s.Name)
				sd.Snapshots = append(sd.Snapshots, snapshotShown(s.Snapshot))
				sd.Charted = append(sd.Charted, s.Name)
			}
			sd.Awaiting, sd.Losses = lossesShown(d.Name, d.State.Sources)
			for _, c := range d.State.Clients {
				sd.Clients = append(sd.Clients, struct {
					ID       string `json:"id"`
					AckedSeq string `json:"ackedSeq"`
				}{c.ID, strconv.FormatUint(c.AckedSeq, 10)})
			}
		}
		want.Dests = append(want.Dests, sd)
	}
	return want
}

// differs says how the page differs from want ("" when it does not):
// every source has a line or dot in its chart once a sample came.
func (got shown) differs(want shown) string {
	if got.Error != "" {
		return "the page shows an error: " + got.Error
	}
	if len(got.Nodes) != len(want.Nodes) {
		return fmt.Sprintf("nodes %+v, want %+v", got.Nodes, want.Nodes)
	}
	for i, n := range want.Nodes {
		g := got.Nodes[i]
		if g.Name != n.Name || g.State != n.State || (n.Raft != "" && g.Raft != n.Raft) {
			return fmt.Sprintf("nodes %+v, want %+v", got.Nodes, want.Nodes)
		}
	}
	if len(got.Dests) != len(want.Dests) {
		return fmt.Sprintf("destinations %+v, want %+v", got.Dests, want.Dests)
	}
	for i, w := range want.Dests {
		g := got.Dests[i]
		if g.Name != w.Name || g.Owner != w.Owner || !slices.Equal(g.Sources, w.Sources) || !slices.Equal(g.Snapshots, w.Snapshots) || !slices.Equal(g.Charted, w.Charted) ||
			g.Sinks != w.Sinks || g.DDLLocks != w.DDLLocks || !slices.Equal(g.SinkNames, w.SinkNames) || !slices.Equal(g.LockIDs, w.LockIDs) ||
			fmt.Sprint(g.Clients) != fmt.Sprint(w.Clients) || !slices.Equal(g.Awaiting, w.Awaiting) || !slices.Equal(g.Losses, w.Losses) {
			return fmt.Sprintf("destination %+v, want %+v", g, w)
		}
	}
	return ""
}

// snapshotShown is what the page shows of a source's snapshot, for one
// that has none or is done: a running one's numbers change from one poll
// to the next, so no answer of the API predicts the page's, and
// TestStatusPageSnapshot checks its cell with a status of its own.
func snapshotShown(sn *wire.SnapshotState) string {
	switch {
	case sn == nil:
		return ""
	case sn.Done:
		return "done"
	}
	return "(a running snapshot)"
}
