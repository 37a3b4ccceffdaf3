package native_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// TestStalledNodeSendsNoMore: a node whose lease runs out while it
// formats a batch bigger than the stream's buffer (a node stopped
// there, whose successor serves the destination when it runs on) sends
// none of that batch: not the parts the buffer would have passed on
// before the lease was looked at again. The stream ends, and the batch
// goes back to the store.
func TestStalledNodeSendsNoMore(t *testing.T) {
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{})
	var checks atomic.Int32
	// Live for the stream's open and its batch's fetch, then not.
	live := func() error {
		if checks.Add(1) > 2 {
			return errors.New("node n1 cannot confirm it still owns destination shop")
		}
		return nil
	}
	reg.Add(&stream.Served{Name: "shop", Store: store, Live: live})
	srv, hc := server(t, reg)
	const n = 200 // about 400 kB of lines, several times the stream's buffer
	for seq := uint64(1); seq <= n; seq++ {
		ev := &change.Event{Type: change.EventDDL, Seq: seq, Source: "s0", CommitTime: time.Unix(1700000000, 0),
			Pos: change.Position{File: "binlog.000001", Pos: uint32(100 * seq)},
			DDL: &change.DDL{Schema: "shop_0", SQL: fmt.Sprintf("CREATE TABLE t%d (id INT) COMMENT '%s'", seq, strings.Repeat("x", 2000)), Tables: []string{fmt.Sprintf("shop_0.t%d", seq)}}}
		if err := store.Put(context.Background(), ev, &group.Cursor{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	s := openStream(t, hc, srv.URL+"/v1/destinations/shop/stream?client-id=c1")
	if s.status != 200 {
		t.Fatalf("stream: %d", s.status)
	}
	got := 0
	for range s.lines { // ends when the server ends the stream
		got++
	}
	if got > 0 {
		t.Fatalf("the stalled node sent %d lines of a batch it held no lease for", got)
	}
	if checks.Load() < 3 {
		t.Fatalf("the lease was looked at %d times: the batch was never formatted", checks.Load())
	}
	if b, err := store.Get(context.Background(), "c1", n, 0); err != nil || len(b.Events) == 0 || b.Events[0].Seq != 1 {
		t.Fatalf("the store hands c1 %d events from seq %d (%v); want the batch back from seq 1", len(b.Events), firstSeq(b), err)
	}
}

func firstSeq(b stream.Batch) uint64 {
	if len(b.Events) == 0 {
		return 0
	}
	return b.Events[0].Seq
}
