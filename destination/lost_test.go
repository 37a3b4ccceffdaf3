package destination_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/destination"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/redistest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// readIDs reads client's batches into ids (the INSERTed ids, -1 for a
// LOST marker), acking each, until ids equals want and nothing more is
// ready (the last transaction acked whole).
func readIDs(t *testing.T, ctx context.Context, store *stream.Store, client string, ids *[]int64, want []int64) {
	t.Helper()
	retry.Until(t, time.Minute, func() error {
		b, err := store.Get(ctx, client, 256, 100*time.Millisecond)
		if err != nil {
			t.Fatalf("client %s: %v", client, err)
		}
		for _, ev := range b.Events {
			switch {
			case ev.Type == change.EventBegin && ev.Lost != "":
				*ids = append(*ids, -1)
			case ev.Type == change.EventRows:
				for i := range ev.Rows {
					*ids = append(*ids, ev.Rows[i].After()[0].(int64))
				}
			}
		}
		if b.ID >= 0 {
			if err := store.Ack(client, b.ID); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(*ids, want) {
			return fmt.Errorf("client %s has %v, want %v (-1: the LOST marker)", client, *ids, want)
		}
		if len(b.Events) > 0 {
			// Read on until nothing is ready: the last transaction's
			// commit may come in the next batch, and a cursor kept
			// before it gives the transaction again to the next run.
			return fmt.Errorf("client %s: reading what is left of its last transaction", client)
		}
		return nil
	})
}

// TestRunSinkBeforeLossStopsAlone: a Redis sink whose target went away
// before a failover keeps its cursor before the transactions the failover
// lost; the loss is accepted and the consumer app reads past its LOST
// marker. Run again (a restart, a new owner) with the sink's target
// back, the sink is refused alone: it stops with one line naming the
// loss and the marker's seq, while app is served on. The old code
// started the run from the sink's cursor, and the destination stopped
// with ErrLostBefore.
func TestRunSinkBeforeLossStopsAlone(t *testing.T) {
	_, prefix := redistest.Prefix(t)
	f := shoptest.StartFailover(t)
	tp, primary, replica, vip := f.Topology, f.Primary, f.Replica, f.VIP
	cache := tcpproxy.Start(t, redistest.Addr)
	ds, err := spec.Parse([]byte(f.SpecYAML(fmt.Sprintf("sinks: [{name: cache, type: redis, address: '%s', key: '%s{table}:{pk}'}]\n", cache.Addr(), prefix))))
	if err != nil {
		t.Fatal(err)
	}
	keep := &group.MemKeeper{}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	cfg := destination.Config{Spec: ds, Keep: keep, Serve: true, KeepEvery: 50 * time.Millisecond, Logger: log}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var marker uint64
	var lost string
	err = destination.Run(ctx, cfg, func(ctx context.Context, r *destination.Running) error {
		store := r.Pipeline.Store
		store.Subscribe("app")
		var ids []int64
		readIDs(t, ctx, store, "app", &ids, []int64{1, 2})
		retry.Until(t, time.Minute, func() error {
			if st := r.Sinks.Stats(); len(st) != 1 || st[0].Rows < 2 {
				return fmt.Errorf("the sink: %+v; want 1 and 2 applied", st)
			}
			return nil
		})
		cache.Switch("127.0.0.1:1") // the sink's target gone: its cursor stays
		tp.StopReplication(t, replica)
		primary.Exec(t, "INSERT INTO shop.orders VALUES (3)", "INSERT INTO shop.orders VALUES (4)")
		readIDs(t, ctx, store, "app", &ids, []int64{1, 2, 3, 4})
		tp.KillPrimary(t)
		tp.Promote(t, replica)
		vip.Switch(replica.Addr())
		retry.Until(t, time.Minute, func() error {
			if r.Pipeline.Dest.Stats().Sources[0].Lost == "" {
				return errors.New("the run waits on no loss yet")
			}
			return nil
		})
		l, err := r.Pipeline.Dest.AcceptLost(ctx, "a")
		if err != nil {
			return err
		}
		lost = l.Lost
		replica.Exec(t, "INSERT INTO shop.orders VALUES (10)")
		readIDs(t, ctx, store, "app", &ids, []int64{1, 2, 3, 4, -1, 10})
		marker = r.Pipeline.Dest.Stats().Sources[0].Accepted[0].MarkerSeq
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := keep.Cursors()
	if err != nil {
		t.Fatal(err)
	}
	if c := kept["sink:cache"]; c == nil || c.Seq >= marker {
		t.Fatalf("the sink's cursor kept: %+v; want one before the marker (seq %d)", c, marker)
	}

	cache.Switch(redistest.Addr)
	err = destination.Run(ctx, cfg, func(ctx context.Context, r *destination.Running) error {
		replica.Exec(t, "INSERT INTO shop.orders VALUES (11)")
		var ids []int64
		readIDs(t, ctx, r.Pipeline.Store, "app", &ids, []int64{11})
		retry.Until(t, time.Minute, func() error {
			st := r.Sinks.Stats()
			if len(st) != 1 || !strings.Contains(st[0].LastError, stream.ErrBeforeLoss.Error()) {
				return fmt.Errorf("the sink: %+v; want it stopped before the loss", st)
			}
			if e := st[0].LastError; !strings.Contains(e, lost) || !strings.Contains(e, fmt.Sprintf("LOST marker at seq %d", marker)) || strings.Contains(e, "\n") {
				t.Fatalf("the sink's error: %s; want one line naming the loss %s and its marker's seq %d", e, lost, marker)
			}
			return nil
		})
		select {
		case <-r.Pipeline.Done():
			t.Fatalf("the destination stopped: %v", r.Pipeline.Err())
		default:
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
