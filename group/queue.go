package group

import (
	"context"
	"sync/atomic"

	"github.com/braid-cdc/braid/engine/change"
)

// sourceQueue is one source's events on their way from its reader to the
// merge, bounded in events (the channel's capacity) and in bytes, and the
// reader's final error.
type sourceQueue struct {
	ch       chan *change.Event
	bytes    atomic.Int64 // Size of the events in ch
	maxBytes int64
	room     chan struct{} // signalled (capacity 1) when the merge takes an event
	// arrived, shared by a destination's queues (capacity 1), is
	// signalled when an event goes into ch or ch is closed: what the merge
	// waits on when no transaction may go.
	arrived chan struct{}
	err     error // set before ch is closed
	// open: the queue holds up to its full bound. Until the merge has
	// emitted its first transaction (openQueues) it holds startEvents:
	// a strict merge emits nothing before it has heard from every
	// source, and the sources that answered first only took the CPU
	// from those still starting by reading a full queue ahead.
	open atomic.Bool
}

// startEvents bounds each source's queue until the merge has emitted
// its first transaction (sourceQueue.open).
const startEvents = 16

func newSourceQueue(events int, maxBytes int64, arrived chan struct{}) *sourceQueue {
	return &sourceQueue{ch: make(chan *change.Event, events), maxBytes: maxBytes, room: make(chan struct{}, 1), arrived: arrived}
}

// signal tells the merge something arrived, unless it was told already.
func (q *sourceQueue) signal() {
	select {
	case q.arrived <- struct{}{}:
	default:
	}
}

// put sends ev, waiting while the queue is full; an empty queue always
// takes it, so that a single event larger than the bound passes.
func (q *sourceQueue) put(ctx context.Context, ev *change.Event) error {
	size := ev.Size()
	for {
		held := q.bytes.Load()
		if (held == 0 || held+size <= q.maxBytes) && (len(q.ch) < startEvents || q.open.Load()) {
			break
		}
		select {
		case <-q.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	q.bytes.Add(size)
	select {
	case q.ch <- ev:
		q.signal()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openUp lifts the start bound (open) and wakes a put waiting on it.
func (q *sourceQueue) openUp() {
	if q.open.Swap(true) {
		return
	}
	select {
	case q.room <- struct{}{}:
	default:
	}
}

// took is called by the merge for each event it receives from ch.
func (q *sourceQueue) took(ev *change.Event) *change.Event {
	q.bytes.Add(-ev.Size())
	select {
	case q.room <- struct{}{}:
	default:
	}
	return ev
}
