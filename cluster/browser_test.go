package cluster_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/redistest"
)

// TestStatusPageRefusesCrossSiteForms: an admin logs in to the owner's
// status page with its form, which shows the destination's sink and its
// open shard-DDL lock (they were "none" before). In the same browser,
// pages of two other origins, one on another port of the same host (the
// same site, so the SameSite cookie goes along) and one on another site,
// each submit two text/plain forms to the node: one creating a
// destination, one skipping the lock. Every one is refused (403), Raft
// holds no new destination on any node and the lock stays open; the
// status page still works, and the Go client (the CLI's) still skips the
// lock.
func TestStatusPageRefusesCrossSiteForms(t *testing.T) {
	browser := chromium(t)
	rc, prefix := redistest.Prefix(t)
	_ = rc
	src := mysqltest.Start(t)
	src.Exec(t, "CREATE DATABASE app_0", "CREATE DATABASE app_1",
		"CREATE TABLE app_0.orders (id BIGINT PRIMARY KEY, note VARCHAR(40))",
		"CREATE TABLE app_1.orders (id BIGINT PRIMARY KEY, note VARCHAR(40))")
	c := clustertest.Start(t, 3)
	c.Create(fmt.Sprintf(`
name: locked
sources:
  - {name: a, address: '%s', start: earliest}
tables: ['app_\d\.orders']
route: [{match: 'app_\d\.(\w+)', to: 'app.$1'}]
heartbeat: 100ms
sinks:
  - {name: cache, type: redis, address: '127.0.0.1:6379', key: '%s{table}:{pk}'}
`, src.Addr(), prefix))
	owner, _ := c.Owner("locked")
	src.Exec(t, "INSERT INTO app_0.orders VALUES (1, 'a')", "INSERT INTO app_1.orders VALUES (2, 'b')",
		"ALTER TABLE app_0.orders ADD COLUMN extra INT NULL", "INSERT INTO app_0.orders VALUES (3, 'c', 1)")
	admin, err := client.New(owner.URL(), client.WithToken(clustertest.AdminUser, clustertest.AdminPassword))
	if err != nil {
		t.Fatal(err)
	}
	var lock int
	c.WaitFor("a shard-DDL lock on app.orders", func() (bool, string) {
		st, err := admin.DDL(t.Context(), "locked")
		if err != nil || len(st.Locks) != 1 {
			return false, fmt.Sprintf("%+v, %v", st, err)
		}
		lock = st.Locks[0].ID
		return true, ""
	})

	tab := newTab(t, browser)
	answers := watchPosts(t, tab)
	if err := chromedp.Do(tab, chromedp.Navigate(owner.URL()+"/")); err != nil {
		t.Fatal(err)
	}
	logIn(t, c, tab, clustertest.AdminUser, clustertest.AdminPassword)
	c.WaitFor("the page to show the sink and the DDL lock", func() (bool, string) {
		got, err := readShown(tab)
		if err != nil || len(got.Dests) != 1 {
			return false, fmt.Sprintf("%+v, %v", got, err)
		}
		d := got.Dests[0]
		return fmt.Sprint(d.SinkNames) == "[cache]" && fmt.Sprint(d.LockIDs) == fmt.Sprintf("[%d]", lock),
			fmt.Sprintf("sinks %q %q, DDL locks %q %q", d.Sinks, d.SinkNames, d.DDLLocks, d.LockIDs)
	})
	cookie := sessionCookie(t, tab, owner.URL())
	if !cookie.HTTPOnly || cookie.SameSite != network.CookieSameSiteStrict || cookie.Expires <= 0 {
		t.Errorf("the session cookie %+v: want HttpOnly, SameSite=Strict and an expiry", cookie)
	}

	// The attack: text/plain bodies, which a form may send to any site.
	// The spec is JSON (and so YAML) once the form's "=" lands in a regular
	// expression.
	create := fmt.Sprintf(`{"name":"evil","sources":[{"name":"a","address":"%s","start":"latest"}],"tables":["app_0\\.orders|x`, src.Addr())
	evil := fmt.Sprintf(`<!doctype html><title>a page</title>
<iframe name="f1"></iframe><iframe name="f2"></iframe>
<form id="create" method="POST" enctype="text/plain" target="f1" action="%[1]s/v1/destinations"><input type="hidden" name="%[2]s" value='"]}'></form>
<form id="skip" method="POST" enctype="text/plain" target="f2" action="%[1]s/v1/destinations/locked/ddl/%[3]d?action=skip"><input type="hidden" name="x" value="y"></form>
<script>document.getElementById('create').submit(); document.getElementById('skip').submit();</script>`,
		owner.URL(), html.EscapeString(create), lock)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, evil)
	}))
	t.Cleanup(site.Close)
	port := site.URL[strings.LastIndex(site.URL, ":")+1:]
	targets := []string{owner.URL() + "/v1/destinations", fmt.Sprintf("%s/v1/destinations/locked/ddl/%d?action=skip", owner.URL(), lock)}
	for _, page := range []string{"http://127.0.0.1:" + port + "/", "http://localhost:" + port + "/"} {
		answers.reset()
		if err := chromedp.Do(tab, chromedp.Navigate(page)); err != nil {
			t.Fatalf("loading %s: %v", page, err)
		}
		c.WaitFor("the node's answers to the forms of "+page, func() (bool, string) {
			got := answers.get()
			for _, u := range targets {
				if _, ok := got[u]; !ok {
					return false, fmt.Sprintf("answers so far %v", got)
				}
			}
			return true, ""
		})
		for u, status := range answers.get() {
			if status != http.StatusForbidden {
				t.Errorf("a form of %s posted to %s: %d, want 403", page, u, status)
			}
		}
	}
	for _, n := range c.Nodes() {
		n.Raft().Consistent(t.Context())
		if _, err := n.Raft().Destination("evil"); err == nil {
			t.Errorf("node %s's Raft holds the destination a form of another site created", n.Name)
		}
	}
	st, err := admin.DDL(t.Context(), "locked")
	if err != nil || len(st.Locks) != 1 || len(st.Decisions) != 0 {
		t.Errorf("the DDL lock after the forms: %+v, %v; want lock %d open, no decision", st, err, lock)
	}

	// The page and the CLI's client still work. A login to another node's
	// page on the same host (a cookie of its own) leaves this one's
	// session alone.
	var other *clustertest.Node
	for _, n := range c.Nodes() {
		if n != owner {
			other = n
		}
	}
	if err := chromedp.Do(tab, chromedp.Navigate(other.URL()+"/")); err != nil {
		t.Fatal(err)
	}
	logIn(t, c, tab, clustertest.AdminUser, clustertest.AdminPassword)
	if err := chromedp.Do(tab, chromedp.Navigate(owner.URL()+"/")); err != nil {
		t.Fatal(err)
	}
	c.WaitFor("the owner's page to show the destination again, still logged in", func() (bool, string) {
		got, err := readShown(tab)
		if err != nil || len(got.Dests) != 1 || got.Error != "" {
			return false, fmt.Sprintf("%+v, %v", got, err)
		}
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		form, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById('login').hidden`))
		return err == nil && !form, fmt.Sprintf("login form shown %v (%v)", form, err)
	})
	if _, err := admin.DecideDDL(t.Context(), "locked", lock, "skip"); err != nil {
		t.Fatalf("the Go client skipping lock %d: %v", lock, err)
	}
	if st, err := admin.DDL(t.Context(), "locked"); err != nil || len(st.Decisions) != 1 {
		t.Errorf("after the client's skip: %+v, %v; want one decision", st, err)
	}
}

// TestDNSRebindingRefused: Chromium resolves a name the node does not
// know to 127.0.0.1, as DNS rebinding makes a browser do, and loads the
// node's page and API by it: the node answers 421 and the page's own
// data never reaches the browser. The node's own names still work.
func TestDNSRebindingRefused(t *testing.T) {
	browser := chromium(t)
	c := clustertest.Start(t, 1)
	n := c.Nodes()[0]
	port := n.URL()[strings.LastIndex(n.URL(), ":")+1:]
	tab := newTab(t, browser, chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"))
	for _, path := range []string{"/", "/healthz", "/v1/status"} {
		u := "http://rebind.test:" + port + path
		status, body := load(t, tab, u)
		if status != http.StatusMisdirectedRequest || !strings.Contains(body, "DNS rebinding") {
			t.Errorf("GET %s: %d %q; want 421 naming DNS rebinding", u, status, body)
		}
	}
	for _, host := range []string{"localhost", "127.0.0.1"} {
		u := "http://" + host + ":" + port + "/healthz"
		if status, body := load(t, tab, u); status != http.StatusOK {
			t.Errorf("GET %s: %d %q; want 200", u, status, body)
		}
	}
}

// TestHTTPRefusesForeignHostsAndForms calls a node as a browser's page of
// another site could: a Host that is not the node's gets 421 on every
// path; a change without the header X-Braid-Request and without a JSON or
// YAML body, or with another site's Origin, gets 403; a spec sent as JSON
// must be JSON. The same calls as the CLI makes them go through.
func TestHTTPRefusesForeignHostsAndForms(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 1)
	base := c.Nodes()[0].URL()
	hostPort := strings.TrimPrefix(base, "http://")
	call := func(method, path, host string, header http.Header, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.SetBasicAuth(clustertest.AdminUser, clustertest.AdminPassword)
		for k, v := range header {
			req.Header[k] = v
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.HasPrefix(strings.ToLower(resp.Header.Get("WWW-Authenticate")), "basic") {
			t.Errorf("%s %s: a Basic challenge, which a browser keeps the answer to", method, path)
		}
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/", "/healthz", "/v1/cluster", "/v1/status"} {
		for _, host := range []string{"evil.example", "evil.example:" + hostPort[strings.Index(hostPort, ":")+1:], "127.0.0.1.evil.example"} {
			if status, body := call("GET", path, host, nil, ""); status != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %s: %d %s; want 421", path, host, status, body)
			}
		}
		for _, host := range []string{"localhost", "LOCALHOST.:8081", "127.0.0.1", "[::1]:1"} {
			if status, body := call("GET", path, host, nil, ""); status != http.StatusOK {
				t.Errorf("GET %s with Host %s: %d %s; want 200", path, host, status, body)
			}
		}
	}
	spec := func(name string) string {
		return fmt.Sprintf(`{"name": %q, "sources": [{"name": "a", "address": %q, "start": "latest"}]}`, name, src.Addr())
	}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		what   string
		header http.Header
		want   int
	}{
		{"text/plain, as a form sends it", hdr("Content-Type", "text/plain"), 403},
		{"a urlencoded form", hdr("Content-Type", "application/x-www-form-urlencoded"), 403},
		{"a multipart form", hdr("Content-Type", "multipart/form-data; boundary=x"), 403},
		{"no type", nil, 403},
		{"JSON from another site's page", hdr("Content-Type", "application/json", "Origin", "http://evil.example"), 403},
		{"JSON from a sandboxed page", hdr("Content-Type", "application/json", "Origin", "null"), 403},
		{"the header from another site's page", hdr("X-Braid-Request", "1", "Content-Type", "application/json", "Origin", "http://127.0.0.1:1"), 403},
		{"the header, a text body", hdr("X-Braid-Request", "1", "Content-Type", "text/plain"), 415},
		{"YAML declared JSON", hdr("Content-Type", "application/json"), 400},
		{"JSON", hdr("Content-Type", "application/json"), 201},
		{"JSON from the node's own page", hdr("Content-Type", "application/json", "Origin", base), 201},
		{"YAML with the header", hdr("Content-Type", "application/yaml", "X-Braid-Request", "1"), 201},
	} {
		name := "d" + strconv.Itoa(int(time.Now().UnixNano()%1e9))
		body := spec(name)
		if strings.HasPrefix(tc.what, "YAML") {
			body = fmt.Sprintf("name: %s\nsources: [{name: a, address: '%s', start: latest}]\n", name, src.Addr())
		}
		status, answer := call("POST", "/v1/destinations", "", tc.header, body)
		if status != tc.want {
			t.Errorf("create, %s: %d %s; want %d", tc.what, status, answer, tc.want)
		}
		_, err := c.Nodes()[0].Raft().Destination(name)
		if created := err == nil; created != (tc.want == 201) {
			t.Errorf("create, %s: destination created %v", tc.what, created)
		}
		if tc.want == 403 && !strings.Contains(answer, "another site") {
			t.Errorf("create, %s: %s; want a line saying why", tc.what, answer)
		}
	}
	if status, body := call("DELETE", "/v1/destinations/nope", "", nil, ""); status != 403 {
		t.Errorf("DELETE without the header: %d %s; want 403", status, body)
	}
	if status, body := call("DELETE", "/v1/destinations/nope", "", hdr("X-Braid-Request", "1"), ""); status != 404 {
		t.Errorf("DELETE with the header: %d %s; want 404", status, body)
	}
	// A login is JSON only, and a wrong one gets no Basic challenge.
	if status, body := call("POST", "/v1/session", "", hdr("Content-Type", "text/plain"), `{"username":"admin","password":"x"}`); status != 403 {
		t.Errorf("a text/plain login: %d %s; want 403", status, body)
	}
	if status, body := call("POST", "/v1/session", "", hdr("Content-Type", "application/json"), `{"username":"admin","password":"wrong"}`); status != 401 {
		t.Errorf("a wrong login: %d %s; want 401", status, body)
	}
}

// logIn logs in with the status page's form in tab, as a person types it,
// and waits for the page to show the user.
func logIn(t *testing.T, c *clustertest.Cluster, tab context.Context, user, pass string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS("#login")),
		chromedp.SendKeys(chromedp.CSS(`#login input[name=username]`), user),
		chromedp.SendKeys(chromedp.CSS(`#login input[name=password]`), pass),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
	); err != nil {
		t.Fatalf("logging in with the page's form: %v", err)
	}
	c.WaitFor("the page to show the user logged in", func() (bool, string) {
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		who, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('who').hidden ? '' : document.getElementById('user').textContent`))
		return err == nil && strings.HasPrefix(who, user), fmt.Sprintf("shown %q (%v)", who, err)
	})
}

// sessionCookie is the session cookie the browser keeps for the node at
// base.
func sessionCookie(t *testing.T, tab context.Context, base string) *network.Cookie {
	t.Helper()
	cookies, err := chromedp.Call(tab, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies.Cookies {
		if strings.HasPrefix(c.Name, "braid_session_") {
			return c
		}
	}
	t.Fatalf("no braid_session_NODE cookie for %s among %d", base, len(cookies.Cookies))
	return nil
}

// readShown reads what the page in tab shows (readPage).
func readShown(tab context.Context) (shown, error) {
	ctx, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[shown](readPage))
}

// posts records the status of the answer to each POST a tab makes, by
// URL.
type posts struct {
	mu     sync.Mutex
	method map[network.RequestID]string // request → URL, for POSTs
	status map[string]int
}

func (p *posts) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = map[string]int{}
}

func (p *posts) get() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.status {
		out[k] = v
	}
	return out
}

// watchPosts records tab's POSTs' answers.
func watchPosts(t *testing.T, tab context.Context) *posts {
	t.Helper()
	p := &posts{method: map[network.RequestID]string{}, status: map[string]int{}}
	err := chromedp.Listen(tab, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if e.Request.Method == http.MethodPost && !strings.HasSuffix(e.Request.URL, "/v1/session") {
				p.method[e.RequestID] = e.Request.URL
			}
		case *network.EventResponseReceived:
			if u, ok := p.method[e.RequestID]; ok {
				p.status[u] = int(e.Response.Status)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// load navigates tab to u and returns the answer's status and the text
// the browser shows.
func load(t *testing.T, tab context.Context, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(u))
	if err != nil {
		t.Fatalf("loading %s: %v", u, err)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if err != nil {
		t.Fatalf("reading %s: %v", u, err)
	}
	if _, err := url.Parse(u); err != nil {
		t.Fatal(err)
	}
	return int(resp.Status), text
}
