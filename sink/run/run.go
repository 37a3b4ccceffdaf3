// Package run starts a destination's sinks (spec sinks:) against its
// pipeline's store: the one place that knows every target type, for
// braid capture and for a cluster node that owns the destination.
package run

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// Open connects to a sink's target.
func Open(ctx context.Context, s spec.Sink) (sink.Target, error) {
	switch s.Type {
	case "mysql":
		return mysql.Open(ctx, s)
	}
	return nil, fmt.Errorf("sink %s: type %q: want one of %v", s.Name, s.Type, spec.SinkTypes)
}

// Check connects to each of ds's sinks once, so that a wrong address or
// password is one clear error before anything runs.
func Check(ctx context.Context, ds *spec.Spec) error {
	for _, sk := range ds.Sinks {
		t, err := Open(ctx, sk)
		if err != nil {
			return err
		}
		t.Close()
	}
	return nil
}

// Clients adds each sink's store client id to clients, with its cursor
// from cursors (nil: none yet), so that the pipeline holds the stream for
// it from the start.
func Clients(ds *spec.Spec, clients map[string]*group.Cursor, cursors group.CursorStore) error {
	for _, sk := range ds.Sinks {
		id := sink.ClientID(sk.Name)
		if _, ok := clients[id]; ok {
			continue
		}
		var c *group.Cursor
		if cursors != nil {
			var err error
			if c, err = cursors.Load(ds.Name, id); err != nil {
				return err
			}
		}
		clients[id] = c
	}
	return nil
}

// Start applies p's store to each of ds's sinks until ctx ends; stop
// ends them and waits. cursors, when set, keeps each sink's cursor after
// each batch (a cluster owner saves every store client's cursor itself).
// A target that cannot be reached is retried in the background, logged.
func Start(ctx context.Context, p *stream.Pipeline, ds *spec.Spec, cursors group.CursorStore, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, sk := range ds.Sinks {
		wg.Go(func() {
			target := open(ctx, sk, log)
			if target == nil {
				return
			}
			defer target.Close()
			r := &sink.Runner{Name: sk.Name, Dest: ds.Name, Client: sink.ClientID(sk.Name), Store: p.Store, Target: target,
				Workers: sk.Workers, Batch: sk.Batch, Cursors: cursors, Logger: log.With("dest", ds.Name)}
			log.Info("sink applying", "dest", ds.Name, "sink", sk.Name, "type", sk.Type, "address", sk.Address, "workers", sk.Workers)
			if err := r.Run(ctx); err != nil {
				log.Error("sink stopped", "dest", ds.Name, "sink", sk.Name, "err", err)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// open connects to sk's target, retrying with backoff until ctx ends
// (then nil).
func open(ctx context.Context, sk spec.Sink, log *slog.Logger) sink.Target {
	backoff := 500 * time.Millisecond
	for {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t, err := Open(octx, sk)
		cancel()
		if err == nil {
			return t
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("sink target unreachable; retrying", "sink", sk.Name, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}
