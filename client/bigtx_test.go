package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestTransactionBiggerThanTheStore: a store that holds 64 events, less
// than one native batch (native.BatchEvents), and a transaction of 600
// row events between small ones. A native client acks whole
// transactions only, so the store would wait for the big one's end for
// good; the server acks its batches inside it while the store is full,
// and the client gets every row, once. Cut off in the middle of the big
// transaction (after those acks freed its start), the client reconnects
// and gets the rest, the transaction read again from its start by a
// replay and what it had handled dropped: still every row once. So does
// a client served by a replay reader (whose store is as small).
func TestTransactionBiggerThanTheStore(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))")
	file, pos := srv.MasterStatus(t)
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_0\.orders`}, ShardDDL: spec.ShardDDLPassthrough,
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources: []spec.Source{{Name: "s0", Address: srv.Addr(),
			Start: spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}}}}
	ds = ds.WithDefaults()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: &ds, Serve: true, Keep: &group.MemKeeper{},
		Store: stream.Config{MaxEvents: 64}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reg := stream.NewRegistry()
	reg.Add(p.Served(nil))
	hs := httptest.NewServer(native.NewHandler(reg, log))
	defer hs.Close()

	// 5 small transactions, the big one (an INSERT and an UPDATE of each
	// of 300 rows, each its own row event and message), 5 small ones.
	var sqls []string
	for i := 1; i <= 5; i++ {
		sqls = append(sqls, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 'small')", i))
	}
	sqls = append(sqls, "BEGIN")
	for i := 100; i < 400; i++ {
		sqls = append(sqls, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 'big')", i),
			fmt.Sprintf("UPDATE shop_0.orders SET note = 'bigger' WHERE id = %d", i))
	}
	sqls = append(sqls, "COMMIT")
	for i := 6; i <= 10; i++ {
		sqls = append(sqls, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 'small')", i))
	}
	srv.Exec(t, sqls...)
	const changes = 10 + 600

	for _, tc := range []struct {
		name string
		cut  bool
		opts []client.Option
	}{
		// The first client id: the store serves it (nothing was let go).
		{"cut", true, nil},
		// Client ids new after the store let everything go: a replay
		// reader, whose store is as small, serves each, and a cut
		// replaces that replay by one from the client's cursor.
		{"whole", false, nil},
		{"replay-cut", true, []client.Option{client.WithFrom("earliest")}},
	} {
		name, cut := tc.name, tc.cut
		t.Run(name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				conns []net.Conn
			)
			hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				conn, err := d.DialContext(ctx, network, addr)
				if err == nil {
					mu.Lock()
					conns = append(conns, conn)
					mu.Unlock()
				}
				return conn, err
			}}}
			defer hc.CloseIdleConnections()
			c, err := client.New(hs.URL, append([]client.Option{client.WithHTTPClient(hc), client.WithBackoff(20*time.Millisecond, 200*time.Millisecond),
				client.WithLogger(log)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			got := map[string]int{}
			n, bigSeq, cutDone := 0, uint64(0), false
			err = c.Stream(ctx, "shop", "reader-"+name, func(m client.Message) error {
				for _, d := range m.Data {
					n++
					got[fmt.Sprintf("%s %s %s", m.Type, *d["id"], *d["note"])]++
				}
				if len(m.Data) == 1 && *m.Data[0]["note"] != "small" {
					bigSeq = m.Seq
				}
				if cut && !cutDone && bigSeq != 0 && n >= 5+400 {
					// Well past a store's worth of the big transaction:
					// its start was acked in the store ahead of the client.
					cutDone = true
					mu.Lock()
					for _, conn := range conns {
						conn.Close()
					}
					conns = nil
					mu.Unlock()
				}
				if len(got) == changes {
					cancel()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != changes {
				t.Fatalf("%d distinct row changes of %d (%d handed over): the stream stalled", len(got), changes, n)
			}
			for k, times := range got {
				if times != 1 {
					t.Errorf("%s handed over %d times, want once", k, times)
				}
			}
			if cut && !cutDone {
				t.Fatal("the connection was never cut")
			}
		})
	}
}
