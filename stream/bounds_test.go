package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestClientCapPerOwner: one user making 20,000 client ids gets
// max_client_ids of them; the rest are refused at once, naming the cap
// and `braid consumer drop`, and leave nothing in the store. Another
// user, a known id and the sinks are not held by the cap, and dropping
// one id makes room for one more.
func TestClientCapPerOwner(t *testing.T) {
	_, ds := twoShards(t)
	ds.Consumers.MaxClientIDs = 50
	p := start(t, ds, stream.Config{})
	ctx := context.Background()
	app := stream.OpenOptions{Consumer: true, Owner: "app"}
	var refused int
	for i := range 20000 {
		err := p.Store.Open(ctx, fmt.Sprintf("c%d", i), app)
		switch {
		case err == nil:
		case errors.Is(err, stream.ErrTooManyClients):
			if refused++; refused == 1 && (!strings.Contains(err.Error(), "consumers.max_client_ids") || !strings.Contains(err.Error(), "braid consumer drop")) {
				t.Errorf("refusal %q names neither the cap's setting nor braid consumer drop", err)
			}
		default:
			t.Fatalf("open c%d: %v", i, err)
		}
	}
	if refused != 20000-50 || len(p.Store.Clients()) != 50 {
		t.Fatalf("%d refused, %d subscribed: want 19950 refused, 50 subscribed", refused, len(p.Store.Clients()))
	}
	if err := p.Store.Open(ctx, "c7", app); err != nil {
		t.Errorf("a known client id of the user's: %v", err)
	}
	if err := p.Store.Open(ctx, "other-1", stream.OpenOptions{Consumer: true, Owner: "other"}); err != nil {
		t.Errorf("another user's first client id: %v", err)
	}
	p.Store.Subscribe("sink:copy") // the node's own, not a user's
	if clientStats(p.Store, "sink:copy").ID == "" {
		t.Error("a sink's client id was refused")
	}
	p.Store.Unsubscribe("c3")
	if err := p.Store.Open(ctx, "c-new", app); err != nil {
		t.Errorf("once one id is dropped, a new one: %v", err)
	}
	if err := p.Store.Open(ctx, "c-new2", app); !errors.Is(err, stream.ErrTooManyClients) {
		t.Errorf("past the cap again: %v", err)
	}
}

// TestIdleClientExpiresByDefault: a spec that says nothing about
// expire_after drops a client id unseen for a week (Maintain is given a
// clock a week on); a sink's client id stays, and expire_after: never
// keeps every id.
func TestIdleClientExpiresByDefault(t *testing.T) {
	_, ds := twoShards(t)
	if time.Duration(ds.Consumers.ExpireAfter) != spec.DefaultExpireAfter {
		t.Fatalf("default expire_after %v, want a week", time.Duration(ds.Consumers.ExpireAfter))
	}
	p := start(t, ds, stream.Config{})
	p.Store.Subscribe("idle")
	p.Store.Subscribe("sink:copy")
	p.Store.Maintain(time.Now().Add(spec.DefaultExpireAfter - time.Minute))
	if clientStats(p.Store, "idle").ID == "" {
		t.Fatal("a client id idle for less than a week was dropped")
	}
	p.Store.Maintain(time.Now().Add(spec.DefaultExpireAfter + time.Minute))
	if clientStats(p.Store, "idle").ID != "" {
		t.Error("a client id idle for more than a week was kept")
	}
	if clientStats(p.Store, "sink:copy").ID == "" {
		t.Error("a sink's client id expired")
	}

	// A spec stored before expiry had a default says 0: a week too.
	old := *ds
	old.Consumers.ExpireAfter = 0
	o, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: &old, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Store.Subscribe("idle")
	o.Store.Maintain(time.Now().Add(spec.DefaultExpireAfter + time.Minute))
	if clientStats(o.Store, "idle").ID != "" {
		t.Error("a spec stored without expire_after kept a client id idle for more than a week")
	}

	never := *ds
	never.Consumers.ExpireAfter = spec.ExpireNever
	q, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: &never, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	q.Store.Subscribe("kept")
	q.Store.Maintain(time.Now().Add(10 * 365 * 24 * time.Hour))
	if clientStats(q.Store, "kept").ID == "" {
		t.Error("expire_after: never dropped a client id")
	}
}

// TestReplayShare: one user behind the store gets half the replay
// readers; another user still gets one.
func TestReplayShare(t *testing.T) {
	srvs, ds := twoShards(t)
	p := start(t, ds, stream.Config{MaxBytes: 64 << 10, MaxReplays: 4})
	p.Store.Subscribe("live")
	write(t, srvs, 1, 100, 5)
	newReader(p.Store, "live").until(t, 200, time.Minute)
	if f := p.Store.Stats().Floor; f == 0 {
		t.Fatalf("the store still holds the first transaction (floor %d): make it smaller", f)
	}
	ctx := context.Background()
	early := stream.OpenOptions{Consumer: true, Owner: "greedy", Start: stream.Start{Kind: stream.StartEarliest}}
	for i := range 2 {
		if err := p.Store.Open(ctx, fmt.Sprint("g", i), early); err != nil {
			t.Fatalf("replay %d of the user's: %v", i, err)
		}
	}
	err := p.Store.Open(ctx, "g2", early)
	if !errors.Is(err, stream.ErrReplaysBusy) || !strings.Contains(err.Error(), "user greedy runs 2") {
		t.Fatalf("the user's third replay of four: %v, want ErrReplaysBusy naming the user's share", err)
	}
	early.Owner = "polite"
	if err := p.Store.Open(ctx, "p0", early); err != nil {
		t.Fatalf("another user's replay while the first holds its share: %v", err)
	}
}
