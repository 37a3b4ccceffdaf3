package native_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server serves the native API over reg on a loopback HTTP server.
func server(t *testing.T, reg *stream.Registry) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewServer(native.NewHandler(reg, slog.New(slog.NewTextHandler(t.Output(), nil))))
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		srv.Close()
	})
	return srv, hc
}

// ddl is transaction seq as one DDL event: a line of its own.
func ddl(seq uint64) *change.Event {
	return &change.Event{Type: change.EventDDL, Seq: seq, Source: "s0", CommitTime: time.Unix(1700000000, 0),
		Pos: change.Position{File: "binlog.000001", Pos: uint32(100 * seq)},
		DDL: &change.DDL{Schema: "shop_0", SQL: fmt.Sprintf("CREATE TABLE t%d (id INT)", seq), Tables: []string{fmt.Sprintf("shop_0.t%d", seq)}}}
}

func put(t *testing.T, s *stream.Store, seqs ...uint64) {
	t.Helper()
	for _, q := range seqs {
		if err := s.Put(context.Background(), ddl(q), &group.Cursor{Seq: q}); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, hc *http.Client, url string, out any) int {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

func post(t *testing.T, hc *http.Client, url string, out any) int {
	t.Helper()
	resp, err := hc.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp.StatusCode
}

// stream is an open stream request, its lines on a channel.
type lineStream struct {
	status int
	lines  chan string
	cancel context.CancelFunc
	body   io.ReadCloser
}

func openStream(t *testing.T, hc *http.Client, url string) *lineStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &lineStream{status: resp.StatusCode, lines: make(chan string, 100), cancel: cancel, body: resp.Body}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *lineStream) close() {
	s.cancel()
	s.body.Close()
	for range s.lines {
	}
}

// next returns the next line, failing after 5 s.
func (s *lineStream) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatal("stream ended")
		}
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no line within 5s")
	}
	return ""
}

// seqs reads n message lines (skipping checkpoints) and returns their seqs.
func (s *lineStream) seqs(t *testing.T, n int) []uint64 {
	t.Helper()
	var out []uint64
	for len(out) < n {
		l := s.next(t)
		var m struct {
			Seq        uint64  `json:"seq"`
			Checkpoint *uint64 `json:"checkpoint"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if m.Checkpoint == nil {
			out = append(out, m.Seq)
		}
	}
	return out
}

// TestListAndState: the list names every destination served; the state
// shows the merge's stats (a source's snapshot progress only where it has
// one), the store's and the clients'.
func TestListAndState(t *testing.T) {
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{})
	commit := time.Now().Add(-2 * time.Second)
	reg.Add(&stream.Served{Name: "shop", Store: store, Stats: func() group.Stats {
		return group.Stats{Seq: 7, Late: 1, Sources: []group.SourceStats{
			{Name: "a", Pos: change.Position{File: "binlog.000002", Pos: 42}, LastCommit: commit, LastSeen: time.Now(),
				Snapshot: &group.SnapshotStats{Tables: 6, TablesDone: 3, Rows: 120000, EstimatedRows: 660000,
					RowsPerSecond: 45000, ETA: 12 * time.Second}},
			{Name: "b", Waiting: true}}}
	}})
	reg.Add(&stream.Served{Name: "other", Store: stream.NewStore(stream.Config{})})
	srv, hc := server(t, reg)

	var names []string
	if st := get(t, hc, srv.URL+"/v1/destinations", &names); st != 200 || strings.Join(names, ",") != "other,shop" {
		t.Fatalf("list: %d %v", st, names)
	}
	put(t, store, 1, 2)
	s := openStream(t, hc, srv.URL+"/v1/destinations/shop/stream?client-id=c1")
	s.seqs(t, 2)
	var ack wire.AckResult
	if st := post(t, hc, srv.URL+"/v1/destinations/shop/ack?client-id=c1&seq=2", &ack); st != 200 || ack.Acked != 1 || ack.Seq != 2 {
		t.Fatalf("ack: %d %+v", st, ack)
	}
	var state wire.State
	if st := get(t, hc, srv.URL+"/v1/destinations/shop", &state); st != 200 {
		t.Fatalf("state: %d", st)
	}
	if state.Name != "shop" || state.Seq != 7 || state.Late != 1 || len(state.Sources) != 2 {
		t.Fatalf("state %+v", state)
	}
	a := state.Sources[0]
	if a.Pos != "binlog.000002:42" || a.LagMs == nil || *a.LagMs < 1500 || a.Waiting || !state.Sources[1].Waiting {
		t.Errorf("sources %+v", state.Sources)
	}
	wantSnap := wire.SnapshotState{Tables: 6, TablesDone: 3, Rows: 120000, EstimatedRows: 660000, RowsPerSecond: 45000, EtaSeconds: 12}
	if a.Snapshot == nil || *a.Snapshot != wantSnap {
		t.Errorf("source a's snapshot %+v, want %+v", a.Snapshot, wantSnap)
	}
	if state.Sources[1].Snapshot != nil {
		t.Errorf("source b, without snapshot stats, shows a snapshot: %+v", state.Sources[1].Snapshot)
	}
	if len(state.Clients) != 1 || state.Clients[0].ID != "c1" || !state.Clients[0].Streaming || state.Clients[0].AckedSeq != 2 {
		t.Errorf("clients %+v", state.Clients)
	}
	if state.Store.Events != 0 || state.Store.PeakBytes == 0 {
		t.Errorf("store %+v: the acked events should be gone", state.Store)
	}

	// A client id of another protocol (a canal client's) shows too, with
	// what the store holds for it.
	store.Subscribe("7")
	put(t, store, 3, 2)
	b, err := store.Get(t.Context(), "7", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	get(t, hc, srv.URL+"/v1/destinations/shop", &state)
	if len(state.Clients) != 2 || state.Clients[0].ID != "7" || state.Clients[0].Streaming ||
		state.Clients[0].PendingBatches != 1 || state.Clients[0].Unacked != 2 {
		t.Errorf("clients with a canal client that got 1 of 2 events and acked none: %+v", state.Clients)
	}
	if err := store.Ack("7", b.ID); err != nil {
		t.Fatal(err)
	}
	var other wire.State
	get(t, hc, srv.URL+"/v1/destinations/other", &other)
	if other.Name != "other" || len(other.Sources) != 0 || other.Stats != nil {
		t.Errorf("other %+v", other)
	}
}

// TestBadRequests: unknown destinations are 404 naming the served ones,
// bad parameters 400, each with a JSON error.
func TestBadRequests(t *testing.T) {
	reg := stream.NewRegistry()
	reg.Add(&stream.Served{Name: "shop", Store: stream.NewStore(stream.Config{})})
	srv, hc := server(t, reg)
	d := srv.URL + "/v1/destinations/"
	for _, c := range []struct {
		method, url string
		status      int
		says        string
	}{
		{"GET", d + "nope", 404, `unknown destination "nope": this node serves [shop]`},
		{"GET", d + "nope/stream?client-id=a", 404, "serves [shop]"},
		{"POST", d + "nope/ack?client-id=a&seq=1", 404, "serves [shop]"},
		{"GET", d + "shop/stream", 400, "missing parameter client-id"},
		{"GET", d + "shop/stream?client-id=a&after=-1", 400, "parameter after"},
		{"GET", d + "shop/stream?client-id=a&after=x", 400, "parameter after"},
		{"GET", d + "shop/stream?client-id=a&checkpoint=maybe", 400, "parameter checkpoint"},
		{"GET", d + "shop/stream?client-id=a%00b", 400, "control character"},
		{"GET", d + "shop/stream?client-id=" + strings.Repeat("x", 200), 400, "at most 128"},
		{"POST", d + "shop/ack?client-id=a", 400, "missing parameter seq"},
		{"POST", d + "shop/ack?client-id=a&seq=1.5", 400, "parameter seq"},
		{"POST", d + "shop/ack?seq=1", 400, "missing parameter client-id"},
		{"POST", d + "shop/ack?client-id=never&seq=1", 404, `client id "never" has not streamed`},
		{"GET", srv.URL + "/v2/whatever", 404, "no such endpoint"},
	} {
		req, _ := http.NewRequest(c.method, c.url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error string }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.status || err != nil || !strings.Contains(body.Error, c.says) ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %q (%v), want %d saying %q", c.method, c.url, resp.StatusCode, body.Error, err, c.status, c.says)
		}
	}
	resp, err := hc.Post(d+"shop/stream?client-id=a", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST stream: %d, want 405", resp.StatusCode)
	}
}

// TestAckRollbackResume: acks confirm the store batches at or below the
// seq acked; a new stream of the client id gets again what was not acked
// (and nothing acked), a second concurrent one is refused, and after=SEQ
// skips (and acks) what the client says it has.
func TestAckRollbackResume(t *testing.T) {
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{})
	store.Subscribe("c")
	store.Subscribe("d")
	reg.Add(&stream.Served{Name: "shop", Store: store})
	srv, hc := server(t, reg)
	u := srv.URL + "/v1/destinations/shop/"

	put(t, store, 1, 2, 3) // one batch
	s := openStream(t, hc, u+"stream?client-id=c&checkpoint=true")
	if s.status != 200 {
		t.Fatalf("stream: %d", s.status)
	}
	if got := fmt.Sprint(s.seqs(t, 3)); got != "[1 2 3]" {
		t.Fatalf("seqs %s", got)
	}
	if l := s.next(t); l != `{"checkpoint":3}` {
		t.Fatalf("want a checkpoint when idle, got %s", l)
	}
	put(t, store, 4, 5) // a second batch
	if got := fmt.Sprint(s.seqs(t, 2)); got != "[4 5]" {
		t.Fatalf("seqs %s", got)
	}
	if busy := openStream(t, hc, u+"stream?client-id=c"); busy.status != http.StatusConflict {
		t.Fatalf("second stream of c: %d, want 409", busy.status)
	}
	var ack wire.AckResult
	// 4 and 5 went out in one batch, or in two if the stream read between
	// the two Puts: acking 4 confirms the batches at or below it, and the
	// one holding 5 stays pending.
	post(t, hc, u+"ack?client-id=c&seq=4", &ack)
	if ack.Pending != 1 || ack.Acked < 1 || ack.Acked > 2 {
		t.Fatalf("ack 4: %+v", ack)
	}
	if m, want := store.Mark("c"), uint64(2+ack.Acked); m == nil || m.Seq != want {
		t.Errorf("mark %v, want %d", m, want)
	}
	s.close()

	// A new stream rolls back what was not acked (5, and 4 when it shared
	// 5's batch); 1-3 do not come again.
	var s2 *lineStream
	retry.Until(t, 5*time.Second, func() error {
		s2 = openStream(t, hc, u+"stream?client-id=c")
		if s2.status != 200 {
			s2.close()
			return fmt.Errorf("reopening c: %d", s2.status)
		}
		return nil
	})
	// The server skips what c acked (seq 4) even with no after given.
	if got := fmt.Sprint(s2.seqs(t, 1)); got != "[5]" {
		t.Fatalf("after reopening: %s, want [5]", got)
	}
	post(t, hc, u+"ack?client-id=c&seq=5", &ack)
	if ack.Acked != 1 || ack.Pending != 0 || ack.Seq != 5 {
		t.Fatalf("ack 5: %+v", ack)
	}
	// An ack above what c was sent is refused and changes nothing: c still
	// gets the next transaction.
	var refused wire.ErrorBody
	if st := post(t, hc, u+"ack?client-id=c&seq=18446744073709551615", &refused); st != http.StatusBadRequest || !strings.Contains(refused.Error, "above the highest seq sent") {
		t.Fatalf("ack of 2^64-1: %d %+v, want 400", st, refused)
	}
	put(t, store, 6)
	if got := fmt.Sprint(s2.seqs(t, 1)); got != "[6]" {
		t.Fatalf("after a refused ack: %s, want [6]", got)
	}
	post(t, hc, u+"ack?client-id=c&seq=6", &ack)

	// d says it has everything up to 4: it gets 5, and its batches below
	// come acked.
	s3 := openStream(t, hc, u+"stream?client-id=d&after=4")
	if got := fmt.Sprint(s3.seqs(t, 2)); got != "[5 6]" {
		t.Fatalf("d after=4: %s", got)
	}
	post(t, hc, u+"ack?client-id=d&seq=6", &ack)
	if st := store.Stats(); st.Events != 0 {
		t.Errorf("store holds %d events after every client acked all", st.Events)
	}
}
