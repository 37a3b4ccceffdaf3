// Package sinkrun starts a destination's sinks (spec sinks:) against its
// pipeline's store: the one place that knows every target type, for
// braid capture and for a cluster node that owns the destination.
package sinkrun

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/kafka"
	"github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/sink/rabbitmq"
	"github.com/braid-cdc/braid/sink/redis"
	"github.com/braid-cdc/braid/sink/verify"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// Opened is a sink's open target: a Target it applies to, or for a sink
// that publishes in order (rabbitmq, kafka) a Publisher.
type Opened struct {
	Target    sink.Target
	Publisher sink.Publisher
}

// Stats returns what the target counted.
func (o Opened) Stats() sink.Stats {
	if o.Publisher != nil {
		return o.Publisher.Stats()
	}
	return o.Target.Stats()
}

// Close disconnects from the target.
func (o Opened) Close() error {
	if o.Publisher != nil {
		return o.Publisher.Close()
	}
	return o.Target.Close()
}

// Open connects to sink s of destination dest; log hears what a target
// decides on its own (a checkpoint table migrated, a table applied as
// statements).
func Open(ctx context.Context, s spec.Sink, dest string, log *slog.Logger) (Opened, error) {
	var (
		o   Opened
		err error
	)
	switch s.Type {
	case "mysql":
		o.Target, err = mysql.Open(ctx, s, dest, log)
	case "postgres":
		o.Target, err = postgres.Open(ctx, s, dest, log)
	case "redis":
		o.Target, err = redis.Open(ctx, s, dest)
	case "rabbitmq":
		o.Publisher, err = rabbitmq.Open(ctx, s, dest)
	case "kafka":
		o.Publisher, err = kafka.Open(ctx, s, dest)
	default:
		err = fmt.Errorf("sink %s: type %q: want one of %v", s.Name, s.Type, spec.SinkTypes)
	}
	return o, err
}

// Check connects to each of ds's sinks once, so that a wrong address or
// password is one clear error before anything runs.
func Check(ctx context.Context, ds *spec.Spec, log *slog.Logger) error {
	for _, sk := range ds.Sinks {
		t, err := Open(ctx, sk, ds.Name, log)
		if err != nil {
			return err
		}
		t.Close()
	}
	return nil
}

// Prepare is what a process that runs ds's sinks does before it starts
// the pipeline: each sink's client id added to clients (Clients) and each
// target reached once (Check, within 30 s).
func Prepare(ctx context.Context, ds *spec.Spec, clients map[string]*group.Cursor, cursors group.CursorStore, log *slog.Logger) error {
	if err := Clients(ds, clients, cursors); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return Check(ctx, ds, log)
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

// Set is a destination's running sinks.
type Set struct {
	cancel  context.CancelFunc
	done    <-chan struct{} // closed by Stop: verifies under way end too
	wg      sync.WaitGroup
	p       *stream.Pipeline
	ds      *spec.Spec
	mu      sync.Mutex
	runners []*running
}

type running struct {
	spec   spec.Sink
	runner *sink.Runner // nil until its target is reached
	target Opened       // likewise
	err    string       // why it is not running yet
}

// Start applies p's store to each of ds's sinks until ctx ends or Stop.
// cursors, when set, keeps each sink's cursor after each batch (a cluster
// owner saves every store client's cursor itself). A target that cannot
// be reached is retried in the background, logged and shown in States.
func Start(ctx context.Context, p *stream.Pipeline, ds *spec.Spec, cursors group.CursorStore, log *slog.Logger) *Set {
	ctx, cancel := context.WithCancel(ctx)
	set := &Set{cancel: cancel, done: ctx.Done(), p: p, ds: ds}
	for _, sk := range ds.Sinks {
		rn := &running{spec: sk}
		set.runners = append(set.runners, rn)
		set.wg.Go(func() {
			target, ok := open(ctx, sk, ds.Name, log, func(err error) { set.mu.Lock(); rn.err = err.Error(); set.mu.Unlock() })
			if !ok {
				return
			}
			defer target.Close()
			r := &sink.Runner{Name: sk.Name, Dest: ds.Name, Client: sink.ClientID(sk.Name), Store: p.Store,
				Target: target.Target, Publisher: target.Publisher,
				Workers: sk.Workers, ByOrigin: sk.OriginColumn != "", Cursors: cursors, Logger: log.With("dest", ds.Name)}
			// A collision error names the shard tables that hold the key.
			r.Holders = func(ctx context.Context, e *sink.CollisionError) ([]string, error) { return verify.Holders(ctx, ds, e) }
			set.mu.Lock()
			rn.runner, rn.target, rn.err = r, target, ""
			set.mu.Unlock()
			log.Info("sink applying", "dest", ds.Name, "sink", sk.Name, "type", sk.Type, "address", sk.Where(), "workers", sk.Workers)
			if err := r.Run(ctx); err != nil {
				log.Error("sink stopped", "dest", ds.Name, "sink", sk.Name, "err", err)
			}
		})
	}
	return set
}

// Stop ends the sinks and waits for them.
func (s *Set) Stop() {
	s.cancel()
	s.wg.Wait()
}

// Stats returns each sink's state (stream.Served.Sinks).
func (s *Set) Stats() []stream.SinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]stream.SinkStats, 0, len(s.runners))
	for _, rn := range s.runners {
		st := stream.SinkStats{Name: rn.spec.Name, Type: string(rn.spec.Type), Address: rn.spec.Where(), Workers: rn.spec.Workers, LastError: rn.err}
		if rn.runner != nil {
			applied, lastErr := rn.runner.Applied()
			st.AppliedAt, st.Conflicts, st.RowsPerSecond = rn.runner.Progress()
			ts := rn.target.Stats()
			st.AppliedSeq, st.LastError = applied, lastErr
			st.Rows, st.Upserts, st.Missing, st.Replayed = ts.Applied, ts.Upserts, ts.Missing, ts.Replayed
			st.Pending, st.Returns = ts.Pending, ts.Returns
			st.Running = true
		}
		out = append(out, st)
	}
	return out
}

// open connects to sk's target, retrying with backoff (each failure
// told to failed) until ctx ends (then false).
func open(ctx context.Context, sk spec.Sink, dest string, log *slog.Logger, failed func(error)) (Opened, bool) {
	backoff := 500 * time.Millisecond
	for {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t, err := Open(octx, sk, dest, log)
		cancel()
		if err == nil {
			return t, true
		}
		if ctx.Err() != nil {
			return Opened{}, false
		}
		failed(err)
		log.Warn("sink target unreachable; retrying", "sink", sk.Name, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return Opened{}, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}
