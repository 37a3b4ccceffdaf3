package group

import (
	"context"
	"time"

	"github.com/braid-cdc/braid/engine/change"
)

// mergeLoop is the merge loop's state (see Destination.merge): what heads
// each source's queue, and whether the merger has it.
type mergeLoop struct {
	d       *Destination
	queues  []*sourceQueue
	arrived <-chan struct{}
	emit    func(*change.Event) error
	// head[s] is source s's next event taken from its queue, offered[s]
	// whether it is a transaction the merger has (or a chunk or a late
	// transaction held for its point), chunks[s] the snapshot chunk it
	// begins, if it does.
	head    []*change.Event
	offered []bool
	chunks  []*chunkOut
	// stall ticks the stall log; progressAt is when a transaction last
	// went out.
	stall      Ticker
	progressAt time.Time
	decide     chan decideReq // nil: never ready (no shard-DDL merge)
	// liveTook, when a replay reader waits for its live run to take the
	// point it is at (Config.LiveOrder), is closed once it has.
	liveTook <-chan struct{}
	// opened: the queues hold their full bound (openQueues).
	opened bool
}

// merge is the merge loop; see Run. Each turn it applies what is due at
// the boundary, takes what the sources have ready, and emits the
// transaction that goes next; when none may go, it waits.
func (d *Destination) merge(ctx context.Context, queues []*sourceQueue, arrived <-chan struct{}, emit func(*change.Event) error) error {
	n := len(queues)
	m := &mergeLoop{d: d, queues: queues, arrived: arrived, emit: emit,
		head: make([]*change.Event, n), offered: make([]bool, n), chunks: make([]*chunkOut, n),
		stall: d.cfg.Clock.NewTicker(d.cfg.StallLog), progressAt: d.cfg.Clock.Now()}
	defer m.stall.Stop()
	if err := m.resumeCatchUps(ctx); err != nil {
		return err
	}
	for {
		if err := m.applyDueDecisions(ctx); err != nil {
			return err
		}
		if err := m.takeReady(ctx); err != nil {
			return err
		}
		src, err := m.pickNext(ctx)
		if err != nil {
			return err
		}
		if src >= 0 {
			if err := m.emitNext(ctx, src); err != nil {
				return err
			}
			continue
		}
		if err := m.waitForSources(ctx); err != nil {
			return err
		}
	}
}

// resumeCatchUps runs a shard-DDL catch-up a restart found under way.
func (m *mergeLoop) resumeCatchUps(ctx context.Context) error {
	if m.d.ddl == nil {
		return nil
	}
	m.decide = m.d.ddl.decide
	return m.d.ddl.runCatchUps(ctx, m.emit)
}

// applyDueDecisions applies, at this transaction boundary, the shard-DDL
// decisions kept for it and runs the catch-ups they release.
func (m *mergeLoop) applyDueDecisions(ctx context.Context) error {
	if m.d.ddl == nil {
		return nil
	}
	return m.d.ddl.boundary(ctx, m.emit)
}

// takeReady takes what the sources have ready, without waiting: each
// source's events up to its next transaction, which is offered to the
// merger (or, a snapshot chunk, noted with what its gate said of it).
func (m *mergeLoop) takeReady(ctx context.Context) error {
	d := m.d
	for s := range m.queues {
		for !m.offered[s] {
			if m.head[s] == nil {
				select {
				case ev, ok := <-m.queues[s].ch:
					if !ok {
						return d.sourceEnded(ctx, s, m.queues[s])
					}
					m.head[s] = m.queues[s].took(ev)
				default:
				}
			}
			if m.head[s] == nil {
				break
			}
			d.lastSeen[s] = d.cfg.Clock.Now()
			if ev := m.head[s]; ev.Type == change.EventBegin && ev.Snapshot {
				out := <-d.snaps[s].outbox // sent before the chunk's first event
				m.chunks[s], m.offered[s] = &out, true
				break
			}
			if err := d.consumeHead(s, m.head, m.offered); err != nil {
				return err
			}
		}
	}
	return nil
}

// pickNext returns the source whose transaction goes next, or -1: a
// chunk or a late transaction kept at this point, else the merger's
// choice (unless one of those is due and its source has not brought it
// yet). A transaction the merger picks below a key already out is kept
// as late first.
//
// A replay reader beside a live run (Config.LiveOrder) takes no point the
// live run has not, and at each takes the source the live run took: a
// transaction the live run went past, on a watermark, to take it later,
// late, waits for that point as the live run's choices go.
func (m *mergeLoop) pickNext(ctx context.Context) (int, error) {
	d := m.d
	d.releaseReached(m.head)
	want := -1
	if lo := d.cfg.LiveOrder; lo != nil {
		src, ahead := lo.At(d.cursor.Taken)
		if ahead {
			m.liveTook = lo.taken(d.cursor.Taken)
			return -1, nil
		}
		want = src
	}
	src, wait, err := d.dueChunk(ctx, m.chunks)
	if err == nil && src < 0 {
		src, wait, err = d.dueLate(m.head, wait)
	}
	if err != nil || src >= 0 || wait {
		return src, err
	}
	next, key, ok := d.merger.Next()
	if want >= 0 && (!ok || next != want) {
		if key, ok = d.merger.Offered(want); !ok {
			return -1, nil // the live run's choice has not come yet
		}
		next = want
	}
	if !ok {
		return -1, nil
	}
	if d.merger.Behind(key) {
		if err := d.keepLate(ctx, next, m.head[next], key); err != nil {
			return -1, err
		}
	}
	return next, nil
}

// emitNext emits source src's transaction whole and clears its head.
func (m *mergeLoop) emitNext(ctx context.Context, src int) error {
	d := m.d
	m.openQueues()
	if err := d.emitTx(ctx, src, m.head[src], m.queues[src], m.emit); err != nil {
		return err
	}
	m.head[src], m.offered[src], m.chunks[src] = nil, false, nil
	m.progressAt = d.cfg.Clock.Now()
	d.lastSeen[src] = m.progressAt
	d.publish(false)
	return nil
}

// waitForSources waits, when nothing may go, for a source to send (what
// it sent is taken on the next turn; an event for a source whose
// transaction is already offered only costs a turn), an operator's
// decision, or the stall log's tick.
func (m *mergeLoop) waitForSources(ctx context.Context) error {
	d := m.d
	d.publish(false)
	if d.ddl != nil {
		d.ddl.flush()
	}
	took := m.liveTook
	m.liveTook = nil
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-took:
	case <-m.arrived:
	case req := <-m.decide:
		return d.ddl.decideNow(ctx, req, m.emit)
	case <-m.stall.C():
		// Whatever holds the first transaction back, the sources read
		// ahead in full from the first stall tick on.
		m.openQueues()
		m.logStall()
	}
	return nil
}

// openQueues lifts the queues' start bound (sourceQueue.open) once a
// transaction goes out: the sources that answered first waited for the
// others with a few events queued, and now read ahead in full.
func (m *mergeLoop) openQueues() {
	if m.opened {
		return
	}
	m.opened = true
	for _, q := range m.queues {
		q.openUp()
	}
}

// logStall publishes the stats, warns of old shard-DDL locks, and names
// the sources strict order has waited for since the last transaction
// went out, if that is StallLog or longer.
func (m *mergeLoop) logStall() {
	d := m.d
	d.publish(true)
	now := d.cfg.Clock.Now()
	if d.ddl != nil {
		d.ddl.warnOld(now)
	}
	waiting := d.merger.Waiting()
	if len(waiting) == 0 || now.Sub(m.progressAt) < d.cfg.StallLog {
		return
	}
	names := make([]string, len(waiting))
	for i, s := range waiting {
		names[i] = d.cfg.Spec.Sources[s].Name
	}
	d.log.Warn("strict order is waiting for sources with no event or heartbeat: is the server down or the network cut?",
		"sources", names, "for", now.Sub(m.progressAt).Round(time.Second))
}
