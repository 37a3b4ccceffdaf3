package canal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withlin/canal-go/client"
	pbe "github.com/withlin/canal-go/protocol/entry"
	pbp "github.com/withlin/canal-go/protocol/packet"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// logBuf collects a server's log lines (and copies them to the test's
// output) so tests can check that a refusal was logged.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	return l.out.Write(p)
}

// waitFor waits until a log line containing s was written.
func (l *logBuf) waitFor(t *testing.T, s string) {
	t.Helper()
	retry.Until(t, 5*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !strings.Contains(l.buf.String(), s) {
			return fmt.Errorf("no log line containing %q", s)
		}
		return nil
	})
}

// fixture is a served destination: shards, the group destination running
// into a store, the registry and a canal server on a loopback port.
type fixture struct {
	srvs  []*mysqltest.Server
	store *stream.Store
	reg   *stream.Registry
	port  int
	log   *logBuf
}

// write is one transaction on one shard: statements at a header time.
type write struct {
	srv  int
	at   int // seconds after base
	sqls []string
}

// The shop destination: three servers, shop_i on server i, routed to the
// logical table shop.orders. The writes' header times make an exact
// cross-shard interleaving (see wantOrder).
var shopWrites = []write{
	{1, 10, []string{"INSERT INTO shop_1.orders VALUES (1, 'one', 1.50)"}},
	{0, 10, []string{"INSERT INTO shop_0.orders VALUES (2, 'two', 2.00)", "INSERT INTO shop_0.orders VALUES (3, 'three', NULL)"}},
	{2, 11, []string{"INSERT INTO shop_2.orders VALUES (4, CONCAT('four', REPEAT('r', 150)), 4.25)"}}, // a Column over 127 bytes
	{0, 12, []string{"UPDATE shop_0.orders SET note = 'TWO', amount = NULL WHERE id = 2"}},
	{1, 13, []string{"DELETE FROM shop_1.orders WHERE id = 1"}},
	{2, 14, []string{"INSERT INTO shop_2.orders VALUES (5, NULL, 5.00)"}},
}

// wantOrder is the merged order of shopWrites' transactions, by the source
// and the first id each touches: keys (10,s0) (10,s1) (11,s2) (12,s0)
// (13,s1) (14,s2).
var wantOrder = []string{"s0:2", "s1:1", "s2:4", "s0:2", "s1:1", "s2:5"}

// shopTxs is the number of transactions of the destination: one CREATE
// TABLE per server, then the writes.
var shopTxs = 3 + len(shopWrites)

func newFixture(t *testing.T, cfg canal.Config) *fixture {
	t.Helper()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	srvs := mysqltest.StartN(t, 3)
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("SET timestamp = %d", base.Unix()),
			fmt.Sprintf("CREATE DATABASE shop_%d", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(200), amount DECIMAL(10,2))", i))
	}
	for _, w := range shopWrites {
		stmts := []string{fmt.Sprintf("SET timestamp = %d", base.Add(time.Duration(w.at)*time.Second).Unix()), "BEGIN"}
		srvs[w.srv].Exec(t, append(append(stmts, w.sqls...), "COMMIT")...)
	}
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`},
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		ShardDDL:  spec.ShardDDLPassthrough, // the tests count the shards' CREATE TABLEs
		Heartbeat: spec.Duration(100 * time.Millisecond)}
	for i, srv := range srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: srv.Addr(),
			Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	lb := &logBuf{out: t.Output()}
	logger := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := group.New(group.Config{Spec: &ds, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	store := stream.NewStore(stream.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	destDone := make(chan error, 1)
	go func() { destDone <- d.RunInto(ctx, store) }()

	reg := stream.NewRegistry()
	reg.Add(&stream.Served{Name: "shop", Store: store})
	cfg.Registry = reg
	cfg.Logger = logger
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := canal.NewServer(cfg)
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		store.Close()
		if err := <-serveDone; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := <-destDone; err != nil {
			t.Errorf("destination: %v", err)
		}
	})
	// Wait for the whole stream: three DDLs, and six transactions of a
	// begin, a commit and seven rows events in all.
	const events = 3 + 2*6 + 7
	retry.Until(t, 30*time.Second, func() error {
		if n := store.Stats().Events; n < events {
			return fmt.Errorf("store holds %d events, want %d", n, events)
		}
		return nil
	})
	return &fixture{srvs: srvs, store: store, reg: reg, port: l.Addr().(*net.TCPAddr).Port, log: lb}
}

// connector is a connected canal-go client of the shop destination,
// subscribed, disconnected at the end of the test.
func (f *fixture) connector(t *testing.T, clientID int, user, password string) *client.SimpleCanalConnector {
	t.Helper()
	return connectAt(t, f.port, clientID, user, password)
}

// connectAt is a connected canal-go client of the shop destination at a
// server's port, subscribed, disconnected at the end of the test.
func connectAt(t *testing.T, port, clientID int, user, password string) *client.SimpleCanalConnector {
	t.Helper()
	c := client.NewSimpleCanalConnector("127.0.0.1", port, user, password, "shop", 60000, 60000)
	c.ClientIdentity.ClientId = clientID
	if err := c.Connect(); err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.DisConnection() })
	if err := c.Subscribe(`.*\..*`); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return c
}

// got is one entry as a test reads it.
type got struct {
	batch  int64
	typ    pbe.EntryType
	header *pbe.Header
	props  map[string]string
	rc     *pbe.RowChange // ROWDATA only
	seq    uint64
}

func (g got) String() string {
	s := fmt.Sprintf("seq %d %s %s %s:%d", g.seq, g.typ, g.props["source"], g.header.LogfileName, g.header.LogfileOffset)
	if g.rc != nil {
		s += " " + g.rc.GetEventType().String()
	}
	return s
}

func decodeEntry(t *testing.T, batch int64, e *pbe.Entry) got {
	t.Helper()
	g := got{batch: batch, typ: e.GetEntryType(), header: e.Header, props: map[string]string{}}
	for _, p := range e.Header.GetProps() {
		g.props[p.Key] = p.Value
	}
	seq, err := strconv.ParseUint(g.props["seq"], 10, 64)
	if err != nil {
		t.Fatalf("entry without seq prop: %v", g.props)
	}
	g.seq = seq
	if g.typ == pbe.EntryType_ROWDATA {
		g.rc = new(pbe.RowChange)
		if err := proto.Unmarshal(e.StoreValue, g.rc); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// getBatch does one GetWithOutAck with a wait in milliseconds; a panic
// (canal-go's answer to an error ACK) fails the test.
func getBatch(t *testing.T, c *client.SimpleCanalConnector, size int32, waitMs int64) (int64, []got) {
	t.Helper()
	unit := int32(2)
	var id int64
	var out []got
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("canal-go GET panicked: %v", r)
			}
		}()
		m, err := c.GetWithOutAck(size, &waitMs, &unit)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		id = m.Id
		for i := range m.Entries {
			out = append(out, decodeEntry(t, m.Id, &m.Entries[i]))
		}
	}()
	return id, out
}

// readAll gets (acking each batch when ack is set) until the last entry of
// transaction seq n arrived.
func readAll(t *testing.T, c *client.SimpleCanalConnector, n int, size int32, ack bool) []got {
	t.Helper()
	var all []got
	deadline := time.Now().Add(30 * time.Second)
	for done := false; !done; {
		if time.Now().After(deadline) {
			t.Fatalf("no end of seq %d after 30s: %v", n, all)
		}
		id, es := getBatch(t, c, size, 200)
		if id == -1 {
			continue
		}
		for _, e := range es {
			if e.seq == uint64(n) && (e.typ == pbe.EntryType_TRANSACTIONEND || (e.rc != nil && e.rc.GetIsDdl())) {
				done = true
			}
		}
		all = append(all, es...)
		if ack {
			if err := c.Ack(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	return all
}

// raw is a hand-driven client connection.
type raw struct {
	t    *testing.T
	conn net.Conn
	seed []byte
}

func dialRaw(t *testing.T, port int) *raw {
	t.Helper()
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := &raw{t: t, conn: conn}
	p := r.read()
	if p.Type != pbp.PacketType_HANDSHAKE || p.GetVersion() != 1 {
		t.Fatalf("first packet %v, want a version 1 HANDSHAKE", p)
	}
	var hs pbp.Handshake
	if err := proto.Unmarshal(p.Body, &hs); err != nil {
		t.Fatal(err)
	}
	if len(hs.Seeds) != 8 || hs.GetCommunicationEncoding() != "utf8" {
		t.Fatalf("handshake %v", &hs)
	}
	r.seed = hs.Seeds
	return r
}

func (r *raw) sendBytes(b []byte) {
	r.t.Helper()
	if _, err := r.conn.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) send(t pbp.PacketType, body proto.Message) {
	r.t.Helper()
	b, err := proto.Marshal(body)
	if err != nil {
		r.t.Fatal(err)
	}
	p, _ := proto.Marshal(&pbp.Packet{Type: t, Body: b})
	f, _ := canal.AppendFrame(nil, p)
	r.sendBytes(f)
}

func (r *raw) read() *pbp.Packet {
	r.t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := canal.ReadFrame(r.conn, 1<<30)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	var p pbp.Packet
	if err := proto.Unmarshal(b, &p); err != nil {
		r.t.Fatal(err)
	}
	return &p
}

// ack reads an ACK and returns its code and message.
func (r *raw) ack() (int32, string) {
	r.t.Helper()
	p := r.read()
	if p.Type != pbp.PacketType_ACK {
		r.t.Fatalf("got %s, want ACK", p.Type)
	}
	var a pbp.Ack
	if err := proto.Unmarshal(p.Body, &a); err != nil {
		r.t.Fatal(err)
	}
	return a.GetErrorCode(), a.ErrorMessage
}

func (r *raw) wantAck(code int32, msgPart string) {
	r.t.Helper()
	c, m := r.ack()
	if c != code || !strings.Contains(m, msgPart) {
		r.t.Fatalf("ACK %d %q, want %d with %q", c, m, code, msgPart)
	}
}

// wantClosed checks that the server closed the connection.
func (r *raw) wantClosed() {
	r.t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := canal.ReadFrame(r.conn, 1<<30)
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		r.t.Fatalf("connection not closed: %v", err)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

func (r *raw) auth(user, password string) {
	r.t.Helper()
	r.authWith(&pbp.ClientAuth{Username: user}, password)
	r.wantAck(0, "")
}

// authWith sends a with password scrambled by the server's seed; the
// caller reads the answer.
func (r *raw) authWith(a *pbp.ClientAuth, password string) {
	r.t.Helper()
	pw := []byte(password)
	a.Password = []byte(client.ByteSliceToHexString(client.Scramble411(&pw, &r.seed)))
	r.send(pbp.PacketType_CLIENTAUTHENTICATION, a)
}

func slogFor(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
