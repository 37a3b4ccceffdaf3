// Package sinkrun opens a spec's sinks as braid runs them (Open: the one
// place that knows every target type) and starts a destination's sinks
// against its pipeline's store (Start), for braid capture and for a
// cluster node that owns the destination. Tests and benchmarks that run
// one sink build it the same way: Open, NewRunner, Go.
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

// Open connects to sink s of destination dest and returns it as braid
// runs it: a sink.Keyed over the target of a mysql, postgres or redis
// sink, a sink.Ordered over the publisher of a rabbitmq or kafka sink.
// log hears what a target decides on its own (a checkpoint table
// migrated, a table applied as statements).
func Open(ctx context.Context, s spec.Sink, dest string, log *slog.Logger) (sink.Sink, error) {
	switch s.Type {
	case spec.SinkMySQL:
		t, err := mysql.Open(ctx, s, dest, log)
		return keyed(s, t, err)
	case spec.SinkPostgres:
		t, err := postgres.Open(ctx, s, dest, log)
		return keyed(s, t, err)
	case spec.SinkRedis:
		t, err := redis.Open(ctx, s, dest)
		return keyed(s, t, err)
	case spec.SinkRabbitMQ:
		return ordered(rabbitmq.Open(ctx, s, dest))
	case spec.SinkKafka:
		return ordered(kafka.Open(ctx, s, dest))
	}
	return nil, fmt.Errorf("sink %s: type %q: want one of %v", s.Name, s.Type, spec.SinkTypes)
}

// keyed wraps the target a target package opened for s in sink.Keyed
// (none when it failed, err).
func keyed[T sink.Target](s spec.Sink, t T, err error) (sink.Sink, error) {
	if err != nil {
		return nil, err
	}
	return sink.NewKeyed(s, t), nil
}

// ordered wraps the publisher a target package opened in sink.Ordered
// (none when it failed, err).
func ordered[P sink.Publisher](p P, err error) (sink.Sink, error) {
	if err != nil {
		return nil, err
	}
	return sink.NewOrdered(p), nil
}

// Client is the target client s drives, as its type's package opened it
// (a *mysql.Target, a *kafka.Publisher, ...): for a test or a tool that
// reads the target's own state. It panics if s's client is not a T.
func Client[T any](s sink.Sink) T {
	switch s := s.(type) {
	case *sink.Keyed:
		return s.Target().(T)
	case *sink.Ordered:
		return s.Publisher().(T)
	}
	panic(fmt.Sprintf("sinkrun: %T has no target client", s))
}

// NewRunner returns the runner of sink sk of destination ds, open as s,
// over store, as Start runs each sink: its client id, its name in the
// logs, and a collision error that names the shard tables holding the
// key. cursors, when set, keeps its cursor after each store batch (a
// cluster owner saves every store client's cursor itself).
func NewRunner(ds *spec.Spec, sk spec.Sink, s sink.Sink, store *stream.Store, cursors group.CursorStore, log *slog.Logger) *sink.Runner {
	r := &sink.Runner{Name: sk.Name, Dest: ds.Name, Client: sink.ClientID(sk.Name), Store: store, Sink: s, Cursors: cursors, Logger: log.With("dest", ds.Name)}
	r.Holders = func(ctx context.Context, e *sink.CollisionError) ([]string, error) { return verify.Holders(ctx, ds, e) }
	return r
}

// Go runs r on a goroutine of its own until ctx ends or stop is called;
// stop waits for it to return. For a caller that runs one sink by itself
// (a test, a benchmark); Start runs a destination's every sink.
func Go(ctx context.Context, r *sink.Runner) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			r.Logger.Error("sink stopped", "sink", r.Name, "err", err)
		}
	}()
	return func() { cancel(); <-done }
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
	err    string       // why it is not running yet
}

// Start applies p's store to each of ds's sinks until ctx ends or Stop.
// cursors, when set, keeps each sink's cursor after each store batch (a cluster
// owner saves every store client's cursor itself). live, when set, says
// whether the node may hand events out now (sink.Runner.Live: a sink
// applies nothing while it fails). A target that cannot be reached is
// retried in the background, logged and shown in States.
func Start(ctx context.Context, p *stream.Pipeline, ds *spec.Spec, cursors group.CursorStore, live func() error, log *slog.Logger) *Set {
	ctx, cancel := context.WithCancel(ctx)
	set := &Set{cancel: cancel, done: ctx.Done(), p: p, ds: ds}
	for _, sk := range ds.Sinks {
		rn := &running{spec: sk}
		set.runners = append(set.runners, rn)
		set.wg.Go(func() {
			s, ok := open(ctx, sk, ds.Name, log, func(err error) { set.mu.Lock(); rn.err = err.Error(); set.mu.Unlock() })
			if !ok {
				return
			}
			defer s.Close()
			r := NewRunner(ds, sk, s, p.Store, cursors, log)
			r.Live = live
			set.mu.Lock()
			rn.runner, rn.err = r, ""
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
		st := stream.SinkStats{Name: rn.spec.Name, Type: rn.spec.Type, Address: rn.spec.Where(), Workers: rn.spec.Workers, LastError: rn.err}
		if rn.runner != nil {
			applied, lastErr := rn.runner.Applied()
			st.AppliedAt, st.RowsPerSecond = rn.runner.Progress()
			ts := rn.runner.Sink.Stats()
			st.AppliedSeq, st.LastError = applied, lastErr
			st.Rows, st.Upserts, st.Missing, st.Replayed, st.Conflicts = ts.Applied, ts.Upserts, ts.Missing, ts.Replayed, ts.Conflicts
			st.Pending, st.Returns = ts.Pending, ts.Returns
			st.Running = true
		}
		out = append(out, st)
	}
	return out
}

// open connects to sk's target, retrying with backoff (each failure
// told to failed) until ctx ends (then false).
func open(ctx context.Context, sk spec.Sink, dest string, log *slog.Logger, failed func(error)) (sink.Sink, bool) {
	backoff := 500 * time.Millisecond
	for {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t, err := Open(octx, sk, dest, log)
		cancel()
		if err == nil {
			return t, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		failed(err)
		log.Warn("sink target unreachable; retrying", "sink", sk.Name, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}
