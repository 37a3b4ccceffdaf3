package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/group"
)

// ErrUnknownBatch: an Ack named a batch that is not the client's oldest
// un-acked one.
var ErrUnknownBatch = errors.New("stream: unknown batch")

// ErrClosed: the store was closed.
var ErrClosed = errors.New("stream: store closed")

// DefaultBytes is Config.MaxBytes's default.
const DefaultBytes = 64 << 20

// Config bounds a Store. Zero fields take the defaults given.
type Config struct {
	// MaxBytes bounds the estimated memory of the events held (see
	// Event.Size). Default: 64 MiB.
	MaxBytes int64
	// MaxEvents bounds their number. Default: 65536.
	MaxEvents int
}

// Store holds a destination's events between the producer (the merge) and
// its consumers, canal-style: each client id gets batches (Get), acks them
// in order (Ack) or takes them all back (Rollback). Events stay until every
// client has acked them; when the store is full, Put waits (backpressure
// reaching the parsers). Nothing is dropped.
//
// Each event may carry a mark (the producer's cursor at a transaction
// boundary); a client's Mark is the last one it acked, to be saved.
//
// # Invariants
//
//   - Events are handed out in Put order; a client never skips one.
//   - Held bytes stay within MaxBytes and events within MaxEvents, except
//     that one event is always accepted into an empty store.
//   - A client's acked point never moves backwards.
//
// # Concurrency
//
// A Store is safe for concurrent use by one producer and any number of
// clients.
type Store struct {
	cfg     Config
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	entries []storeEntry  // entries[i] is event number base+i
	base    uint64
	bytes   int64
	peak    int64
	clients map[string]*storeClient
	closed  bool
	// full is set while Put waits for room: a Fill then takes what there
	// is, since no more can come until some is acked.
	full bool
}

type storeEntry struct {
	ev   *change.Event
	size int64
	mark *group.Cursor
}

type storeClient struct {
	acked   uint64 // events below this number are acked
	next    uint64 // the next event to hand out
	batches []Batch
	nextID  int64
	mark    *group.Cursor
	markAt  time.Time // the commit time of mark's transaction
	// after, while not 0, skips the events of transactions up to this seq
	// (see SubscribeAfter).
	after uint64
}

// Batch is what Get hands a client: consecutive events, under an id to ack.
// An empty batch has ID -1 (canal's "nothing ready").
type Batch struct {
	ID     int64
	Events []*change.Event
	// Marks[i] is the mark Put with Events[i] (nil for most).
	Marks    []*group.Cursor
	from, to uint64
}

// NewStore returns an empty store.
func NewStore(cfg Config) *Store {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultBytes
	}
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = 65536
	}
	return &Store{cfg: cfg, changed: make(chan struct{}), clients: map[string]*storeClient{}}
}

// broadcast wakes every waiter; the caller holds mu.
func (s *Store) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait releases mu until the store changes, ctx ends or the deadline
// passes; it reports whether to go on waiting.
func (s *Store) wait(ctx context.Context, deadline <-chan time.Time) bool {
	ch := s.changed
	s.mu.Unlock()
	defer s.mu.Lock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	case <-deadline:
		return false
	}
}

// Put appends an event, waiting while the store is full. mark, if not nil,
// is the producer's cursor after ev.
func (s *Store) Put(ctx context.Context, ev *change.Event, mark *group.Cursor) error {
	size := ev.Size()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closed && len(s.entries) > 0 &&
		(len(s.entries) >= s.cfg.MaxEvents || s.bytes+size > s.cfg.MaxBytes) {
		if !s.full {
			s.full = true
			s.broadcast()
		}
		if !s.wait(ctx, nil) {
			s.full = false
			return ctx.Err()
		}
	}
	s.full = false
	if s.closed {
		return ErrClosed
	}
	s.entries = append(s.entries, storeEntry{ev: ev, size: size, mark: mark})
	s.bytes += size
	s.peak = max(s.peak, s.bytes)
	s.broadcast()
	return nil
}

// Subscribe registers a client id at the oldest event held (what a new
// client sees first). Subscribing a known client does nothing.
func (s *Store) Subscribe(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[client]; !ok {
		s.clients[client] = &storeClient{acked: s.base, next: s.base}
	}
}

// SubscribeAfter registers a client id that already has every
// transaction up to seq, with mark as its last mark (its saved cursor):
// it is handed only events of later transactions, the ones before are
// acked for it as they come. This is how a client resumes on a store
// that replays from an earlier point (a destination taken over from
// another node, restarted from its slowest client's cursor). Subscribing
// a known client does nothing.
func (s *Store) SubscribeAfter(client string, seq uint64, mark *group.Cursor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[client]; !ok {
		s.clients[client] = &storeClient{acked: s.base, next: s.base, after: seq, mark: mark}
	}
}

// skip acks for c the events of transactions it already has (see
// SubscribeAfter); the caller holds mu.
func (s *Store) skip(c *storeClient) {
	if c.after == 0 || len(c.batches) > 0 {
		return
	}
	end := s.base + uint64(len(s.entries))
	from := c.next
	for c.next < end && s.entries[c.next-s.base].ev.Seq <= c.after {
		c.next++
	}
	if c.next < end {
		c.after = 0 // past it: nothing more to skip
	}
	if c.next > from {
		c.acked = c.next
		s.trim()
	}
}

// Unsubscribe forgets a client id, its cursor and its un-acked batches:
// the store no longer holds events for it (canal's UNSUBSCRIPTION).
// Subscribing it again starts at the oldest event held then.
func (s *Store) Unsubscribe(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[client]; ok {
		delete(s.clients, client)
		s.trim()
	}
}

// Get hands client up to max events not yet handed out, waiting up to
// timeout for the first (0: do not wait). Nothing ready gives an empty
// batch with ID -1.
func (s *Store) Get(ctx context.Context, client string, max int, timeout time.Duration) (Batch, error) {
	return s.get(ctx, client, 1, max, 0, timeout)
}

// Fill is Get waiting up to timeout for max events rather than for the
// first, as canal's server fills a GET's fetch size, and handing out no
// more events than add up to maxBytes (by Event.Size; one at least; 0: no
// bound), so that what is made of a batch is bounded whatever the
// client asks for. It returns early when max events or maxBytes are ready,
// or when the store is full (no more can come before an ack).
func (s *Store) Fill(ctx context.Context, client string, max int, maxBytes int64, timeout time.Duration) (Batch, error) {
	return s.get(ctx, client, max, max, maxBytes, timeout)
}

// byteCut returns where a batch that starts at from must end, at to the
// latest, for its events to add up to at most limit bytes (one event at
// least; a limit of 0 cuts nothing), and whether the limit cut it.
func (s *Store) byteCut(from, to uint64, limit int64) (end uint64, cut bool) {
	if limit <= 0 {
		return to, false
	}
	var sum int64
	for i := from; i < to; i++ {
		sum += s.entries[i-s.base].size
		if sum > limit {
			return max(i, from+1), true
		}
	}
	return to, sum == limit
}

// get hands client up to max events of at most maxBytes, waiting up to
// timeout for want events.
func (s *Store) get(ctx context.Context, client string, want, max int, maxBytes int64, timeout time.Duration) (Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[client]
	if !ok {
		return Batch{}, fmt.Errorf("stream: client %q is not subscribed", client)
	}
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	s.skip(c)
	end := s.base + uint64(len(s.entries))
	for end-c.next < uint64(want) && !s.closed && timeout > 0 && (c.next == end || !s.full) {
		if _, cut := s.byteCut(c.next, end, maxBytes); cut {
			break // as many bytes as may go are ready
		}
		if !s.wait(ctx, deadline) {
			break
		}
		s.skip(c)
		end = s.base + uint64(len(s.entries))
	}
	if c.next == end {
		if s.closed {
			return Batch{ID: -1}, ErrClosed
		}
		return Batch{ID: -1}, ctx.Err()
	}
	to, _ := s.byteCut(c.next, min(end, c.next+uint64(max)), maxBytes)
	b := Batch{ID: c.nextID, from: c.next, to: to, Events: make([]*change.Event, 0, to-c.next), Marks: make([]*group.Cursor, 0, to-c.next)}
	for i := c.next; i < to; i++ {
		e := &s.entries[i-s.base]
		b.Events = append(b.Events, e.ev)
		b.Marks = append(b.Marks, e.mark)
	}
	c.nextID++
	c.next = to
	c.batches = append(c.batches, b)
	return b, nil
}

// Ack confirms client's oldest un-acked batch; acks come in the order the
// batches were handed out, as canal's do.
func (s *Store) Ack(client string, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[client]
	if !ok {
		return fmt.Errorf("stream: client %q is not subscribed", client)
	}
	if len(c.batches) == 0 || c.batches[0].ID != id {
		return fmt.Errorf("%w: client %q acked batch %d, its oldest un-acked batch is %s", ErrUnknownBatch, client, id, oldest(c))
	}
	b := c.batches[0]
	c.batches = c.batches[1:]
	for i := b.from; i < b.to; i++ {
		if e := &s.entries[i-s.base]; e.mark != nil {
			c.mark, c.markAt = e.mark, e.ev.CommitTime
		}
	}
	c.acked = b.to
	s.trim()
	return nil
}

func oldest(c *storeClient) string {
	if len(c.batches) == 0 {
		return "none"
	}
	return fmt.Sprint(c.batches[0].ID)
}

// Rollback takes back every batch client has not acked: the next Get
// hands out the same events again.
func (s *Store) Rollback(client string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[client]
	if !ok {
		return fmt.Errorf("stream: client %q is not subscribed", client)
	}
	c.next = c.acked
	c.batches = nil
	return nil
}

// Mark returns the mark of the last event client acked that had one.
func (s *Store) Mark(client string) *group.Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[client]; ok {
		return c.mark
	}
	return nil
}

// trim drops the events every client has acked; the caller holds mu.
func (s *Store) trim() {
	if len(s.clients) == 0 {
		return
	}
	low := ^uint64(0)
	for _, c := range s.clients {
		low = min(low, c.acked)
	}
	n := int(low - s.base)
	if n <= 0 {
		return
	}
	for i := 0; i < n; i++ {
		s.bytes -= s.entries[i].size
		s.entries[i] = storeEntry{}
	}
	s.entries = s.entries[n:]
	s.base = low
	s.broadcast()
}

// ClientStats is one client id's standing in a store.
type ClientStats struct {
	ID string
	// Unacked counts the events held for it: handed out or not, not acked.
	Unacked int
	// Batches counts the batches handed out and not acked.
	Batches int
	// Mark is the mark of the last event it acked that had one (see Mark).
	Mark *group.Cursor
	// AckedSeq is the seq of the last transaction it acked whole (its
	// Mark's), and AckedAt that transaction's commit time (zero before the
	// first ack).
	AckedSeq uint64
	AckedAt  time.Time
}

// Clients lists the subscribed client ids, by id.
func (s *Store) Clients() []ClientStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := s.base + uint64(len(s.entries))
	out := make([]ClientStats, 0, len(s.clients))
	for id, c := range s.clients {
		cs := ClientStats{ID: id, Unacked: int(end - c.acked), Batches: len(c.batches), Mark: c.mark, AckedAt: c.markAt}
		if c.mark != nil {
			cs.AckedSeq = c.mark.Seq
		}
		out = append(out, cs)
	}
	slices.SortFunc(out, func(a, b ClientStats) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Stats is a snapshot of a store's use.
type Stats struct {
	Events    int
	Bytes     int64
	PeakBytes int64
}

// Stats returns the store's use now and its peak.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Events: len(s.entries), Bytes: s.bytes, PeakBytes: s.peak}
}

// Close wakes every waiter; Put and an empty Get then fail with
// ErrClosed.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.broadcast()
}
