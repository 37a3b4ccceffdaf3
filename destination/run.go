package destination

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// Config is what Run runs. Zero fields take the defaults given.
type Config struct {
	// Spec is the destination's spec, defaults applied and passwords
	// resolved. Required.
	Spec *spec.Spec
	// Keep keeps the destination's cursors, shard-DDL decisions and
	// placements. Required; Run does not close it.
	Keep group.Keeper
	// Own are client ids the body reads the store as and keeps the
	// cursors of itself (braid capture's printer): subscribed after
	// their kept cursors, never saved by Run. Default: none.
	Own []string
	// Serve makes the store serve consumers that come and go
	// (stream.PipelineConfig.Serve): every client with a kept cursor is
	// subscribed after it. Without it only Own and the sinks are.
	Serve bool
	// CheckSinks reaches each sink's target once (within 30 s) before
	// anything runs, so that a wrong address or password is one clear
	// error. Without it an unreachable target is retried in the
	// background (sinkrun.Start).
	CheckSinks bool
	// Live decides whether the servers and the sinks may hand events out
	// now (stream.Served.Live, sink.Runner.Live). Default: always.
	Live func() error
	// KeepEvery is how often the clients' cursors are kept: a crash
	// repeats at most this much of the stream to them (same seqs).
	// Default: 500ms.
	KeepEvery time.Duration
	// Logger receives the destination's logs. Default: discarded.
	Logger *slog.Logger
}

// DefaultKeepEvery is Config.KeepEvery's default.
const DefaultKeepEvery = 500 * time.Millisecond

// Running is a destination Run runs, as its body sees it.
type Running struct {
	Pipeline *stream.Pipeline
	Sinks    *sinkrun.Set
	// Served is the destination for the servers, its Sinks set; the
	// body registers it where they find it.
	Served *stream.Served
}

// Run runs cfg's destination and calls body with it; when body returns
// (or ctx ends and body returns), it stops the sinks, keeps every
// client's last cursor and stops the pipeline. It returns body's error,
// or the error that kept a cursor from being kept (then body's context
// ended early).
func Run(ctx context.Context, cfg Config, body func(ctx context.Context, r *Running) error) error {
	if cfg.Spec == nil || cfg.Keep == nil {
		return errors.New("destination: Run needs a spec and a keeper")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kept, err := cfg.Keep.Cursors()
	if err != nil {
		return err
	}
	clients := map[string]*group.Cursor{}
	if cfg.Serve {
		clients = kept
	}
	for _, id := range cfg.Own {
		clients[id] = kept[id]
		if c := kept[id]; c != nil {
			log.Info("resuming from cursor", "dest", cfg.Spec.Name, "client", id, "seq", c.Seq)
		}
	}
	for _, sk := range cfg.Spec.Sinks {
		id := sink.ClientID(sk.Name)
		clients[id] = kept[id]
	}
	if cfg.CheckSinks {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := sinkrun.Check(cctx, cfg.Spec, log)
		cancel()
		if err != nil {
			return err
		}
	}
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: cfg.Spec, Clients: clients, Logger: log, Serve: cfg.Serve, Keep: cfg.Keep})
	if err != nil {
		return err
	}
	defer p.Close()
	sinks := sinkrun.Start(ctx, p, cfg.Spec, nil, cfg.Live, log)
	defer sinks.Stop() // before the pipeline closes; again after the last save is harmless
	served := p.Served(cfg.Live)
	served.Sinks = sinks.Stats

	s := &saver{keep: cfg.Keep, store: p.Store, own: cfg.Own, saved: map[string]savedMark{}, log: log.With("dest", cfg.Spec.Name)}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	saving := make(chan error, 1)
	go func() { saving <- s.every(bctx, cmp.Or(cfg.KeepEvery, DefaultKeepEvery), cancel) }()
	err = body(bctx, &Running{Pipeline: p, Sinks: sinks, Served: served})
	cancel()
	saveErr := <-saving
	// The sinks' last acks are kept too.
	sinks.Stop()
	if saveErr == nil {
		saveErr = s.save()
	}
	if saveErr != nil {
		return saveErr
	}
	return err
}

// savedMark is what was kept for a client last: its mark, and whether
// it was kept detached.
type savedMark struct {
	mark     *group.Cursor
	detached bool
}

// saver keeps the store's clients' cursors.
type saver struct {
	keep  group.Keeper
	store *stream.Store
	own   []string
	saved map[string]savedMark // by client; used by one goroutine at a time
	log   *slog.Logger
}

// every saves every interval until ctx ends; a failure ends the body
// (stop) and is returned.
func (s *saver) every(ctx context.Context, interval time.Duration, stop context.CancelFunc) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.save(); err != nil {
			stop()
			return err
		}
	}
}

// save keeps each client's mark that changed since it was kept last,
// and forgets the clients gone from the store.
func (s *saver) save() error {
	clients := s.store.Clients()
	for _, c := range clients {
		now := savedMark{c.Mark, c.Detached}
		if c.Mark == nil || s.saved[c.ID] == now || c.Ephemeral || slices.Contains(s.own, c.ID) {
			continue
		}
		mark := c.Mark
		if mark.Detached != c.Detached {
			// Marks are shared between clients: the flag goes on a copy.
			mark = mark.Clone()
			mark.Detached = c.Detached
		}
		if err := s.keep.SaveCursor(c.ID, mark); err != nil {
			return fmt.Errorf("destination: keep the cursor of %s: %w", c.ID, err)
		}
		s.saved[c.ID] = now
	}
	// A client id gone from the store unsubscribed (canal's
	// UNSUBSCRIPTION), was dropped (braid consumer drop) or expired
	// (consumers.expire_after): its cursor goes too, or the next run
	// would hold the stream for it.
	for id := range s.saved {
		if slices.ContainsFunc(clients, func(c stream.ClientStats) bool { return c.ID == id }) {
			continue
		}
		if err := s.keep.ForgetCursor(id); err != nil {
			return fmt.Errorf("destination: forget the cursor of %s: %w", id, err)
		}
		delete(s.saved, id)
		s.log.Info("consumer unsubscribed: its cursor is deleted", "client", id)
	}
	return nil
}
