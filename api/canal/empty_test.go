package canal_test

import (
	"context"
	"net"
	"testing"
	"time"

	pbe "github.com/withlin/canal-go/protocol/entry"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// TestRowlessTransactionEntries: a transaction of no rows (a snapshot
// chunk that found none) took a seq; a canal client gets its
// TRANSACTIONBEGIN and TRANSACTIONEND entries, each with that seq, where
// canal's own server would drop most such transactions: every seq reaches
// the client, as the native API sends the transaction as a message of
// type EMPTY.
func TestRowlessTransactionEntries(t *testing.T) {
	store := stream.NewStore(stream.Config{})
	store.Subscribe("1")
	at := time.Now().Truncate(time.Second)
	for _, ev := range []*change.Event{
		{Type: change.EventBegin, Seq: 1, Source: "s0", CommitTime: at, Snapshot: true, Pos: change.Position{File: "binlog.000001", Pos: 4}},
		{Type: change.EventCommit, Seq: 1, Source: "s0", CommitTime: at, Snapshot: true, Pos: change.Position{File: "binlog.000001", Pos: 4}},
	} {
		var mark *group.Cursor
		if ev.Type == change.EventCommit {
			mark = &group.Cursor{Seq: 1}
		}
		if err := store.Put(t.Context(), ev, mark); err != nil {
			t.Fatal(err)
		}
	}
	reg := stream.NewRegistry()
	reg.Add(&stream.Served{Name: "shop", Store: store})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := canal.NewServer(canal.Config{Registry: reg, Logger: slogFor(t.Output())})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	defer func() {
		cancel()
		store.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c := connectAt(t, l.Addr().(*net.TCPAddr).Port, 1, "", "")
	_, es := getBatch(t, c, 10, 5000)
	if len(es) != 2 || es[0].typ != pbe.EntryType_TRANSACTIONBEGIN || es[1].typ != pbe.EntryType_TRANSACTIONEND ||
		es[0].seq != 1 || es[1].seq != 1 || es[0].props["source"] != "s0" {
		t.Fatalf("a rowless transaction's entries: %v; want its TRANSACTIONBEGIN and TRANSACTIONEND, seq 1, source s0", es)
	}
}
