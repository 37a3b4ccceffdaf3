package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// Runner runs one Sink over a destination's store as store client id
// Client: it hands the Sink a Feed of the store's batches, and when the
// Sink fails it logs why, waits (with backoff), rolls the client back to
// its last acked store batch and hands it a Feed again, which the Sink applies
// from where its target stands.
type Runner struct {
	Name   string // the sink's name, for logs
	Dest   string
	Client string
	Store  *stream.Store
	// Sink is the sink's open target (package sinkrun's Open).
	Sink Sink
	// Cursors, when set, keeps the client's cursor (the mark of the last
	// store batch applied whole), saved after each run of acks.
	Cursors group.CursorStore
	// Holders, when set, looks up which shard tables hold a colliding key
	// at the sources, so that a collision error names both writers.
	Holders func(ctx context.Context, e *CollisionError) ([]string, error)
	// Live, when set, says whether this node may hand the destination's
	// events out now (stream.Served.Live: a cluster owner's lease). While
	// it fails the Feed hands the sink nothing: an owner that stalled
	// past its lease (SIGSTOP, a long pause, a cut network) and runs
	// again before it learns of the new owner applies nothing the new
	// owner may have decided otherwise. A target's checkpoints fence the
	// exactly-once sinks, a transactional id Kafka; a RabbitMQ sink had
	// nothing, and published a transaction the new owner gave another
	// seq (found by make chaos: the same message id, another body).
	Live   func() error
	Logger *slog.Logger

	mu        sync.Mutex
	notLive   bool      // Live failed last time it was asked: said once
	applied   uint64    // the last seq applied whole
	appliedAt time.Time // when it committed at its source
	lastErr   string
	// rows is the target's applied count at rateAt; rate the rows a
	// second over the window that ended then.
	rows   uint64
	rateAt time.Time
	rate   float64
}

// ClientID is the store client id of sink name.
func ClientID(name string) string { return stream.SinkClientPrefix + name }

// Run applies until ctx ends (nil) or the store closes; a target error
// is retried with backoff, from the checkpoints, and logged.
func (r *Runner) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	// What an earlier runner of the client was handed and did not ack is
	// handed out again, and the checkpoints say what of it was applied.
	if err := r.Store.Rollback(r.Client); err != nil {
		return err
	}
	for {
		err := r.Sink.Apply(ctx, &Feed{r: r})
		if ctx.Err() != nil || errors.Is(err, stream.ErrClosed) {
			return nil
		}
		if errors.Is(err, errNotLive) {
			// Handed a batch as the lease ran out: taken back, and
			// handed again (from the checkpoints) once it holds.
			if err := r.Store.Rollback(r.Client); err != nil {
				return err
			}
			continue
		}
		var ce *CollisionError
		if errors.As(err, &ce) && ce.Holders == nil && r.Holders != nil {
			if ce.Holders, err = r.Holders(ctx, ce); err != nil {
				r.Logger.Warn("sink: could not look up which shard tables hold a colliding key", "sink", r.Name, "err", err)
			}
			err = ce
		}
		r.mu.Lock()
		r.lastErr = err.Error()
		r.mu.Unlock()
		if errors.Is(err, ErrDDLRefused) || errors.Is(err, stream.ErrBeforeLoss) {
			// The same DDL again would be refused again, and a cursor
			// before lost transactions stays before them: the sink stops,
			// with one line, until it is restarted (its spec changed).
			r.Logger.Error("sink stopped", "sink", r.Name, "err", err)
			<-ctx.Done()
			return nil
		}
		r.Logger.Warn("sink failed; retrying from its checkpoints", "sink", r.Name, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		if err := r.Store.Rollback(r.Client); err != nil {
			return err
		}
	}
}

// Progress is how the runner goes: when the last transaction it applied
// committed at its source, and the rows it applied a second over about
// the last second (0 when it has applied nothing for longer).
func (r *Runner) Progress() (appliedAt time.Time, rowsPerSecond float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.rate
	if time.Since(r.rateAt) > 3*time.Second {
		rate = 0
	}
	return r.appliedAt, rate
}

// Applied returns the seq of the last transaction applied whole, and the
// last error ("" for none).
func (r *Runner) Applied() (uint64, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied, r.lastErr
}

// Feed is the stream as one Apply of a Sink reads it: the store batches
// handed to the sink's client id, in order, and their acks, which move
// the sink's cursor. A Feed is used by one Apply, and ends with it.
type Feed struct {
	r *Runner
}

// Sink returns the name of the sink it feeds, for its errors.
func (f *Feed) Sink() string { return f.r.Name }

// Next returns the next store batch handed to the sink, waiting up to
// half a second for one (a store batch of no events: none came, or the
// node may not hand events out now, Runner.Live).
func (f *Feed) Next(ctx context.Context) (stream.Batch, error) {
	if !f.r.awaitLive(ctx, 500*time.Millisecond) {
		return stream.Batch{ID: -1}, ctx.Err()
	}
	return f.r.stillLive(f.r.Store.Get(ctx, f.r.Client, 1024, 500*time.Millisecond))
}

// Ready is Next without the wait: the next store batch if one is ready,
// else a store batch of no events.
func (f *Feed) Ready(ctx context.Context) (stream.Batch, error) {
	if !f.r.awaitLive(ctx, 0) {
		return stream.Batch{ID: -1}, ctx.Err()
	}
	return f.r.stillLive(f.r.Store.Get(ctx, f.r.Client, 1024, 0))
}

// errNotLive ends an Apply handed a batch just as Live failed: Run takes
// the batch back (Store.Rollback) and feeds the sink again.
var errNotLive = errors.New("sink: the node may not hand events out now")

// stillLive passes on a batch Get returned only if Live still holds: Get
// may have waited, and the lease run out meanwhile (an owner stopped in
// that wait runs again with the batch its merge let out on resuming), as
// the servers look at it again after a read (api/native, api/canal).
func (r *Runner) stillLive(b stream.Batch, err error) (stream.Batch, error) {
	if err != nil || len(b.Events) == 0 || r.Live == nil {
		return b, err
	}
	if lerr := r.Live(); lerr != nil {
		return stream.Batch{ID: -1}, fmt.Errorf("%w: %v", errNotLive, lerr)
	}
	return b, nil
}

// awaitLive waits up to wait for Live to hold and reports whether it
// does; the first failure of a run of them is logged.
func (r *Runner) awaitLive(ctx context.Context, wait time.Duration) bool {
	if r.Live == nil {
		return true
	}
	deadline := time.Now().Add(wait)
	for {
		err := r.Live()
		r.mu.Lock()
		was := r.notLive
		r.notLive = err != nil
		r.mu.Unlock()
		if err == nil {
			if was {
				r.Logger.Info("sink applying again: the node may hand events out", "sink", r.Name)
			}
			return true
		}
		if !was {
			r.Logger.Info("sink waits: the node may not hand events out now", "sink", r.Name, "why", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(left, 50*time.Millisecond)):
		}
	}
}

// Ack acks store batch id, the oldest handed out and not acked, whose
// every change is applied at the target (or confirmed): the stream is
// applied through seq, which committed at its source at at.
func (f *Feed) Ack(id int64, seq uint64, at time.Time) error {
	r := f.r
	if err := r.Store.Ack(r.Client, id); err != nil {
		return err
	}
	rows := r.Sink.Stats().Applied
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied, r.appliedAt, r.lastErr = seq, at, ""
	if now := time.Now(); now.Sub(r.rateAt) >= time.Second {
		if !r.rateAt.IsZero() && rows >= r.rows {
			r.rate = float64(rows-r.rows) / now.Sub(r.rateAt).Seconds()
		}
		r.rows, r.rateAt = rows, now
	}
	return nil
}

// Save saves the sink's cursor (the mark of the last store batch acked), when
// the runner has Cursors: a Sink calls it after the last Ack of a run of
// them, so the cursor is never ahead of what the target holds.
func (f *Feed) Save() error {
	r := f.r
	if r.Cursors == nil {
		return nil
	}
	if m := r.Store.Mark(r.Client); m != nil {
		if err := r.Cursors.Save(r.Dest, r.Client, m); err != nil {
			return fmt.Errorf("sink %s: save its cursor: %w", r.Name, err)
		}
	}
	return nil
}
