package sink

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/spec"
)

// Target is the thin client under a Keyed sink: a target that applies
// row changes in worker transactions that also write the worker's
// checkpoint (sink/mysql, sink/postgres, sink/redis). Keyed decides what
// each worker applies and when; a Target only applies it.
type Target interface {
	// Checkpoints returns each of n workers' applied point (zero: none).
	Checkpoints(ctx context.Context, n int) ([]Point, error)
	// Apply applies changes, in order (a target may reorder changes of
	// different keys: see Plan), and sets worker's checkpoint to the last
	// one's point, in one transaction. They are what the worker was
	// handed since its last transaction (at most maxTake), so there may
	// be thousands. Apply is called by the workers at once, each with its
	// own worker number.
	Apply(ctx context.Context, worker int, changes []Change) error
	// ApplyDDL applies a logical DDL (nothing: ignore) and sets every
	// worker's checkpoint to its seq. No Apply runs meanwhile.
	ApplyDDL(ctx context.Context, ev *change.Event, workers int) error
	// Stats returns what the target counted.
	Stats() Stats
	Close() error
}

// ImageDecoder is a Target that decodes the images of the changes it
// applies itself, when it needs them (Change.Decode): the MySQL target
// that replays the binlog's row events has no use for them.
type ImageDecoder interface {
	Target
	DecodesImages()
}

// PartialApplier is a Target that applies a change whose after image
// leaves columns out (change.RowChange.PartialAfter) as the source wrote
// it, or returns PartialImageError; Keyed stops at such a change for any
// other Target, which would write the columns left out as NULL.
type PartialApplier interface {
	Target
	AppliesPartialImages()
}

// A RoutedTarget keeps, with its checkpoints, the routing of the sink's
// workers: Routing is good after Checkpoints, which records it for a
// sink that has none (RouteByWideRange) or had checkpoints before braid
// kept it (RouteByKey); RouteByRange is an older braid's new sinks'. A Target that is not one routes by key.
type RoutedTarget interface {
	Target
	Routing() Routing
}

// Keyed is the Sink that applies a stream to a Target in parallel, by
// key, exactly once: each row change goes to the worker of its key
// (Causality), each worker applies its changes in transactions that also
// write its checkpoint, and a change at or before its worker's checkpoint
// is skipped. See the package's doc for its goroutines and invariants.
type Keyed struct {
	name     string
	workers  int
	byOrigin bool
	target   Target

	conflicts atomic.Uint64
}

var _ Sink = (*Keyed)(nil)

// NewKeyed returns the Keyed sink of spec entry s over target t, with
// s's workers; with s's origin column each shard table's rows are keys
// of their own (the target keeps them apart by that column).
func NewKeyed(s spec.Sink, t Target) *Keyed {
	return &Keyed{name: s.Name, workers: cmp.Or(s.Workers, spec.DefaultSinkWorkers), byOrigin: s.OriginColumn != "", target: t}
}

// Target returns the target client k applies to.
func (k *Keyed) Target() Target { return k.target }

// Checkpoints implements Sink: each worker's point at the target.
func (k *Keyed) Checkpoints(ctx context.Context) ([]Point, error) {
	return k.target.Checkpoints(ctx, k.workers)
}

// Stats implements Sink: the target's counts, and how many changes
// waited for another worker (Causality).
func (k *Keyed) Stats() Stats {
	st := k.target.Stats()
	st.Conflicts = k.conflicts.Load()
	return st
}

// Close implements Sink.
func (k *Keyed) Close() error { return k.target.Close() }

// minPrune is how many keys Causality holds before Apply prunes it.
const minPrune = 1 << 16

// ackEntry is a store batch handed to the workers: it is acked once
// every worker has applied the changes it had been handed by then.
type ackEntry struct {
	id     int64
	last   uint64    // the seq of its last event
	at     time.Time // when that event's transaction committed
	handed []uint64
}

// Apply implements Sink: it applies store batches until an error. Its
// loop hands each change to its worker, and goes on to the next store batch
// while the workers apply; an acker acks batches in order as the workers
// get through them.
func (k *Keyed) Apply(ctx context.Context, f *Feed) error {
	start, err := k.target.Checkpoints(ctx, k.workers)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := newPool(k.workers, cancel)
	acks := make(chan ackEntry, 64)
	var wg sync.WaitGroup
	defer func() {
		p.fail(errStopped)
		close(acks)
		wg.Wait()
	}()
	_, decodesItself := k.target.(ImageDecoder)
	for w := range k.workers {
		wg.Go(func() {
			p.work(ctx, w, func(ctx context.Context, cs []Change) error {
				if !decodesItself {
					DecodeAll(cs) // here, on the workers, not on Apply's one goroutine
				}
				return k.target.Apply(ctx, w, cs)
			})
		})
	}
	wg.Go(func() { ack(f, p, acks) })

	c := NewCausality(k.workers)
	routing := RouteByKey
	if rt, ok := k.target.(RoutedTarget); ok {
		routing = rt.Routing()
	}
	kr := newKeyer(k.byOrigin, routing)
	_, appliesPartial := k.target.(PartialApplier)
	pruneAt := minPrune
	for {
		if err := p.failed(); err != nil {
			return err
		}
		b, err := f.Next(ctx)
		if err != nil {
			if perr := p.failed(); perr != nil {
				return perr
			}
			return err
		}
		if len(b.Events) == 0 {
			continue
		}
		var last uint64
		var at time.Time
		for _, ev := range b.Events {
			last, at = ev.Seq, ev.CommitTime
			switch ev.Type {
			case change.EventRows:
				// A snapshot chunk read again (FreshAt) holds other rows
				// than the first time, under the same seq: a worker that
				// applied part of it applies all of it again (upserts,
				// which the changes after it overwrite), or a row it
				// holds now and did not then would be skipped for good.
				reread := ev.Snapshot && !ev.FreshAt.IsZero()
				for i := range ev.Rows {
					ch := kr.change(ev, &ev.Rows[i])
					ch.MayExist = !ev.FreshAt.IsZero()
					w := c.WorkerOf(ch.Route)
					if !start[w].Before(Point{ch.Seq, ch.Row.Index}) && !(reread && ch.Seq == start[w].Seq) {
						continue // applied before a restart
					}
					if !appliesPartial && ch.Row.PartialAfter() {
						// What came before it is applied; it and what
						// follows wait for the source to be fixed.
						if err := p.drain(); err != nil {
							return err
						}
						return PartialImageError(k.name, ch)
					}
					if waits := c.Waits(w, &ch); len(waits) > 0 {
						k.conflicts.Add(1)
						if err := p.waitHanded(waits...); err != nil {
							return err
						}
					}
					t := p.hand(w, ch)
					c.Hold(w, t.N, &ch)
				}
			case change.EventDDL:
				// A DDL is a barrier: everything before it applied first.
				if err := p.drain(); err != nil {
					return err
				}
				if done := minPoint(start); !done.Before(Point{ev.Seq, MaxIdx}) {
					continue
				}
				if err := k.target.ApplyDDL(ctx, ev, k.workers); err != nil {
					return err
				}
			}
		}
		p.wake()
		handed, applied := p.counts()
		select {
		case acks <- ackEntry{id: b.ID, last: last, at: at, handed: handed}:
		case <-ctx.Done():
			if err := p.failed(); err != nil {
				return err
			}
			return ctx.Err()
		}
		// A small map of held keys is a fast one: pruned when it has
		// doubled since the last time (the keys of changes not yet
		// applied stay).
		if c.Len() > pruneAt {
			c.Prune(applied)
			pruneAt = max(minPrune, 2*c.Len())
		}
	}
}

// ack acks the store batches of acks in order, each once the workers
// have applied what it handed them, and saves the sink's cursor after
// the last of a run of them; a failure fails the pool.
func ack(f *Feed, p *pool, acks <-chan ackEntry) {
	for e := range acks {
		ts := make([]Ticket, len(e.handed))
		for w, n := range e.handed {
			ts[w] = Ticket{w, n}
		}
		if p.wait(ts...) != nil {
			return
		}
		if err := f.Ack(e.id, e.last, e.at); err != nil {
			p.fail(err)
			return
		}
		// Saved after the last store batch applied of a run of them: the
		// cursor is never ahead of the checkpoints.
		if len(acks) == 0 {
			if err := f.Save(); err != nil {
				p.fail(err)
				return
			}
		}
	}
}

// minPoint is the earliest of ps.
func minPoint(ps []Point) Point {
	m := ps[0]
	for _, p := range ps[1:] {
		if p.Before(m) {
			m = p
		}
	}
	return m
}
