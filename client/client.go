package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/braid-cdc/braid/api/wire"
)

// ErrBusy: another stream of the same client id is open on the server.
var ErrBusy = errors.New("client: the client id already has a stream open")

// Error is an error answer of the server.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Message is the server's explanation.
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("client: server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Client talks to a braid node's native API; given one or several nodes
// of a cluster, it learns the others from them (members.go) and moves to
// the next when one cannot be reached.
type Client struct {
	bases       []*url.URL // the nodes given to New
	nodes       *nodes     // those and the ones learned; the node in use
	http        *http.Client
	log         *slog.Logger
	ackInterval time.Duration
	ackMessages int
	ackBytes    int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	resumeAfter uint64
	idleTimeout time.Duration
	jsonLines   bool
	from        string         // WithFrom; "" none
	ephemeral   bool           // WithEphemeral
	user, pass  string         // WithToken; "" none
	roots       *x509.CertPool // WithCA; nil: the system's
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client. It must not set a Timeout, which
// would cut streams. Default: a client of its own with Go's default
// transport settings.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithLogger sets where reconnects and failed acks are logged. Default:
// discard.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithAckInterval sets how often Stream acks what it handled. Default:
// 500ms.
func WithAckInterval(d time.Duration) Option { return func(c *Client) { c.ackInterval = d } }

// WithAckMessages makes Stream ack after this many messages handled, sooner
// than the interval. Default: 1000.
func WithAckMessages(n int) Option { return func(c *Client) { c.ackMessages = n } }

// WithAckBytes makes Stream ack after this many bytes of messages handled,
// sooner than the interval. The server keeps what is not acked in its
// store (64 MiB by default, where an event costs about twice its line):
// acking well before the store fills keeps the stream from waiting on the
// next ack while catching up. Default: 4 MiB.
func WithAckBytes(n int) Option { return func(c *Client) { c.ackBytes = n } }

// WithBackoff sets the wait before the first reconnect and the most it
// grows to: it doubles after each round of failed attempts, one at each
// node the client knows (one attempt when it knows one node). Default:
// 100ms, 5s.
func WithBackoff(first, most time.Duration) Option {
	return func(c *Client) { c.minBackoff, c.maxBackoff = first, most }
}

// WithIdleTimeout sets how long a stream may bring nothing, not even the
// server's once-a-second keepalive, before Stream drops the connection as
// dead and reconnects. Default: 3s.
func WithIdleTimeout(d time.Duration) Option { return func(c *Client) { c.idleTimeout = d } }

// WithResumeAfter makes Stream drop every transaction with seq <= seq: the
// last one the application made durable. Default: 0.
func WithResumeAfter(seq uint64) Option { return func(c *Client) { c.resumeAfter = seq } }

// WithJSONLines makes streams come as NDJSON lines, which Message.Raw and
// MessageView.Raw then hold, instead of braid's binary encoding of the
// same messages (the default: the Go client decodes it at a fraction of
// the JSON's cost, but the server's JSON text is not there to keep).
func WithJSONLines() Option { return func(c *Client) { c.jsonLines = true } }

// WithToken makes every request carry the credential NAME:PASSWORD of a
// user of the servers' users file (as HTTP basic auth), redirects to a
// destination's owner included. ParseToken reads one from $BRAID_TOKEN or
// a token file. Default: none.
func WithToken(name, password string) Option {
	return func(c *Client) { c.user, c.pass = name, password }
}

// WithCA makes the client trust the servers' HTTPS certificates signed by
// a CA in pool (a cluster's own CA: braid certs init). Default: the
// system's roots. It has no effect with WithHTTPClient.
func WithCA(pool *x509.CertPool) Option { return func(c *Client) { c.roots = pool } }

// WithFrom sets where a stream of a client id new to the destination
// starts: "earliest" (the destination's start positions), "latest" (what
// is committed from now on), "seq:N" (the transaction of seq N) or
// "time:RFC3339" (the first transaction committed at or after that time,
// e.g. time:2026-01-02T15:04:05Z). The server ignores it for a client id
// it has a cursor of. CheckFrom tells a valid one; New refuses others.
// Default: none (the destination's consumers.start).
func WithFrom(from string) Option { return func(c *Client) { c.from = from } }

// WithEphemeral makes streams leave nothing behind: the server keeps no
// cursor of the client id and forgets it when its stream ends. A reconnect
// of such a stream, to the same node or another, is a new client id to
// the server: once a connection was served, the client asks it to start
// at the transaction after the last one handled whole (from=seq:N), so
// that nothing is skipped or repeated. Default: a durable client id.
func WithEphemeral() Option { return func(c *Client) { c.ephemeral = true } }

// CheckFrom reports whether from is a start position that WithFrom takes:
// earliest, latest, seq:N (N a seq, 1 or more) or time:RFC3339.
func CheckFrom(from string) error {
	kind, arg, hasArg := strings.Cut(from, ":")
	switch {
	case from == "earliest" || from == "latest":
		return nil
	case kind == "seq" && hasArg:
		if n, err := strconv.ParseUint(arg, 10, 64); err != nil || n == 0 {
			return fmt.Errorf("client: start position %q: seq:N takes the first seq to read, 1 or more, as in seq:42", from)
		}
		return nil
	case kind == "time" && hasArg:
		if _, err := time.Parse(time.RFC3339Nano, arg); err != nil {
			return fmt.Errorf("client: start position %q: %q is not an RFC 3339 time, as in time:2026-01-02T15:04:05Z", from, arg)
		}
		return nil
	}
	return fmt.Errorf("client: start position %q: want earliest, latest, seq:N or time:RFC3339", from)
}

// ParseToken splits a credential NAME:PASSWORD, as $BRAID_TOKEN and a
// token file hold it (surrounding white space trimmed).
func ParseToken(s string) (name, password string, err error) {
	name, password, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || name == "" || password == "" {
		return "", "", errors.New("client: a token is NAME:PASSWORD, a user of the servers' users file and its password")
	}
	return name, password, nil
}

// New returns a client of the node at baseURL ("http://host:port"), or of
// a cluster's nodes given as a comma-separated list: any node serves any
// destination (it redirects to the owner), and when the node in use
// cannot be reached Stream goes on through the next. Stream also learns
// the cluster's other nodes from the nodes given (see Members), so one
// node's address is enough to fail over to any of them.
func New(baseURL string, opts ...Option) (*Client, error) {
	c := &Client{ackInterval: 500 * time.Millisecond, ackMessages: 1000, ackBytes: 4 << 20,
		minBackoff: 100 * time.Millisecond, maxBackoff: 5 * time.Second, idleTimeout: 3 * time.Second}
	for _, s := range strings.Split(baseURL, ",") {
		s = strings.TrimSpace(s)
		u, err := url.Parse(strings.TrimRight(s, "/"))
		if err != nil {
			return nil, fmt.Errorf("client: base URL %q: %w", s, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("client: base URL %q: want http://host:port or https://host:port", s)
		}
		c.bases = append(c.bases, u)
	}
	for _, o := range opts {
		o(c)
	}
	var problems []error
	if c.ackInterval <= 0 {
		problems = append(problems, fmt.Errorf("client: ack interval %v: must be positive", c.ackInterval))
	}
	if c.ackMessages <= 0 {
		problems = append(problems, fmt.Errorf("client: ack messages %d: must be positive", c.ackMessages))
	}
	if c.ackBytes <= 0 {
		problems = append(problems, fmt.Errorf("client: ack bytes %d: must be positive", c.ackBytes))
	}
	if c.idleTimeout <= 0 {
		problems = append(problems, fmt.Errorf("client: idle timeout %v: must be positive", c.idleTimeout))
	}
	if c.minBackoff <= 0 || c.maxBackoff < c.minBackoff {
		problems = append(problems, fmt.Errorf("client: backoff %v..%v: want 0 < first <= most", c.minBackoff, c.maxBackoff))
	}
	if c.from != "" {
		if err := CheckFrom(c.from); err != nil {
			problems = append(problems, err)
		}
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	if c.http == nil {
		// A stream moves megabytes a second: read the connection 64 KiB
		// at a time, not the default 4 KiB (a sixteenth of the reads).
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ReadBufferSize = 64 << 10
		if c.roots != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: c.roots, MinVersion: tls.VersionTLS12}
		}
		c.http = &http.Client{Transport: t}
	}
	// Set on every request, not once: net/http drops Authorization on a
	// redirect to another host, and an owner is often another host.
	hc := *c.http
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = credentialed{base: base, user: c.user, pass: c.pass}
	c.http = &hc
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.nodes = newNodes(c.bases)
	return c, nil
}

// credentialed adds wire.RequestHeader to each request it sends, which
// a server requires of every call that changes something (no form of
// another site can send it), and basic auth when a user is set.
type credentialed struct {
	base       http.RoundTripper
	user, pass string // "": none
}

func (t credentialed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(wire.RequestHeader, "1")
	if t.user != "" {
		r.SetBasicAuth(t.user, t.pass)
	}
	return t.base.RoundTrip(r)
}

// url builds the URL of an endpoint under /v1/destinations, path elements
// escaped.
func (c *Client) url(query url.Values, path ...string) string {
	return apiURL(c.base(), query, append([]string{"destinations"}, path...)...)
}

// do sends a request and decodes a JSON answer into out.
func (c *Client) do(ctx context.Context, method, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: %s %s: decoding the answer: %w", method, u, err)
	}
	return nil
}

// readError turns a non-200 answer into an *Error.
func readError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body wire.ErrorBody
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		msg = body.Error
	}
	return &Error{Status: resp.StatusCode, Message: msg}
}

// Destinations lists the destinations the node serves.
func (c *Client) Destinations(ctx context.Context) ([]string, error) {
	var names []string
	if err := c.do(ctx, http.MethodGet, c.url(nil), &names); err != nil {
		return nil, err
	}
	return names, nil
}

// State returns a destination's state.
func (c *Client) State(ctx context.Context, name string) (*State, error) {
	var st State
	if err := c.do(ctx, http.MethodGet, c.url(nil, name), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// The state's JSON shapes are the server's (package wire).
type (
	// State is a destination's state: its merge's progress per source, its
	// store's use, and the client ids that streamed it from the node.
	State          = wire.State
	SourceState    = wire.SourceState
	StoreState     = wire.StoreState
	ClientState    = wire.ClientState
	CursorState    = wire.CursorState
	SourcePosition = wire.SourcePosition
)

// TypeEmpty is the Type of the message of a transaction that holds no row
// change (see Message).
const TypeEmpty = "EMPTY"

// TypeLost is the Type of the marker of transactions lost in a source
// failover (see Message).
const TypeLost = "LOST"

// Message is one flat message: canal's FlatMessage fields and braid's.
//
// A transaction that holds no row change (a snapshot chunk that found no
// rows, when a table's rows are an exact multiple of snapshot_chunk_rows
// or a chunk is read again after a TRUNCATE) still took a seq: it comes as
// one message of type TypeEmpty, with no table, columns nor data, and its
// seq, source, position and gtid (and Snapshot for a chunk), so that the
// seqs a consumer sees are dense, as canal's clients see such a
// transaction's TRANSACTIONBEGIN and TRANSACTIONEND entries.
//
// When a source's promoted server lacked transactions braid had emitted
// (lost in an asynchronous failover) and an operator accepted it (braid
// destination accept-lost), a message of type TypeLost stands where the
// source went on: its Sql names the lost transactions, Source the
// source; it takes a seq of its own and holds no table nor data. The
// rows of the lost transactions came before it, if they came; after it
// come the new server's.
type Message struct {
	ID       uint64   `json:"id"`
	Database string   `json:"database"`
	Table    string   `json:"table"`
	PkNames  []string `json:"pkNames"`
	IsDdl    bool     `json:"isDdl"`
	// Type is INSERT, UPDATE, DELETE, the DDL kind (CREATE, ALTER, ...),
	// TypeEmpty or TypeLost.
	Type string `json:"type"`
	// Es is the event (commit) time and Ts the emit time, in ms.
	Es        int64             `json:"es"`
	Ts        int64             `json:"ts"`
	SQL       string            `json:"sql"`
	SQLType   map[string]int    `json:"sqlType"`
	MysqlType map[string]string `json:"mysqlType"`
	// Data are the rows (after the change; before it for DELETE), column →
	// value, nil for NULL. Old holds, for UPDATE, each row's changed
	// columns' previous values. A value kept may keep the other values of
	// its row in memory (they share an allocation), never more.
	Data []map[string]*string `json:"data"`
	Old  []map[string]*string `json:"old"`
	// Seq is the merged transaction's sequence number, shared by all the
	// messages of one transaction.
	Seq            uint64 `json:"seq"`
	Source         string `json:"source"`
	OriginDatabase string `json:"originDatabase"`
	OriginTable    string `json:"originTable"`
	// Position is the source binlog's "file:pos".
	Position string `json:"position"`
	GTID     string `json:"gtid,omitempty"`
	// Snapshot marks a message of an initial snapshot's rows (spec
	// snapshot: initial): INSERTs of rows the source held, not changes.
	Snapshot bool `json:"snapshot,omitempty"`
	// Raw is the line as the server sent it (column order kept), without
	// the newline, when the client asked for JSON lines (WithJSONLines);
	// nil otherwise. It belongs to the receiver.
	Raw json.RawMessage `json:"-"`
}
