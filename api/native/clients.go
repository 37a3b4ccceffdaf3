package native

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/stream"
)

// clientKey names a client's state: the store (a destination served again
// under the same name has a new store) and the client id.
type clientKey struct {
	store *stream.Store
	id    string
}

// clientState is what the handler keeps of one client id of one store: its
// open stream, and the store batches written to it and not yet acked.
type clientState struct {
	id string

	mu        sync.Mutex
	streaming bool
	delivered []delivered // in the order handed out
	ackedSeq  uint64      // the highest seq the client acked
	// sentSeq is the highest seq handed to the client, or that it said it
	// has (a stream's after=): an ack above it is refused, or one bad ack
	// (seq=2^64-1) would make the server skip everything after it.
	sentSeq uint64
	// endedAt and endErr are when and why its last stream ended, for the
	// line that says it came back after a failure.
	endedAt time.Time
	endErr  error
}

// delivered is a store batch written to the client, with the highest seq
// among its events: it may be acked once the client acks that seq.
type delivered struct {
	id     int64
	maxSeq uint64
	inside bool // it holds no transaction's end: all its events are of one
}

// pruneEvery is how many client states the handler makes between two
// sweeps of those whose client id the store no longer has (expired by
// consumers.expire_after, dropped, or unsubscribed over canal).
const pruneEvery = 256

// client returns the state of (store, id), making it.
func (h *handler) client(store *stream.Store, id string) *clientState {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := clientKey{store, id}
	c := h.clients[k]
	if c == nil {
		if h.made++; h.made%pruneEvery == 0 {
			h.pruneLocked()
		}
		c = &clientState{id: id}
		h.clients[k] = c
	}
	return c
}

// pruneLocked forgets the states of client ids that are not streaming
// and that their store no longer has: the store bounds its client ids
// (per user, and by expiry), and the handler's map must follow it. The
// caller holds h.mu.
func (h *handler) pruneLocked() {
	for k, c := range h.clients {
		c.mu.Lock()
		busy := c.streaming
		c.mu.Unlock()
		if !busy && !k.store.Subscribed(k.id) {
			delete(h.clients, k)
		}
	}
}

// findClient returns the state of (store, id) or nil.
func (h *handler) findClient(store *stream.Store, id string) *clientState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clients[clientKey{store, id}]
}

// clientsOf lists the clients of a store, by id.
func (h *handler) clientsOf(store *stream.Store) []*clientState {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*clientState
	for k, c := range h.clients {
		if k.store == store {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// open starts a stream: it fails if one is open, else it subscribes the
// client (a new one where o says) and rolls its store batches back so
// that everything not acked comes again.
func (c *clientState) open(ctx context.Context, store *stream.Store, o stream.OpenOptions) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streaming {
		return errBusy
	}
	if err := store.Open(ctx, c.id, o); err != nil {
		return err
	}
	if err := store.Rollback(c.id); err != nil {
		return err
	}
	c.delivered = nil
	c.streaming = true
	return nil
}

// close ends the stream (err: why, nil when the client closed it); its
// batches stay to be acked until the next open.
func (c *clientState) close(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streaming = false
	c.endedAt, c.endErr = time.Now(), err
}

// handed records a batch written to the client; inside says that it
// holds no transaction's end.
func (c *clientState) handed(id int64, maxSeq uint64, inside bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delivered = append(c.delivered, delivered{id: id, maxSeq: maxSeq, inside: inside})
	c.sentSeq = max(c.sentSeq, maxSeq)
}

// ackable is the highest seq the client may ack: what it was sent, said
// it had, or acked before (a cursor it resumed after included).
func (c *clientState) ackable(store *stream.Store) uint64 {
	c.mu.Lock()
	top := max(c.sentSeq, c.ackedSeq)
	c.mu.Unlock()
	if m := store.Mark(c.id); m != nil {
		top = max(top, m.Seq)
	}
	return top
}

// ack acks in the store, in order, every batch whose events all have
// seq <= seq. It returns how many it acked, how many wait, and the
// client's highest acked seq.
func (c *clientState) ack(store *stream.Store, seq uint64) (acked, pending int, ackedSeq uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackedSeq = max(c.ackedSeq, seq)
	for len(c.delivered) > 0 && c.delivered[0].maxSeq <= seq {
		if err := store.Ack(c.id, c.delivered[0].id); err != nil {
			return acked, len(c.delivered), c.ackedSeq, fmt.Errorf("native: ack of client %q up to seq %d: %w", c.id, seq, err)
		}
		c.delivered = c.delivered[1:]
		acked++
	}
	if err := c.aheadLocked(store); err != nil {
		return acked, len(c.delivered), c.ackedSeq, err
	}
	return acked, len(c.delivered), c.ackedSeq, nil
}

// ahead acks in the store, when the store waits for room (Store.Full),
// the oldest batches written to the client if they hold no transaction's
// end: those of the transaction in progress, which the client acks only
// once it has it whole, when the store may never hold its end (a
// transaction bigger than the store, or than what is left of it). The
// store then rewinds the client to the transaction's start at its next
// stream (Store.AckAhead).
func (c *clientState) ahead(store *stream.Store) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.aheadLocked(store)
}

func (c *clientState) aheadLocked(store *stream.Store) error {
	for len(c.delivered) > 0 && c.delivered[0].inside && store.Full(c.id) {
		err := store.AckAhead(c.id, c.delivered[0].id)
		if errors.Is(err, stream.ErrNoReplay) {
			return nil // a store without replays: the consumer's acks free it, or nothing does
		}
		if err != nil {
			return fmt.Errorf("native: ack of client %q inside transaction %d: %w", c.id, c.delivered[0].maxSeq, err)
		}
		c.delivered = c.delivered[1:]
	}
	return nil
}

func (c *clientState) state(store *stream.Store) wire.ClientState {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := wire.ClientState{ID: c.id, Streaming: c.streaming, AckedSeq: c.ackedSeq,
		PendingBatches: len(c.delivered), Cursor: cursorState(store.Mark(c.id))}
	if cs.Cursor != nil {
		// A client resumed on this node after a takeover has acked
		// nothing here yet: its cursor says how far it is.
		cs.AckedSeq = max(cs.AckedSeq, cs.Cursor.Seq)
	}
	return cs
}

// forget drops the state of (store, id).
func (h *handler) forget(store *stream.Store, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, clientKey{store, id})
}
