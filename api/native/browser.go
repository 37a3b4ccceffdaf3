package native

import (
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/braid-cdc/braid/api/wire"
)

// What a browser may not do to braid's HTTP servers (a cluster node's and
// capture's), for a page of another site that an admin, or anyone on the
// machine, happens to open:
//
//   - Reach a server by a name that is not its own. DNS rebinding points
//     an attacker's name at 127.0.0.1 or an internal address; the browser
//     then treats the server as the attacker's own origin and sends its
//     name as Host. A Host that is a name (not an IP literal, which no
//     rebinding can produce) must be one of the server's: localhost, the
//     machine's hostname, the name it listens on, or one the operator
//     added (BrowserRules.Hosts). Anything else gets 421.
//   - Change anything with a request a page of another site can make
//     without asking: a form (application/x-www-form-urlencoded,
//     multipart/form-data, text/plain) or a fetch without custom headers.
//     A call other than GET, HEAD and OPTIONS needs the header
//     X-Braid-Request (any value) or a JSON or YAML body
//     (application/json, application/yaml), each of which makes a browser
//     ask first (CORS preflight), which braid never grants; and when it
//     carries an Origin, that origin must be the server's own. Otherwise
//     403.
//
// Reads are not checked beyond the Host: a page of another site cannot
// read the answers of another origin (same-origin policy), and braid
// sends no CORS header.

// RequestHeader is the header a state-changing call carries to show it is
// not a form of another site (wire.RequestHeader): the Go client, and so
// the CLI, sends it on every request.
const RequestHeader = wire.RequestHeader

// BrowserRules configures Browsers.
type BrowserRules struct {
	// Listen is the host the server listens on (an IP, or a name); a
	// name is allowed as a Host. Default: none beyond the others.
	Listen string
	// Hosts are more names clients reach the server by (a DNS name, a
	// proxy's), with or without a port; "*" turns the Host check off.
	// Default: none.
	Hosts []string
	// HostHint ends the answer to a foreign Host, saying how to allow it
	// (the command that owns the setting writes it, naming its flag);
	// %s is the Host's name. Default: a sentence naming no flag.
	HostHint string
	// Logger receives a line for each refusal. Default: discard.
	Logger *slog.Logger
}

// Browsers checks each request against the rules above before handing it
// on. It is safe for concurrent use.
type Browsers struct {
	names    map[string]bool
	anyHost  bool
	hostHint string
	log      *slog.Logger
}

// NewBrowsers checks rules; its error names the bad entry of Hosts.
func NewBrowsers(rules BrowserRules) (*Browsers, error) {
	b := &Browsers{names: map[string]bool{"localhost": true}, hostHint: rules.HostHint, log: rules.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.hostHint == "" {
		b.hostHint = "if %s names this server, add it to the server's allowed HTTP hosts"
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		b.names[canonicalHost(h)] = true
	}
	if l := canonicalHost(rules.Listen); l != "" && net.ParseIP(l) == nil {
		b.names[l] = true
	}
	var bad []error
	for _, h := range rules.Hosts {
		h = strings.TrimSpace(h)
		switch {
		case h == "*":
			b.anyHost = true
			continue
		case h == "" || strings.ContainsAny(h, "/ \t@?#"):
			bad = append(bad, fmt.Errorf("native: allowed host %q: want a host name or IP, with or without a port (braid.example.com, braid.example.com:8081), or * for any", h))
			continue
		}
		b.names[canonicalHost(hostOnly(h))] = true
	}
	return b, errors.Join(bad...)
}

// Wrap serves h to the requests the rules let through.
func (b *Browsers) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, why := b.hostAllowed(r.Host); !ok {
			b.log.Warn("refused an HTTP call: foreign Host", "host", r.Host, "remote", r.RemoteAddr, "path", r.URL.Path)
			writeError(w, http.StatusMisdirectedRequest, why)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			h.ServeHTTP(w, r)
			return
		}
		if why := changeRefused(r); why != "" {
			b.log.Warn("refused an HTTP call: not a call a page of another site is kept from", "origin", r.Header.Get("Origin"), "content_type", r.Header.Get("Content-Type"),
				"remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, why)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed says whether host (a request's Host) names this server, and
// why not.
func (b *Browsers) hostAllowed(host string) (bool, string) {
	name := canonicalHost(hostOnly(host))
	if b.anyHost || name == "" || b.names[name] || net.ParseIP(name) != nil {
		return true, ""
	}
	known := slices.Sorted(func(yield func(string) bool) {
		for n := range b.names {
			if !yield(n) {
				return
			}
		}
	})
	return false, fmt.Sprintf("Host %q is not a name of this server (it answers to %s and any IP address): refused, as a page of another site reaching it through DNS rebinding would be; %s",
		host, strings.Join(known, ", "), fmt.Sprintf(b.hostHint, name))
}

// changeRefused says why a state-changing request r may have come from a
// page of another site ("" when it cannot have).
func changeRefused(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Sprintf("%s %s: refused: it comes from a page of %s, not of this server (%s), and a page of another site may change nothing here", r.Method, r.URL.Path, o, r.Host)
		}
	}
	if r.Header.Get(RequestHeader) != "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && (mt == "application/json" || mt == "application/yaml") {
		return ""
	}
	return fmt.Sprintf("%s %s: refused: a call that changes something needs the header %s (any value) or a body sent as application/json, which a form of another site cannot send (braid's CLI and Go client send the header)",
		r.Method, r.URL.Path, RequestHeader)
}

// hostOnly drops the port of host[:port] ([v6]:port, or a bare IPv6).
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// canonicalHost lower-cases a name and drops its trailing dot.
func canonicalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}
