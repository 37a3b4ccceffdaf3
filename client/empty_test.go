package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestRowlessTransactionReachesTheClient: a table of exactly two
// snapshot chunks (snapshot_chunk_rows 5, 10 rows) makes a third chunk
// read that finds no rows, a transaction of no rows that took a seq. A
// native client is handed a message of it (type EMPTY, no data, its seq,
// source and snapshot flag), in JSON lines and in the binary encoding
// alike, so that the seqs it sees are dense: 1 to the head, none lost
// from its view.
func TestRowlessTransactionReachesTheClient(t *testing.T) {
	if client.TypeEmpty != flat.TypeEmpty {
		t.Fatalf("client.TypeEmpty %q, the server writes %q", client.TypeEmpty, flat.TypeEmpty)
	}
	srv := mysqltest.Start(t)
	var rows []string
	for i := 1; i <= 10; i++ {
		rows = append(rows, fmt.Sprintf("(%d, 'pre')", i))
	}
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES "+strings.Join(rows, ","))
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_0\.orders`}, Snapshot: spec.SnapshotInitial, SnapshotChunkRows: 5,
		ShardDDL: spec.ShardDDLPassthrough, Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources: []spec.Source{{Name: "s0", Address: srv.Addr()}}}
	ds = ds.WithDefaults()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: &ds, Serve: true, Keep: &group.MemKeeper{}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reg := stream.NewRegistry()
	reg.Add(p.Served(nil))
	hs := httptest.NewServer(native.NewHandler(reg, log))
	defer hs.Close()
	// A live change after the snapshot (once it is done: a row written
	// before the last chunk is read is in that chunk): the rowless chunk
	// is not the last transaction, so nothing but its own message says it
	// was there.
	retry.Until(t, 2*time.Minute, func() error {
		if sn := p.Dest.Stats().Sources[0].Snapshot; sn == nil || !sn.Done {
			return fmt.Errorf("the snapshot is not done: %+v", sn)
		}
		return nil
	})
	// An UPDATE, not an INSERT of id 11: a client served by a replay
	// reads the chunks again as the table is then, and the last chunk
	// (after id 10) would hold a new row and not be rowless any more.
	srv.Exec(t, "UPDATE shop_0.orders SET note = 'live' WHERE id = 3")

	for _, mode := range []struct {
		name string
		opts []client.Option
	}{{"binary", nil}, {"json", []client.Option{client.WithJSONLines()}}} {
		t.Run(mode.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			c, err := client.New(hs.URL, append([]client.Option{client.WithBackoff(20*time.Millisecond, 200*time.Millisecond),
				client.WithLogger(log)}, mode.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			seqs := map[uint64]string{}
			var empties []client.Message
			n := 0
			err = c.Stream(ctx, "shop", "reader-"+mode.name, func(m client.Message) error {
				n += len(m.Data)
				if m.Type == client.TypeEmpty {
					empties = append(empties, m)
				}
				seqs[m.Seq] += m.Type + " "
				if n == 11 {
					cancel() // the live change is the last transaction
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != 11 {
				t.Fatalf("%d rows, want 11", n)
			}
			head := p.Dest.Stats().Seq
			for seq := uint64(1); seq <= head; seq++ {
				if _, ok := seqs[seq]; !ok {
					t.Errorf("seq %d of 1..%d never reached the client (it got %v)", seq, head, seqs)
				}
			}
			if len(empties) != 1 {
				t.Fatalf("%d messages of type %s, want the one of the chunk that found no rows (seqs: %v)", len(empties), client.TypeEmpty, seqs)
			}
			e := empties[0]
			if e.Data != nil || e.Table != "" || e.IsDdl || e.Source != "s0" || !e.Snapshot || e.Position == "" {
				t.Errorf("the rowless transaction's message: %+v; want no data nor table, source s0, a position, snapshot set", e)
			}
		})
	}
}
