package sink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// Runner applies a destination's store to one target as client id
// Client, with Workers workers: each store batch's changes are handed to
// the workers, each worker applies its share in one transaction, and the
// store batch is acked once all have committed.
type Runner struct {
	Name   string // the sink's name, for logs
	Dest   string
	Client string
	Store  *stream.Store
	// Target is what a sink applies to, or Publisher what it relays to
	// in order (one of the two).
	Target    Target
	Publisher Publisher
	Workers   int
	// Batch, when above 0, cuts a worker's share of a store batch into
	// transactions of at most Batch changes; 0 applies it in one, which
	// is what makes a target fast (see bench/sink_test.go).
	Batch int
	// ByOrigin makes each shard table's rows keys of their own (the
	// target keeps them apart by its origin column).
	ByOrigin bool
	// Cursors, when set, keeps the client's cursor (the mark of the last
	// batch applied whole), saved after each ack.
	Cursors group.CursorStore
	// Holders, when set, looks up which shard tables hold a colliding key
	// at the sources, so that a collision error names both writers.
	Holders func(ctx context.Context, e *CollisionError) ([]string, error)
	Logger  *slog.Logger

	mu        sync.Mutex
	applied   uint64    // the last seq applied whole
	appliedAt time.Time // when it committed at its source
	lastErr   string
	// rows is the target's applied count at rateAt; rate the rows a
	// second over the window that ended then.
	rows   uint64
	rateAt time.Time
	rate   float64

	conflicts atomic.Uint64
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
		var err error
		if r.Publisher != nil {
			err = r.relay(ctx)
		} else {
			err = r.run(ctx)
		}
		if ctx.Err() != nil || errors.Is(err, stream.ErrClosed) {
			return nil
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
		if errors.Is(err, ErrDDLRefused) {
			// The same DDL again would be refused again: the sink stops,
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
// committed at its source, how many changes waited for another worker
// (Causality), and the rows it applied a second over about the last
// second (0 when it has applied nothing for longer).
func (r *Runner) Progress() (appliedAt time.Time, conflicts uint64, rowsPerSecond float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.rate
	if time.Since(r.rateAt) > 3*time.Second {
		rate = 0
	}
	return r.appliedAt, r.conflicts.Load(), rate
}

// Applied returns the seq of the last transaction applied whole, and the
// last error ("" for none).
func (r *Runner) Applied() (uint64, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied, r.lastErr
}

// minPrune is how many keys Causality holds before the runner prunes it.
const minPrune = 1 << 16

// ackEntry is a store batch handed to the workers: it is acked once
// every worker has applied the changes it had been handed by then.
type ackEntry struct {
	id     int64
	last   uint64    // the seq of its last event
	at     time.Time // when that event's transaction committed
	handed []uint64
}

// run applies store batches until an error. The loop hands each change
// to its worker, and goes on to the next batch while the workers apply;
// an acker acks batches in order as the workers get through them.
func (r *Runner) run(ctx context.Context) error {
	start, err := r.Target.Checkpoints(ctx, r.Workers)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := newPool(r.Workers, cancel)
	acks := make(chan ackEntry, 64)
	var wg sync.WaitGroup
	defer func() {
		p.fail(errStopped)
		close(acks)
		wg.Wait()
	}()
	_, decodesItself := r.Target.(ImageDecoder)
	for w := range r.Workers {
		wg.Go(func() {
			p.work(ctx, w, func(ctx context.Context, cs []Change) error {
				if !decodesItself {
					DecodeAll(cs) // here, on the workers, not on the runner's one goroutine
				}
				for chunk := range chunks(cs, r.Batch) {
					if err := r.Target.Apply(ctx, w, chunk); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
	wg.Go(func() { r.ack(p, acks) })

	c := NewCausality(r.Workers)
	routing := RouteByKey
	if rt, ok := r.Target.(RoutedTarget); ok {
		routing = rt.Routing()
	}
	kr := newKeyer(r.ByOrigin, routing)
	_, appliesPartial := r.Target.(PartialApplier)
	pruneAt := minPrune
	for {
		if err := p.failed(); err != nil {
			return err
		}
		b, err := r.Store.Get(ctx, r.Client, 1024, 500*time.Millisecond)
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
						return PartialImageError(r.Name, ch)
					}
					if waits := c.Waits(w, &ch); len(waits) > 0 {
						r.conflicts.Add(1)
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
				if err := r.Target.ApplyDDL(ctx, ev, r.Workers); err != nil {
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
// each; a failure fails the pool.
func (r *Runner) ack(p *pool, acks <-chan ackEntry) {
	for e := range acks {
		ts := make([]Ticket, len(e.handed))
		for w, n := range e.handed {
			ts[w] = Ticket{w, n}
		}
		if p.wait(ts...) != nil {
			return
		}
		if err := r.Store.Ack(r.Client, e.id); err != nil {
			p.fail(err)
			return
		}
		// Saved after the last batch applied of a run of them: the
		// cursor is never ahead of the checkpoints.
		if err := r.acked(e.last, e.at, r.Target.Stats().Applied, len(acks) == 0); err != nil {
			p.fail(err)
			return
		}
	}
}

// acked records that the changes through seq last (committed at its
// source at at) are applied, rows in all, and when save is set saves the
// sink's cursor.
func (r *Runner) acked(last uint64, at time.Time, rows uint64, save bool) error {
	r.mu.Lock()
	r.applied, r.appliedAt, r.lastErr = last, at, ""
	if now := time.Now(); now.Sub(r.rateAt) >= time.Second {
		if !r.rateAt.IsZero() && rows >= r.rows {
			r.rate = float64(rows-r.rows) / now.Sub(r.rateAt).Seconds()
		}
		r.rows, r.rateAt = rows, now
	}
	r.mu.Unlock()
	if r.Cursors == nil || !save {
		return nil
	}
	if m := r.Store.Mark(r.Client); m != nil {
		if err := r.Cursors.Save(r.Dest, r.Client, m); err != nil {
			return fmt.Errorf("sink %s: save its cursor: %w", r.Name, err)
		}
	}
	return nil
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

// chunks yields s in pieces of at most n (n <= 0: s whole).
func chunks(s []Change, n int) func(func([]Change) bool) {
	if n <= 0 {
		n = len(s)
	}
	return func(yield func([]Change) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// keyer makes the runner's Changes: their names and keys. It keeps each
// shard table's names, and builds keys in one buffer, so that a change
// costs a string a key, not five.
type keyer struct {
	byOrigin bool
	routing  Routing
	names    map[nameKey]tableNames
	buf      []byte
}

type nameKey struct {
	source string
	table  *change.Table
}

// tableNames are a shard table's names, as Change holds them, the
// prefix of its keys and its key columns (KeyColumns).
type tableNames struct {
	origin, logical, keyTable string
	keyIdx                    []int
}

func newKeyer(byOrigin bool, routing Routing) *keyer {
	return &keyer{byOrigin: byOrigin, routing: routing, names: map[nameKey]tableNames{}}
}

// change is row change rc of ev with its keys (byOrigin: the shard table
// is part of each key), decoding their columns only: the images are
// decoded where they are applied (Change.Decode).
func (k *keyer) change(ev *change.Event, rc *change.RowChange) Change {
	nk := nameKey{ev.Source, rc.Table}
	n, ok := k.names[nk]
	if !ok {
		t := rc.Table
		ls, lt := t.Logical()
		n = tableNames{origin: t.Schema + "." + t.Name, logical: ls + "." + lt, keyIdx: KeyColumns(t)}
		n.keyTable = n.logical
		if k.byOrigin {
			n.keyTable = ev.Source + "/" + n.origin + ">" + n.logical
		}
		if len(k.names) > 1<<16 {
			clear(k.names) // table versions come and go with DDL
		}
		k.names[nk] = n
	}
	c := Change{Seq: ev.Seq, Source: ev.Source, Origin: n.origin, Logical: n.logical, Row: rc}
	c.PK, c.Others, c.Moved = k.keys(rc, n.keyTable, n.keyIdx)
	c.Route = k.route(rc, rc.HasAfter(), c.PK, n)
	if c.Moved {
		c.OldRoute = k.route(rc, false, c.Others[0], n)
	}
	return c
}

// route is the route of rc's primary key pk, in its after image or its
// before image.
func (k *keyer) route(rc *change.RowChange, after bool, pk string, n tableNames) uint32 {
	if k.routing == RouteByRange && len(n.keyIdx) == 1 {
		var bucket uint64
		switch v := rc.Value(after, n.keyIdx[0]).(type) {
		case int64:
			bucket = uint64(v >> rangeShift)
		case uint64:
			bucket = v >> rangeShift
		default:
			return routeHash(pk)
		}
		k.buf = binary.BigEndian.AppendUint64(append(append(k.buf[:0], n.keyTable...), 0), bucket)
		return routeHash(k.buf)
	}
	return routeHash(pk)
}

// keys are a change's primary key (all columns of a table without one)
// and its other keys: the old primary key of an UPDATE that changes it
// (moved), and the values of each unique key in its images (NULLs are not
// unique, so a key with one is left out). table is the keys' prefix, idx
// the key columns.
func (k *keyer) keys(rc *change.RowChange, table string, idx []int) (pk string, others []string, moved bool) {
	t := rc.Table
	before := func(i int) change.Value { return rc.Value(false, i) }
	after := func(i int) change.Value { return rc.Value(true, i) }
	var images [2]func(int) change.Value
	n := 0
	if rc.HasBefore() {
		images[n] = before
		n++
	}
	if rc.HasAfter() {
		images[n] = after
		n++
	}
	pk = k.key(table, idx, images[n-1]) // the after image's, if any
	if n == 2 {
		if old := k.key(table, idx, before); old != pk {
			others = append(others, old)
			moved = true
		}
	}
	for u, cols := range t.Unique {
		uidx := make([]int, 0, len(cols))
		for _, c := range cols {
			if j := t.ColumnIndex(c); j >= 0 {
				uidx = append(uidx, j)
			}
		}
		if len(uidx) != len(cols) {
			continue
		}
		for _, value := range images[:n] {
			if slices.ContainsFunc(uidx, func(j int) bool { return value(j) == nil }) {
				continue
			}
			if key := k.key(fmt.Sprintf("%s#%d", table, u), uidx, value); !slices.Contains(others, key) {
				others = append(others, key)
			}
		}
	}
	return pk, others, moved
}

// key is Key of the row whose column i is value(i), built in k.buf.
func (k *keyer) key(table string, idx []int, value func(i int) change.Value) string {
	k.buf = appendKey(k.buf[:0], table, idx, value)
	return string(k.buf)
}

// KeyColumns are the indexes of t's primary-key columns, or of all its
// columns when it has none.
func KeyColumns(t *change.Table) []int {
	var idx []int
	for i, c := range t.Columns {
		if c.Key {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		for i := range t.Columns {
			idx = append(idx, i)
		}
	}
	return idx
}
