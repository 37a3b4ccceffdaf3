package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The workload every env holds, as the merged stream shows it.
const (
	wantTxs  = 6 + 30 + 4            // 6 CREATE TABLEs, 30 one-row inserts, 4 more
	wantRows = 30 + 3 + 2500 + 2 + 1 // rows changed
)

// env is a destination of three MariaDB shards merged into a store and
// served by the native API on a loopback HTTP server.
type env struct {
	url   string
	srv   *httptest.Server
	store *stream.Store
	hc    *http.Client

	mu    sync.Mutex
	opens map[string]int // streams opened per client id
	conns []net.Conn     // the client side of the connections made
}

// start starts the shards, writes the workload, runs the destination from
// the shards' earliest binlog into a store the client ids are subscribed
// to, and serves it.
func start(t *testing.T, clientIDs ...string) *env {
	t.Helper()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(sec int) string {
		return fmt.Sprintf("SET timestamp = %d", base.Add(time.Duration(sec)*time.Second).Unix())
	}
	srvs := mysqltest.StartN(t, 3)
	for i, s := range srvs {
		s.Exec(t, at(0), fmt.Sprintf("CREATE DATABASE shop_%d", i), fmt.Sprintf("CREATE DATABASE shop_%d", i+3),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(20))", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(20))", i+3))
	}
	for k := 0; k < 30; k++ {
		srv := k % 3
		srvs[srv].Exec(t, at(1+k/2), fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'one')", srv+3*(k%2), k+1))
	}
	// Three messages of one seq: shop_0, shop_3, shop_0 again.
	srvs[0].Exec(t, at(20), "BEGIN", "INSERT INTO shop_0.orders VALUES (100, 'multi')",
		"INSERT INTO shop_3.orders VALUES (101, 'multi')", "INSERT INTO shop_0.orders VALUES (102, 'multi')", "COMMIT")
	// 2,500 rows: three messages of one seq (1,000 rows at most each).
	srvs[1].Exec(t, at(21), "SET max_recursive_iterations = 1000000",
		"INSERT INTO shop_1.orders (id, note) WITH RECURSIVE s(n) AS (SELECT 1000 UNION ALL SELECT n+1 FROM s WHERE n < 3499) SELECT n, 'big' FROM s")
	srvs[2].Exec(t, at(22), "UPDATE shop_2.orders SET note = 'updated' WHERE id IN (3, 9)")
	srvs[0].Exec(t, at(23), "DELETE FROM shop_0.orders WHERE id = 1")

	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Ordering: "strict",
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		ShardDDL:  spec.ShardDDLPassthrough, // the tests count the shards' CREATE TABLEs
		Heartbeat: spec.Duration(100 * time.Millisecond)}
	for i, srv := range srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: srv.Addr(),
			Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := group.New(group.Config{Spec: &ds, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	store := stream.NewStore(stream.Config{})
	for _, id := range clientIDs {
		store.Subscribe(id) // before anything is acked, so each sees all
	}
	reg := stream.NewRegistry()
	reg.Add(&stream.Served{Name: "shop", Store: store, Stats: d.Stats})

	e := &env{store: store, opens: map[string]int{}}
	e.hc = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			e.mu.Lock()
			e.conns = append(e.conns, conn)
			e.mu.Unlock()
		}
		return conn, err
	}}}
	h := native.NewHandler(reg, log)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stream") {
			e.mu.Lock()
			e.opens[r.URL.Query().Get("client-id")]++
			e.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	e.url = e.srv.URL
	t.Cleanup(func() {
		e.hc.CloseIdleConnections()
		e.srv.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.RunInto(ctx, store) }()
	t.Cleanup(func() {
		cancel()
		store.Close() // ends open streams
		if err := <-done; err != nil && !errors.Is(err, stream.ErrClosed) {
			t.Errorf("destination: %v", err)
		}
	})
	return e
}

func (e *env) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(e.url, append([]client.Option{client.WithHTTPClient(e.hc), client.WithBackoff(20*time.Millisecond, 200*time.Millisecond),
		client.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cut kills every connection between the client and the server, on both
// sides: what the client's socket held unread is lost.
func (e *env) cut() {
	e.mu.Lock()
	conns := e.conns
	e.conns = nil
	e.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	e.srv.CloseClientConnections()
}

func (e *env) streamsOpened(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.opens[id]
}

// consume streams as id until every row came and then 1.5 s more (for
// duplicates to show and the last transaction's checkpoint and ack to
// pass); hook, if set, sees each message after it is recorded.
func consume(t *testing.T, e *env, id string, hook func(n int, m client.Message), opts ...client.Option) []client.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var got []client.Message
	rows := 0
	err := e.client(t, opts...).Stream(ctx, "shop", id, func(m client.Message) error {
		got = append(got, m)
		rows += len(m.Data)
		if hook != nil {
			hook(len(got), m)
		}
		if rows == wantRows {
			time.AfterFunc(1500*time.Millisecond, cancel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("stream %s: %v", id, err)
	}
	if rows != wantRows {
		t.Fatalf("client %s got %d rows in %d messages, want %d rows", id, rows, len(got), wantRows)
	}
	return got
}

// key is a message without its emit time (and Raw, the JSON line when
// there is one).
func key(m client.Message) string {
	data, _ := json.Marshal(m.Data)
	old, _ := json.Marshal(m.Old)
	types, _ := json.Marshal(m.SQLType)
	mysqlTypes, _ := json.Marshal(m.MysqlType)
	return fmt.Sprintf("id=%d seq=%d %s.%s from %s %s.%s at %s gtid %q %s ddl=%v sql=%q es=%d pk=%q types=%s %s data=%s old=%s",
		m.ID, m.Seq, m.Database, m.Table, m.Source, m.OriginDatabase, m.OriginTable, m.Position, m.GTID, m.Type, m.IsDdl, m.SQL,
		m.Es, m.PkNames, types, mysqlTypes, data, old)
}

// sameStream fails the test unless got and want are the same messages.
func sameStream(t *testing.T, got, want []client.Message, what string) {
	t.Helper()
	kg, kw := keys(got), keys(want)
	if slices.Equal(kg, kw) {
		return
	}
	for i := range min(len(kg), len(kw)) {
		if kg[i] != kw[i] {
			t.Errorf("%s: message %d:\n got %.300s\nwant %.300s", what, i, kg[i], kw[i])
			break
		}
	}
	t.Fatalf("%s: %d messages, want the same %d", what, len(kg), len(kw))
}

func keys(ms []client.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = key(m)
	}
	return out
}

// checkStream checks the merged stream: dense seqs in order, a
// transaction's messages together, commit times in order, every row once.
func checkStream(t *testing.T, ms []client.Message) {
	t.Helper()
	var seq uint64
	var es int64
	perSeq := map[uint64]int{}
	ids := map[string]int{}
	for i, m := range ms {
		if m.Seq != seq && m.Seq != seq+1 {
			t.Fatalf("message %d has seq %d after seq %d", i, m.Seq, seq)
		}
		seq = m.Seq
		if m.Es < es {
			t.Errorf("message %d (seq %d) committed at %d, before its predecessor at %d", i, m.Seq, m.Es, es)
		}
		es = m.Es
		perSeq[m.Seq]++
		if !m.IsDdl && (m.Database != "shop" || m.Table != "orders") {
			t.Errorf("seq %d is %s.%s, want the logical shop.orders", m.Seq, m.Database, m.Table)
		}
		for _, row := range m.Data {
			ids[fmt.Sprintf("%s.%s:%s:%s", m.OriginDatabase, m.OriginTable, m.Type, *row["id"])]++
		}
	}
	if seq != wantTxs {
		t.Errorf("last seq %d, want %d", seq, wantTxs)
	}
	if len(ids) != wantRows {
		t.Errorf("%d distinct row changes, want %d", len(ids), wantRows)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("row change %s came %d times", id, n)
		}
	}
	var multi []int
	for _, n := range perSeq {
		if n > 1 {
			multi = append(multi, n)
		}
	}
	slices.Sort(multi)
	if !slices.Equal(multi, []int{3, 3}) {
		t.Errorf("transactions of several messages have %v messages, want [3 3]", multi)
	}
}

// TestStreamTwoClients: two client ids stream the destination at once,
// each receives every row of the merged stream in seq order, and both see
// the same messages, one in braid's binary encoding and the other as JSON
// lines; their acks drain the store; the list and state endpoints show the
// destination, its sources and both consumers' cursors.
func TestStreamTwoClients(t *testing.T) {
	e := start(t, "a", "b")
	c := e.client(t)
	names, err := c.Destinations(t.Context())
	if err != nil || !slices.Equal(names, []string{"shop"}) {
		t.Fatalf("destinations %v, %v", names, err)
	}
	var wg sync.WaitGroup
	var a, b []client.Message
	wg.Go(func() { a = consume(t, e, "a", nil) })
	wg.Go(func() { b = consume(t, e, "b", nil, client.WithJSONLines()) })
	wg.Wait()
	if t.Failed() {
		return
	}
	checkStream(t, a)
	sameStream(t, a, b, "client a (binary) and client b (JSON lines)")
	if e.streamsOpened("a") != 1 || e.streamsOpened("b") != 1 {
		t.Errorf("streams opened: %v", e.opens)
	}
	// a read braid's binary encoding, b the JSON lines: the same messages.
	if !strings.HasPrefix(string(b[len(b)-1].Raw), `{"id":`) || a[len(a)-1].Raw != nil {
		t.Errorf("raw lines %s (JSON) and %s (binary, want none)", b[len(b)-1].Raw, a[len(a)-1].Raw)
	}

	var st *client.State
	retry.Until(t, 5*time.Second, func() error {
		if st, err = c.State(t.Context(), "shop"); err != nil {
			t.Fatal(err)
		}
		if st.Seq != wantTxs {
			return fmt.Errorf("state at seq %d, want %d", st.Seq, wantTxs)
		}
		return nil
	})
	if st.Name != "shop" || st.Seq != wantTxs || len(st.Sources) != 3 {
		t.Fatalf("state %+v", st)
	}
	for _, s := range st.Sources {
		if s.Pos == "" || s.LagMs == nil || *s.LagMs < int64(50*time.Minute/time.Millisecond) || s.Waiting {
			t.Errorf("source %+v: want a position and about an hour of lag (the workload's commit times)", s)
		}
	}
	if st.Store.Events != 0 {
		t.Errorf("store holds %d events after both clients acked everything", st.Store.Events)
	}
	if len(st.Clients) != 2 {
		t.Fatalf("clients %+v", st.Clients)
	}
	for _, cl := range st.Clients {
		if cl.Streaming || cl.AckedSeq != wantTxs || cl.PendingBatches != 0 || cl.Cursor == nil || cl.Cursor.Seq != wantTxs || len(cl.Cursor.Sources) != 3 {
			t.Errorf("client %+v (cursor %+v)", cl, cl.Cursor)
		}
	}
}

// TestReconnect: the connections between client and server are killed
// mid-stream, three times, each time on a new connection as soon as it
// brought something new: the client reconnects, resumes after its last
// ack, drops what it handled before (whole transactions by seq, the first
// messages of a transaction cut short by count) and hands handle exactly
// the stream another client id got without interruption, in braid's binary
// encoding and as JSON lines. The client reads 4 KiB at a time, so that a
// cut loses what it had not read (and long messages span reads).
func TestReconnect(t *testing.T) {
	client.SetStreamBuffer(t, 4<<10)
	e := start(t, "ref", "k", "kj")
	ref := consume(t, e, "ref", nil)
	checkStream(t, ref)

	for _, enc := range []struct {
		id   string
		opts []client.Option
	}{{"k", nil}, {"kj", []client.Option{client.WithJSONLines()}}} {
		kills, killedOn := 0, 0
		got := consume(t, e, enc.id, func(n int, m client.Message) {
			if conn := e.streamsOpened(enc.id); kills < 3 && conn != killedOn && n >= 5 {
				kills++
				killedOn = conn
				e.cut()
			}
		}, enc.opts...)
		if kills < 2 {
			t.Fatalf("client %s: %d kills, want at least 2", enc.id, kills)
		}
		if n := e.streamsOpened(enc.id); n < kills+1 {
			t.Errorf("client %s opened %d streams after %d kills", enc.id, n, kills)
		}
		t.Logf("client %s: %d kills, %d streams opened", enc.id, kills, e.streamsOpened(enc.id))
		sameStream(t, got, ref, "client "+enc.id+" after reconnects")
	}
	if st := e.store.Stats(); st.Events != 0 {
		t.Errorf("store holds %d events after both clients acked everything", st.Events)
	}
}

// TestRefusals: a second stream of a client id already streaming is
// refused (409, ErrBusy from the Go client), an unknown destination is 404
// and bad parameters 400, with the server's explanation.
func TestRefusals(t *testing.T) {
	e := start(t, "x")
	c := e.client(t)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		first <- c.Stream(ctx, "shop", "x", func(client.Message) error {
			once.Do(func() { close(started) })
			return nil
		})
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no message within 30s")
	}
	err := c.Stream(t.Context(), "shop", "x", func(client.Message) error { return nil })
	if !errors.Is(err, client.ErrBusy) || !strings.Contains(err.Error(), "one stream per client id") {
		t.Errorf("second stream of x: %v, want ErrBusy", err)
	}
	resp, err := e.hc.Get(e.url + "/v1/destinations/shop/stream?client-id=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("raw second stream: %d, want 409", resp.StatusCode)
	}
	cancel()
	if err := <-first; err != nil {
		t.Errorf("first stream: %v", err)
	}

	var se *client.Error
	err = c.Stream(t.Context(), "nope", "x", func(client.Message) error { return nil })
	if !errors.As(err, &se) || se.Status != 404 || !strings.Contains(se.Message, "serves [shop]") {
		t.Errorf("unknown destination: %v", err)
	}
	if _, err := c.State(t.Context(), "nope"); !errors.As(err, &se) || se.Status != 404 {
		t.Errorf("state of an unknown destination: %v", err)
	}
	for _, q := range []string{"", "client-id=x&after=minus", "client-id=x&checkpoint=2"} {
		resp, err := e.hc.Get(e.url + "/v1/destinations/shop/stream?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("stream?%s: %d, want 400", q, resp.StatusCode)
		}
	}
	if err := c.Stream(t.Context(), "shop", "", nil); err == nil {
		t.Error("a stream without a client id started")
	}
	if _, err := client.New("127.0.0.1:8081"); err == nil {
		t.Error("a base URL without a scheme was accepted")
	}

	// handle's error ends the stream and is returned.
	boom := errors.New("boom")
	if err := c.Stream(t.Context(), "shop", "y", func(client.Message) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("stream with a failing handle: %v", err)
	}
}

// TestStreamViews: a client id streaming with StreamViews sees the same
// messages as one streaming with Stream, and each view's values, read by
// row and column, are the Message's; its acks go out by bytes handled
// (no interval, no message count) while it streams.
func TestStreamViews(t *testing.T) {
	e := start(t, "maps", "views")
	ref := consume(t, e, "maps", nil)
	checkStream(t, ref)

	c, err := client.New(e.url, client.WithHTTPClient(e.hc), client.WithAckInterval(time.Hour),
		client.WithAckMessages(1<<30), client.WithAckBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var got []client.Message
	rows, ackedWhileStreaming := 0, false
	err = c.StreamViews(ctx, "shop", "views", func(v *client.MessageView) error {
		m := v.Message()
		got = append(got, m)
		if v.Rows() != len(m.Data) || v.OldRows() != len(m.Old) {
			t.Fatalf("seq %d: %d rows and %d old in the view, %d and %d in the message", v.Seq, v.Rows(), v.OldRows(), len(m.Data), len(m.Old))
		}
		for r := range v.Rows() {
			if len(m.Data[r]) != v.Columns() {
				t.Fatalf("seq %d row %d: %d columns in the message, %d in the view", v.Seq, r, len(m.Data[r]), v.Columns())
			}
			for col := range v.Columns() {
				val, ok := v.Value(r, col)
				want := m.Data[r][v.Column(col)]
				if ok != (want != nil) || ok && string(val) != *want {
					t.Fatalf("seq %d row %d column %s: %q %v in the view, %v in the message", v.Seq, r, v.Column(col), val, ok, want)
				}
				if r < v.OldRows() {
					old, ok := v.Old(r, col)
					want, changed := m.Old[r][v.Column(col)]
					if v.Changed(r, col) != changed || ok != (want != nil) || ok && string(old) != *want {
						t.Fatalf("seq %d old row %d column %s: %q %v in the view, %v in the message", v.Seq, r, v.Column(col), old, ok, want)
					}
				}
			}
		}
		rows += v.Rows()
		if v.Seq == wantTxs && !ackedWhileStreaming {
			// Everything before the previous transaction was acked by
			// bytes, while this one is still being handled.
			ackedWhileStreaming = retry.Wait(ctx, 10*time.Second, func() error {
				st, err := c.State(ctx, "shop")
				if err != nil {
					return err
				}
				if n := ackedSeq(st, "views"); n < wantTxs-2 {
					return fmt.Errorf("views acked %d", n)
				}
				return nil
			}) == nil
		}
		if rows == wantRows {
			time.AfterFunc(1500*time.Millisecond, cancel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ka, kb := keys(ref), keys(got); !slices.Equal(ka, kb) {
		t.Errorf("Stream and StreamViews got different streams: %d and %d messages", len(ka), len(kb))
	}
	if !ackedWhileStreaming {
		t.Error("nothing was acked while streaming, with an ack due after every byte")
	}
}

// ackedSeq is client id's acked seq in st, 0 if st does not show it.
func ackedSeq(st *client.State, id string) uint64 {
	for _, cl := range st.Clients {
		if cl.ID == id {
			return cl.AckedSeq
		}
	}
	return 0
}
