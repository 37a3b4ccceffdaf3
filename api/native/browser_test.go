package native_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/api/native"
)

// TestBrowsers: which Hosts and which changes native.Browsers lets
// through, each case with why it matters.
func TestBrowsers(t *testing.T) {
	b, err := native.NewBrowsers(native.BrowserRules{Listen: "braid-box", Hosts: []string{"braid.example.com:8443", "Proxy.Example."},
		HostHint: "if %s names this server, start it with --http-host %[1]s"})
	if err != nil {
		t.Fatal(err)
	}
	h := b.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	hostname, _ := os.Hostname()
	for _, c := range []struct {
		why, method, host string
		header            []string
		want              int
	}{
		{"loopback by name", "GET", "localhost:8081", nil, 418},
		{"a name is case-insensitive, a trailing dot too", "GET", "LocalHost.", nil, 418},
		{"the machine's hostname", "GET", hostname + ":1", nil, 418},
		{"the listen name", "GET", "braid-box", nil, 418},
		{"an added name, on any port", "GET", "braid.example.com:1", nil, 418},
		{"an added name, normalised", "GET", "proxy.example", nil, 418},
		{"an IP literal: no rebinding produces one", "GET", "10.1.2.3:8081", nil, 418},
		{"an IPv6 literal", "GET", "[fe80::1]:8081", nil, 418},
		{"DNS rebinding: a name of the attacker's", "GET", "evil.example:8081", nil, 421},
		{"a name that starts like a loopback IP", "GET", "127.0.0.1.evil.example", nil, 421},
		{"a subdomain of an added name is another name", "GET", "x.braid.example.com", nil, 421},
		{"the Host check comes first", "POST", "evil.example", []string{"X-Braid-Request", "1"}, 421},
		{"a read needs nothing", "GET", "localhost", []string{"Origin", "http://evil.example"}, 418},
		{"a text/plain form", "POST", "localhost", []string{"Content-Type", "text/plain"}, 403},
		{"a urlencoded form", "POST", "localhost", []string{"Content-Type", "application/x-www-form-urlencoded"}, 403},
		{"a DELETE without the header", "DELETE", "localhost", nil, 403},
		{"the header", "DELETE", "localhost", []string{"X-Braid-Request", "yes"}, 418},
		{"JSON", "POST", "localhost", []string{"Content-Type", "application/json; charset=utf-8"}, 418},
		{"YAML", "POST", "localhost", []string{"Content-Type", "application/yaml"}, 418},
		{"JSON-looking text", "POST", "localhost", []string{"Content-Type", "text/json"}, 403},
		{"the server's own origin", "POST", "localhost:8081", []string{"X-Braid-Request", "1", "Origin", "http://localhost:8081"}, 418},
		{"another port is another origin", "POST", "localhost:8081", []string{"X-Braid-Request", "1", "Origin", "http://localhost:8082"}, 403},
		{"a sandboxed page", "POST", "localhost", []string{"X-Braid-Request", "1", "Origin", "null"}, 403},
		{"OPTIONS gets the Host check too", "OPTIONS", "evil.example", nil, 421},
	} {
		req := httptest.NewRequest(c.method, "http://x/v1/destinations", strings.NewReader("{}"))
		req.Host = c.host
		for i := 0; i+1 < len(c.header); i += 2 {
			req.Header.Set(c.header[i], c.header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %s Host %s %q: %d %s, want %d", c.why, c.method, c.host, c.header, rec.Code, rec.Body, c.want)
		}
		if c.want == 421 && !strings.Contains(rec.Body.String(), "--http-host "+strings.ToLower(strings.Split(c.host, ":")[0])) {
			t.Errorf("%s: %s; want the hint naming the flag and the host", c.why, rec.Body)
		}
	}
	if _, err := native.NewBrowsers(native.BrowserRules{Hosts: []string{"http://x/"}}); err == nil || !strings.Contains(err.Error(), `"http://x/"`) {
		t.Errorf("a URL as an allowed host: %v; want an error naming it", err)
	}
	any, _ := native.NewBrowsers(native.BrowserRules{Hosts: []string{"*"}})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://evil.example/", nil)
	any.Wrap(http.NotFoundHandler()).ServeHTTP(rec, req)
	if rec.Code != 404 {
		t.Errorf("with *: Host evil.example: %d, want it let through", rec.Code)
	}
}
