package destination_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/braid-cdc/braid/destination"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// oneShard starts a server with an orders table and returns a spec over
// it, its start pinned where the server is now.
func oneShard(t *testing.T) (*mysqltest.Server, *spec.Spec) {
	t.Helper()
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY)")
	file, pos := srv.MasterStatus(t)
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, ShardDDL: spec.ShardDDLPassthrough,
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources: []spec.Source{{Name: "s0", Address: srv.Addr(),
			Start: spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}}}}
	ds = ds.WithDefaults()
	return srv, &ds
}

// readAll reads client's batches, acking each, until it has acked a
// transaction of seq at least, and returns the seq acked.
func readAll(t *testing.T, ctx context.Context, store *stream.Store, client string, seq uint64) uint64 {
	t.Helper()
	var acked uint64
	for acked < seq {
		b, err := store.Get(ctx, client, 256, 200*time.Millisecond)
		if err != nil {
			t.Fatalf("client %s: %v", client, err)
		}
		if b.ID < 0 {
			continue
		}
		for _, m := range b.Marks {
			if m != nil {
				acked = m.Seq
			}
		}
		if err := store.Ack(client, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	return acked
}

// TestRunKeepsCursors: Run keeps each client's last acked mark, not the
// cursors of the clients its body keeps itself (Own), forgets a client
// that left the store, and a run after it starts each kept client after
// its cursor.
func TestRunKeepsCursors(t *testing.T) {
	srv, ds := oneShard(t)
	keep := &group.MemKeeper{}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := destination.Config{Spec: ds, Keep: keep, Serve: true, Own: []string{"printer"}, Logger: log}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var acked uint64
	err := destination.Run(ctx, cfg, func(ctx context.Context, r *destination.Running) error {
		store := r.Pipeline.Store
		store.Subscribe("app")
		store.Subscribe("gone")
		for i := range 3 {
			srv.Exec(t, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d)", i))
		}
		acked = readAll(t, ctx, store, "app", 3)
		readAll(t, ctx, store, "printer", 3)
		readAll(t, ctx, store, "gone", 1)
		// Kept while it runs, every KeepEvery.
		for {
			kept, err := keep.Cursors()
			if err != nil {
				return err
			}
			if kept["gone"] != nil {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		store.Unsubscribe("gone")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := keep.Cursors()
	if err != nil {
		t.Fatal(err)
	}
	if c := kept["app"]; c == nil || c.Seq != acked {
		t.Errorf("app's cursor kept: %+v, want seq %d", c, acked)
	}
	if c := kept["printer"]; c != nil {
		t.Errorf("the body's own client had its cursor kept by Run: seq %d", c.Seq)
	}
	if c := kept["gone"]; c != nil {
		t.Errorf("a client gone from the store kept its cursor: seq %d", c.Seq)
	}

	// The next run subscribes app after its cursor.
	err = destination.Run(ctx, cfg, func(ctx context.Context, r *destination.Running) error {
		for _, c := range r.Pipeline.Store.Clients() {
			if c.ID == "app" {
				if c.Mark == nil || c.Mark.Seq != acked {
					t.Errorf("app starts at %+v, want after seq %d", c.Mark, acked)
				}
				return nil
			}
		}
		t.Error("app is not subscribed in the next run")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
