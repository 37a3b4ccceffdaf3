package native_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/stream"
)

// TestInternalErrorLeaksNothing: a 500 answers a generic line and an id;
// the detail (here a Raft error naming a path and a batch) goes to the
// log under that id only.
func TestInternalErrorLeaksNothing(t *testing.T) {
	const secret = "raft: apply failed: /var/lib/braid/raft.db: batch 41 of client sink:copy"
	reg := stream.NewRegistry()
	reg.Add(&stream.Served{Name: "shop", Store: stream.NewStore(stream.Config{}),
		Decide: func(context.Context, int, group.DecisionAction) error { return errors.New(secret) }})
	var logs logline.Buffer
	srv := httptest.NewServer(native.NewHandler(reg, slog.New(slog.NewTextHandler(&logs, nil))))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()

	var body wire.ErrorBody
	if st := post(t, hc, srv.URL+"/v1/destinations/shop/ddl/1?action=skip", &body); st != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", st)
	}
	if body.ID == "" || strings.Contains(body.Error, "raft") || strings.Contains(body.Error, "batch") || strings.Contains(body.Error, "/var") {
		t.Errorf("the 500 says %+v: want a generic line and an id", body)
	}
	if l := logs.String(); !strings.Contains(l, "error_id="+body.ID) || !strings.Contains(l, "batch 41") {
		t.Errorf("the log has no detail under error_id=%s:\n%s", body.ID, l)
	}
}

// TestVoidAckIs409: an ack of batches that were taken back meanwhile (the
// client id read through another protocol, say) is the client's
// conflict, answered 409 without the store's batch numbers; before, it
// was a 500 naming them.
func TestVoidAckIs409(t *testing.T) {
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{})
	reg.Add(&stream.Served{Name: "shop", Store: store})
	srv, hc := server(t, reg)
	put(t, store, 1, 2)
	s := openStream(t, hc, srv.URL+"/v1/destinations/shop/stream?client-id=c1")
	s.seqs(t, 2)
	s.close()
	// Another reader of c1 takes everything back and reads it again.
	waitStreamsEnd(t, hc, srv.URL)
	if err := store.Rollback("c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(context.Background(), "c1", 10, 0); err != nil {
		t.Fatal(err)
	}
	var body wire.ErrorBody
	if st := post(t, hc, srv.URL+"/v1/destinations/shop/ack?client-id=c1&seq=2", &body); st != http.StatusConflict {
		t.Fatalf("ack of void batches: %d %+v, want 409", st, body)
	}
	if strings.Contains(body.Error, "batch") {
		t.Errorf("the answer names batches: %q", body.Error)
	}
}

// refusal opens url and returns its status and error; a stream that
// opens (200) is closed at once.
func refusal(t *testing.T, hc *http.Client, method, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	var body wire.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode, body.Error
}

// TestSinkClientIDRefused: no HTTP caller streams, acks or opens as a
// sink's client id; the store never hears of it.
func TestSinkClientIDRefused(t *testing.T) {
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{})
	reg.Add(&stream.Served{Name: "shop", Store: store})
	srv, hc := server(t, reg)
	put(t, store, 1)
	if st, msg := refusal(t, hc, "GET", srv.URL+"/v1/destinations/shop/stream?client-id=sink:copy"); st != http.StatusForbidden || !strings.Contains(msg, `prefix "sink:" is reserved`) {
		t.Errorf("stream as sink:copy: %d %q, want 403 saying the prefix is reserved", st, msg)
	}
	if st, msg := refusal(t, hc, "POST", srv.URL+"/v1/destinations/shop/ack?client-id=sink:copy&seq=1"); st != http.StatusForbidden {
		t.Errorf("ack as sink:copy: %d %q, want 403", st, msg)
	}
	if n := len(store.Clients()); n != 0 {
		t.Errorf("the store has %d clients", n)
	}
}

// TestClientIDCapHTTP: past the cap a new client id is answered 429 and
// leaves nothing behind, in the store or in the handler.
func TestClientIDCapHTTP(t *testing.T) {
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{MaxClientsPerOwner: 3})
	reg.Add(&stream.Served{Name: "shop", Store: store})
	srv, hc := server(t, reg)
	for i := range 3 {
		s := openStream(t, hc, srv.URL+fmt.Sprintf("/v1/destinations/shop/stream?client-id=c%d", i))
		if s.status != 200 {
			t.Fatalf("client c%d: %d", i, s.status)
		}
		s.close()
	}
	for i := 3; i < 200; i++ {
		st, msg := refusal(t, hc, "GET", srv.URL+fmt.Sprintf("/v1/destinations/shop/stream?client-id=c%d", i))
		if st != http.StatusTooManyRequests || !strings.Contains(msg, "braid consumer drop") {
			t.Fatalf("client c%d past the cap: %d %q, want 429 naming braid consumer drop", i, st, msg)
		}
	}
	var cs []wire.ClientState
	if get(t, hc, srv.URL+"/v1/destinations/shop/consumers", &cs); len(cs) != 3 {
		t.Errorf("consumers %+v, want 3", cs)
	}
	if got := native.ClientStates(srv.Config.Handler); got != 3 {
		t.Errorf("the handler keeps %d client states, want 3", got)
	}
}

// TestHandlerForgetsExpiredIDs: the handler's per-client state follows
// the store: once the store has let client ids go (expired, dropped,
// unsubscribed over canal), the handler forgets them too, so its memory
// is bounded as the store's is.
func TestHandlerForgetsExpiredIDs(t *testing.T) {
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{MaxClientsPerOwner: 1000})
	reg.Add(&stream.Served{Name: "shop", Store: store})
	srv, hc := server(t, reg)
	open := func(id string) {
		t.Helper()
		if st, msg := refusal(t, hc, "GET", srv.URL+"/v1/destinations/shop/stream?client-id="+id); st != http.StatusOK {
			t.Fatalf("client %s: %d %s", id, st, msg)
		}
	}
	for i := range 300 {
		open(fmt.Sprint("old-", i))
	}
	waitStreamsEnd(t, hc, srv.URL)
	for i := range 300 {
		store.Unsubscribe(fmt.Sprint("old-", i)) // as Maintain expires them
	}
	for i := range 300 {
		open(fmt.Sprint("new-", i))
	}
	if n := native.ClientStates(srv.Config.Handler); n > 320 {
		t.Errorf("the handler keeps %d client states for the store's 300", n)
	}
}

// waitStreamsEnd waits until the handler at base has seen every stream
// of shop end: none of its client ids shows as streaming.
func waitStreamsEnd(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	retry.Until(t, 5*time.Second, func() error {
		var cs []wire.ClientState
		if st := get(t, hc, base+"/v1/destinations/shop/consumers", &cs); st != http.StatusOK {
			return fmt.Errorf("GET consumers: %d", st)
		}
		for _, c := range cs {
			if c.Streaming {
				return fmt.Errorf("client %s still streaming", c.ID)
			}
		}
		return nil
	})
}
