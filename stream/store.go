package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
)

// ErrUnknownBatch: an Ack named a batch that is not the client's oldest
// un-acked one.
var ErrUnknownBatch = errors.New("stream: unknown batch")

// ErrNotSubscribed: the client id is not subscribed to the store (never
// was, or was dropped or expired).
var ErrNotSubscribed = errors.New("stream: client is not subscribed")

// ErrClosed: the store was closed.
var ErrClosed = errors.New("stream: store closed")

// DefaultBytes is Config.MaxBytes's default.
const DefaultBytes = 64 << 20

// DefaultMaxReplays is Config.MaxReplays's default, and ReplayBytes the
// bound of a replay reader's store: together they bound what replays
// hold beside the store (64 MiB, plus each replay's source queues).
const (
	DefaultMaxReplays = 4
	ReplayBytes       = 16 << 20
)

// Config bounds a Store and says how its consumers start and are let go.
// Zero fields take the defaults given.
type Config struct {
	// MaxBytes bounds the estimated memory of the events held (see
	// Event.Size). Default: 64 MiB.
	MaxBytes int64
	// MaxEvents bounds their number. Default: 65536.
	MaxEvents int
	// After is the cursor the producer starts after: the first event Put
	// is of transaction After.Seq+1. Default: nil, the destination's start
	// (its first event is of transaction 1).
	After *group.Cursor
	// Start is where a new client id that does not ask starts (a canal
	// client, which cannot). Default: earliest.
	Start Start
	// Replay, if set, starts a private pipeline after a cursor (nil: from
	// the destination's start) for a client whose position is older than
	// the store holds. Without it such a client starts at the oldest
	// transaction held, as it could before replays.
	Replay ReplayFunc
	// MaxReplays bounds the replay readers running at once, each a merge
	// and a store of its own; one user (OpenOptions.Owner, when not "")
	// may run half of them at most (at least one). Default:
	// DefaultMaxReplays.
	MaxReplays int
	// MaxClientsPerOwner bounds the client ids one owner may have
	// subscribed through Open with OpenOptions.Consumer: the one past it
	// is refused (ErrTooManyClients) and nothing of it is kept. Default:
	// DefaultMaxClientsPerOwner.
	MaxClientsPerOwner int
	// WarnAfter is how long the store may stay full before Maintain names
	// the client ids holding it. Default: 1s.
	WarnAfter time.Duration
	// DetachAfter is how long a client id may hold the store full before
	// Maintain detaches it: its cursor stays, and a replay reader serves
	// it when it reads again. Default: never.
	DetachAfter time.Duration
	// ExpireAfter drops a client id that has not read for that long
	// (Maintain); sinks' client ids (SinkClientPrefix) are never dropped.
	// Default (and 0 or less): never.
	ExpireAfter time.Duration
	// Logger receives the store's own lines (a replayed client rejoining).
	// Default: discarded.
	Logger *slog.Logger
	// cutAtMarks ends batches at transaction boundaries when one is in
	// range: a replay store's client must reach one to rejoin the main
	// store.
	cutAtMarks bool
	// points lists cursors, besides the store's own and its clients', a
	// replay may start from (nearestCursor): right before each LOST
	// marker kept, so that a client that subscribes at the marker's seq
	// gets it, replayed past the loss. Called under the store's lock.
	points func() []*group.Cursor
}

// Store holds a destination's events between the producer (the merge) and
// its consumers, canal-style: each client id gets batches (Get), acks them
// in order (Ack) or takes them all back (Rollback). Events stay until every
// client has acked them; when the store is full, Put waits (backpressure
// reaching the readers). Nothing is dropped.
//
// Each event may carry a mark (the producer's cursor at a transaction
// boundary); a client's Mark is the last one it acked, to be saved.
//
// A client id starts where it asks (Open): at the destination's start, the
// newest transaction, a seq or a time. One whose start, or whose cursor
// after being detached (Maintain), is older than the store holds is served
// by a replay reader: a private pipeline from the nearest cursor, whose
// seqs are the same by determinism. When it has caught up with what the
// store holds, it rejoins the store at a transaction boundary.
//
// # Invariants
//
//   - Events are handed out in Put order; a client never skips one.
//   - Held bytes stay within MaxBytes and events within MaxEvents, except
//     that one event is always accepted into an empty store.
//   - A client's acked point never moves backwards.
//   - Every transaction after floor is held whole or yet to come.
//   - A detached client holds nothing in the store, but while pinned
//     (its replay has read up to the store, which keeps what comes next
//     for it to rejoin).
//   - A replay hands its client no transaction past the store's floor.
//
// # Concurrency
//
// A Store is safe for concurrent use by one producer and any number of
// clients. Lock order: a store before its clients' replay stores.
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
	// is, since no more can come until some is acked. fullSince is when
	// it last became full, warned whether Maintain named the holders.
	full      bool
	fullSince time.Time
	warned    bool
	// floor is the seq of the newest transaction not held whole (dropped
	// in part or in all): every later one is held or yet to come.
	// floorMark is the cursor after the last transaction dropped whole
	// (Config.After before any), the nearest a replay can start from.
	floor     uint64
	floorMark *group.Cursor
	// headMark is the mark of the newest transaction put whole, and
	// headAt its commit time: where a client starting at latest begins.
	headMark *group.Cursor
	headAt   time.Time
	// startingReplays counts replay readers being started (MaxReplays),
	// in all and by share (shareKey).
	startingReplays int
	startingBy      map[string]int
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
	// (see SubscribeAfter); since, while not zero, skips transactions that
	// committed before it (a start at a time).
	after uint64
	since time.Time
	// done is the seq of the last transaction the client has whole (acked
	// or skipped) and clean whether its acked point is right after it;
	// origin is the cursor it started after (nil: the destination's
	// start), which a replay starts from until it has a mark.
	done   uint64
	clean  bool
	origin *group.Cursor

	ephemeral bool
	// owned: a consumer opened it (OpenOptions.Consumer), owner being
	// who; it counts toward owner's Config.MaxClientsPerOwner.
	owned    bool
	owner    string
	lastSeen time.Time
	// reading counts its reads in progress: a client waiting in one (a
	// canal GET may wait for days) is seen, whatever lastSeen says.
	reading int
	// detached: it held the store full too long (Maintain); replay, once
	// it reads again, serves it; reset makes its next Get fail with
	// ErrDetached, for it had batches handed out that are gone.
	detached bool
	replay   *Pipeline
	reset    bool
	// refused: its cursor lies before transactions lost in a failover
	// (subscribeRefused); every read fails with it, and no replay starts.
	refused error
	// pinned: served by its replay, which has read up to what the store
	// holds; the store keeps, from acked on, what it reads here once the
	// replay hands it over (route). Without it a store whose other
	// clients ack at once lets go of each transaction as it comes, and a
	// replay a transaction behind never reaches what the store holds.
	pinned bool
	// letGo is the replay whose pin held the store full too long
	// (Maintain): it serves the client on, never pinned again, so that
	// a consumer slower than the stream does not stall it time and again.
	letGo *Pipeline
	// ahead: it acked batches inside a transaction it has not acked
	// whole (AckAhead) since its acked point was last after a
	// transaction's end; Rollback then rewinds it to its mark.
	ahead bool
}

// resumeCursor is where a replay of c starts from: the newer of its
// mark and its origin (nil: the destination's start). Its events up to
// c.done are skipped.
func (c *storeClient) resumeCursor() *group.Cursor {
	if c.mark != nil && (c.origin == nil || c.mark.Seq > c.origin.Seq) {
		return c.mark
	}
	return c.origin
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
	if cfg.MaxReplays <= 0 {
		cfg.MaxReplays = DefaultMaxReplays
	}
	if cfg.MaxClientsPerOwner <= 0 {
		cfg.MaxClientsPerOwner = DefaultMaxClientsPerOwner
	}
	if cfg.WarnAfter <= 0 {
		cfg.WarnAfter = time.Second
	}
	if cfg.Start.Kind == "" {
		cfg.Start.Kind = StartEarliest
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, changed: make(chan struct{}), clients: map[string]*storeClient{}, startingBy: map[string]int{}, floorMark: cfg.After, headMark: cfg.After}
	if cfg.After != nil {
		s.floor = cfg.After.Seq
	}
	return s
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
			s.full, s.fullSince, s.warned = true, time.Now(), false
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
	if mark != nil {
		s.headMark, s.headAt = mark, ev.CommitTime
	}
	s.broadcast()
	return nil
}

// Subscribe registers a client id at the store's Config.Start (what a new
// client that does not ask gets). Subscribing a known client does nothing.
func (s *Store) Subscribe(client string) {
	_ = s.Open(context.Background(), client, OpenOptions{})
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
		c := s.newClient(seq, mark)
		c.mark = mark
		s.clients[client] = c
	}
}

// subscribeDetached registers a client id that was detached (its saved
// cursor says so) with that cursor: it holds nothing, and its first read
// starts a replay from the cursor. Subscribing a known client does
// nothing.
func (s *Store) subscribeDetached(client string, mark *group.Cursor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[client]; !ok {
		c := s.newClient(mark.Seq, mark)
		c.mark, c.detached = mark, true
		s.clients[client] = c
	}
}

// subscribeRefused registers a client id whose saved cursor, mark, the
// destination cannot serve (ErrBeforeLoss): it holds nothing, keeps its
// cursor, and each read fails with why until it is dropped. Subscribing
// a known client does nothing.
func (s *Store) subscribeRefused(client string, mark *group.Cursor, why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[client]; !ok {
		c := s.newClient(mark.Seq, mark)
		c.mark, c.detached, c.refused = mark, true, why
		s.clients[client] = c
	}
}

// newClient is a client of the store that has every transaction up to
// after, origin the cursor there (nil: the destination's start); the
// caller holds mu.
func (s *Store) newClient(after uint64, origin *group.Cursor) *storeClient {
	return &storeClient{acked: s.base, next: s.base, after: after, done: after, clean: true, origin: origin, lastSeen: time.Now()}
}

// skip acks for c the events of transactions it already has (see
// SubscribeAfter) or that committed before its start time; the caller
// holds mu.
func (s *Store) skip(c *storeClient) {
	if (c.after == 0 && c.since.IsZero()) || len(c.batches) > 0 {
		return
	}
	end := s.base + uint64(len(s.entries))
	from := c.next
	for c.next < end {
		ev := s.entries[c.next-s.base].ev
		if ev.Seq > c.after && !c.since.IsZero() && (ev.Type == change.EventBegin || ev.Type == change.EventDDL) {
			if !ev.CommitTime.Before(c.since) {
				c.since = time.Time{} // the first transaction at or after it
			} else {
				c.after = ev.Seq
			}
		}
		if ev.Seq > c.after {
			break
		}
		c.next++
	}
	if c.next < end && c.since.IsZero() {
		c.after = 0 // past it: nothing more to skip
	}
	if c.next > from {
		c.acked = c.next
		c.done, c.clean = max(c.done, s.entries[c.next-1-s.base].ev.Seq), true
		s.trim()
	}
}

// Unsubscribe forgets a client id, its cursor and its un-acked batches:
// the store no longer holds events for it (canal's UNSUBSCRIPTION).
// Subscribing it again starts it anew.
func (s *Store) Unsubscribe(client string) {
	s.mu.Lock()
	c, ok := s.clients[client]
	if ok {
		delete(s.clients, client)
		s.trim()
	}
	s.mu.Unlock()
	if ok && c.replay != nil {
		c.replay.Close()
	}
}

// Get hands client up to max events not yet handed out, waiting up to
// timeout for the first (0: do not wait). Nothing ready gives an empty
// batch with ID -1.
func (s *Store) Get(ctx context.Context, client string, max int, timeout time.Duration) (Batch, error) {
	return s.get(ctx, client, 1, max, 0, timeout, false)
}

// GetTx is Get ending a batch at the end of the last transaction in it
// when one ends in it, so that a client that acks whole transactions can
// ack the batch once it has them (a batch that ends inside a transaction
// holds that transaction alone).
func (s *Store) GetTx(ctx context.Context, client string, max int, timeout time.Duration) (Batch, error) {
	return s.get(ctx, client, 1, max, 0, timeout, true)
}

// Fill is Get waiting up to timeout for max events rather than for the
// first, as canal's server fills a GET's fetch size, and handing out no
// more events than add up to maxBytes (by Event.Size; one at least; 0: no
// bound), so that what is made of a batch is bounded whatever the
// client asks for. It returns early when max events or maxBytes are ready,
// or when the store is full (no more can come before an ack).
func (s *Store) Fill(ctx context.Context, client string, max int, maxBytes int64, timeout time.Duration) (Batch, error) {
	return s.get(ctx, client, max, max, maxBytes, timeout, false)
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

// markCut returns where a batch from from to to ends when it must end at a
// transaction boundary: after the last marked event in range, if any.
func (s *Store) markCut(from, to uint64) uint64 {
	for i := to; i > from; i-- {
		if s.entries[i-1-s.base].mark != nil {
			return i
		}
	}
	return to
}

// get hands client up to max events of at most maxBytes, waiting up to
// timeout for want events, ending the batch at a transaction's end when
// cut is set and one is in range, and handing out no event of a
// transaction past seq upto (unbounded: ^uint64(0)).
func (s *Store) get(ctx context.Context, client string, want, max int, maxBytes int64, timeout time.Duration, cut bool) (Batch, error) {
	return s.getUpTo(ctx, client, want, max, maxBytes, timeout, cut, ^uint64(0))
}

func (s *Store) getUpTo(ctx context.Context, client string, want, max int, maxBytes int64, timeout time.Duration, cut bool, upto uint64) (Batch, error) {
	for {
		r, floor, err := s.route(client)
		if err != nil {
			return Batch{ID: -1}, err
		}
		if r != nil {
			// A replay hands out no transaction past the store's floor:
			// the store holds every later one, or will (this one's
			// producer has emitted no more), so the replay never gives
			// what the stream did not, and the client rejoins the store
			// there (route).
			bound := min(upto, floor)
			if ev, first := r.diverges(client, bound); ev != nil {
				if first {
					return Batch{ID: -1}, s.replayDiverged(client, r, ev)
				}
				bound = ev.Seq - 1 // what comes before it goes out; the next get ends the replay
			}
			s.reading(client, 1)
			b, err := r.Store.getUpTo(ctx, client, want, max, maxBytes, timeout, cut, bound)
			s.reading(client, -1)
			if errors.Is(err, ErrClosed) {
				err = s.replayEnded(client, r)
			}
			return b, err
		}
		b, again, err := s.getHere(ctx, client, want, max, maxBytes, timeout, cut, upto)
		if !again {
			return b, err
		}
	}
}

// bounded is where what client may be handed out ends: the end of the
// events held, or the first of a transaction past upto. The caller holds
// mu.
func (s *Store) bounded(from, upto uint64) uint64 {
	end := s.base + uint64(len(s.entries))
	if upto == ^uint64(0) {
		return end
	}
	for i := from; i < end; i++ {
		if s.entries[i-s.base].ev.Seq > upto {
			return i
		}
	}
	return end
}

// getHere is get for a client the store serves itself; again says that
// it was detached meanwhile.
func (s *Store) getHere(ctx context.Context, client string, want, max int, maxBytes int64, timeout time.Duration, cut bool, upto uint64) (b Batch, again bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[client]
	if !ok {
		return Batch{}, false, fmt.Errorf("%w: client %q", ErrNotSubscribed, client)
	}
	if c.detached {
		return Batch{}, true, nil
	}
	c.reading++
	defer func() { c.reading--; c.lastSeen = time.Now() }()
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	s.skip(c)
	end := s.bounded(c.next, upto)
	for end-c.next < uint64(want) && !s.closed && timeout > 0 && (c.next == end || !s.full) {
		if _, cut := s.byteCut(c.next, end, maxBytes); cut {
			break // as many bytes as may go are ready
		}
		if !s.wait(ctx, deadline) {
			break
		}
		if c.detached {
			return Batch{}, true, nil
		}
		s.skip(c)
		end = s.bounded(c.next, upto)
	}
	if c.next == end {
		if s.closed && end == s.base+uint64(len(s.entries)) {
			return Batch{ID: -1}, false, ErrClosed
		}
		return Batch{ID: -1}, false, ctx.Err()
	}
	to, _ := s.byteCut(c.next, min(end, c.next+uint64(max)), maxBytes)
	if s.cfg.cutAtMarks || cut {
		to = s.markCut(c.next, to)
	}
	b = Batch{ID: c.nextID, from: c.next, to: to, Events: make([]*change.Event, 0, to-c.next), Marks: make([]*group.Cursor, 0, to-c.next)}
	for i := c.next; i < to; i++ {
		e := &s.entries[i-s.base]
		b.Events = append(b.Events, e.ev)
		b.Marks = append(b.Marks, e.mark)
	}
	c.nextID++
	c.next = to
	c.batches = append(c.batches, b)
	return b, false, nil
}

// reading counts a read of client in progress (delta 1) or ended (-1).
func (s *Store) reading(client string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[client]; ok {
		c.reading += delta
		c.lastSeen = time.Now()
	}
}

// Ack confirms client's oldest un-acked batch; acks come in the order the
// batches were handed out, as canal's do.
func (s *Store) Ack(client string, id int64) error {
	return s.ack(client, id, false)
}

// ack is Ack; ahead marks an AckAhead.
func (s *Store) ack(client string, id int64, ahead bool) error {
	s.mu.Lock()
	c, ok := s.clients[client]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: client %q", ErrNotSubscribed, client)
	}
	c.lastSeen = time.Now()
	if r := c.replay; r != nil {
		if ahead {
			c.ahead = true // this store rewinds it (Rollback), not the replay's
		}
		s.mu.Unlock()
		if err := r.Store.ack(client, id, ahead); err != nil {
			return err
		}
		// The replay's client moved: its cursor is the one to save.
		s.mu.Lock()
		defer s.mu.Unlock()
		if rc := r.Store.client(client); rc.mark != nil && c.replay == r {
			c.mark, c.markAt, c.done = rc.mark, rc.markAt, rc.done
		}
		return nil
	}
	defer s.mu.Unlock()
	if len(c.batches) == 0 || c.batches[0].ID != id {
		return fmt.Errorf("%w: client %q acked batch %d, its oldest un-acked batch is %s", ErrUnknownBatch, client, id, oldest(c))
	}
	b := c.batches[0]
	c.batches = c.batches[1:]
	for i := b.from; i < b.to; i++ {
		if e := &s.entries[i-s.base]; e.mark != nil {
			c.mark, c.markAt = e.mark, e.ev.CommitTime
			c.done = max(c.done, e.mark.Seq)
		}
	}
	c.clean = b.to > b.from && s.entries[b.to-1-s.base].mark != nil
	c.ahead = (c.ahead || ahead) && !c.clean
	c.acked = b.to
	s.trim()
	return nil
}

// ErrNoReplay: AckAhead on a store that cannot replay (no
// Config.Replay).
var ErrNoReplay = errors.New("stream: the store has no replay reader")

// AckAhead is Ack for a batch that holds only events of a transaction the
// client has not acked whole, for a client that acks whole transactions
// only (the native API's, whose consumer learns that a transaction is
// complete when the next begins) while the store waits for that
// transaction's end (Full): a transaction bigger than the store would
// stall it for good. It frees the batch's events; the client's mark does
// not move. Its next Rollback cannot hand out the rest of that
// transaction alone: it drops what the client holds, and its next read
// starts a replay reader from its mark, which hands the transaction out
// again whole. A store without Config.Replay refuses (ErrNoReplay).
func (s *Store) AckAhead(client string, id int64) error {
	if s.cfg.Replay == nil {
		return fmt.Errorf("%w: client %q cannot ack inside a transaction", ErrNoReplay, client)
	}
	return s.ack(client, id, true)
}

// rewind makes c, which acked inside a transaction ahead of its consumer
// (AckAhead), read again from its mark: it holds nothing, and its next
// read starts a replay reader from the mark. The caller holds mu.
func (s *Store) rewind(c *storeClient) {
	c.detached, c.ahead, c.reset, c.replay, c.batches, c.pinned = true, false, false, nil, nil, false
	s.trim()
}

// Full reports whether the store that serves client (a replay reader's,
// for a client it serves) waits for room: no more events come to it until
// some are acked.
func (s *Store) Full(client string) bool {
	s.mu.Lock()
	c, ok := s.clients[client]
	if !ok || c.replay == nil {
		defer s.mu.Unlock()
		return s.full
	}
	r := c.replay
	s.mu.Unlock()
	r.Store.mu.Lock()
	defer r.Store.mu.Unlock()
	return r.Store.full
}

// Subscribed reports whether client is subscribed.
func (s *Store) Subscribed(client string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.clients[client]
	return ok
}

// client returns the state of a subscribed client, a copy taken under mu.
func (s *Store) client(id string) storeClient {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[id]; ok {
		return *c
	}
	return storeClient{}
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
	c, ok := s.clients[client]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: client %q", ErrNotSubscribed, client)
	}
	if r := c.replay; r != nil {
		if rc := r.Store.client(client); c.ahead && !rc.clean {
			// Acked inside a transaction in the replay: another
			// replay, from the client's mark, hands it out whole.
			c.replay, c.ahead, c.nextID, c.pinned = nil, false, rc.nextID, false
			s.trim()
			s.mu.Unlock()
			r.Close()
			return nil
		}
		c.ahead = false
		s.mu.Unlock()
		return r.Store.Rollback(client)
	}
	defer s.mu.Unlock()
	if c.ahead && !c.clean {
		s.rewind(c)
		return nil
	}
	c.next = c.acked
	c.batches = nil
	c.reset = false // nothing handed out is outstanding now
	return nil
}

// Done returns the seq of the last transaction client has whole (acked,
// skipped as before its start, or its cursor's): where a stream of it
// stands before it hands anything out.
func (s *Store) Done(client string) uint64 {
	s.mu.Lock()
	c, ok := s.clients[client]
	if !ok {
		s.mu.Unlock()
		return 0
	}
	done, r := c.done, c.replay
	s.mu.Unlock()
	if r != nil {
		done = max(done, r.Store.Done(client))
	}
	return done
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
// Detached clients hold nothing, but for a pinned one.
func (s *Store) trim() {
	low, any := ^uint64(0), false
	for _, c := range s.clients {
		if !c.detached || c.pinned {
			low, any = min(low, c.acked), true
		}
	}
	if !any {
		return
	}
	n := int(low - s.base)
	if n <= 0 {
		return
	}
	for i := 0; i < n; i++ {
		e := &s.entries[i]
		if e.mark != nil {
			s.floorMark = e.mark
			s.floor = e.mark.Seq
		} else {
			s.floor = max(s.floor, e.ev.Seq) // a transaction dropped in part
		}
		s.bytes -= e.size
		*e = storeEntry{}
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
	// Ephemeral: it keeps no cursor (nothing is saved for it).
	Ephemeral bool
	// Detached: it held the store full too long and holds nothing now;
	// Replaying: a replay reader of its own serves it; Pinned: that
	// replay has read up to what the store holds, which keeps what comes
	// next for it to rejoin.
	Detached, Replaying, Pinned bool
	// Refused says why the destination cannot serve it (ErrBeforeLoss);
	// "" for one it serves.
	Refused string
	// LastSeen is when it last read or acked.
	LastSeen time.Time
}

// Clients lists the subscribed client ids, by id.
func (s *Store) Clients() []ClientStats {
	s.mu.Lock()
	end := s.base + uint64(len(s.entries))
	out := make([]ClientStats, 0, len(s.clients))
	replays := map[string]*Pipeline{}
	for id, c := range s.clients {
		cs := ClientStats{ID: id, Batches: len(c.batches), Mark: c.mark, AckedAt: c.markAt,
			Ephemeral: c.ephemeral, Detached: c.detached, Replaying: c.replay != nil, Pinned: c.pinned, LastSeen: c.lastSeen}
		if !c.detached && c.replay == nil {
			cs.Unacked = int(end - c.acked)
		}
		if c.refused != nil {
			cs.Refused = c.refused.Error()
		}
		if c.replay != nil {
			replays[id] = c.replay
		}
		if c.mark != nil {
			cs.AckedSeq = c.mark.Seq
		}
		out = append(out, cs)
	}
	s.mu.Unlock()
	for i := range out {
		if r := replays[out[i].ID]; r != nil {
			rc := r.Store.Clients()
			if len(rc) == 1 {
				out[i].Batches = rc[0].Batches
			}
		}
	}
	slices.SortFunc(out, func(a, b ClientStats) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Stats is a snapshot of a store's use.
type Stats struct {
	Events    int
	Bytes     int64
	PeakBytes int64
	// Floor is the seq of the newest transaction the store no longer holds
	// whole: it serves every later one itself, a replay reader the rest.
	Floor uint64
	// BlockedBy names the client ids holding the store full, once it has
	// been full for Config.WarnAfter; empty otherwise.
	BlockedBy []string
}

// Stats returns the store's use now and its peak.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Events: len(s.entries), Bytes: s.bytes, PeakBytes: s.peak, Floor: s.floor}
	if s.full && s.warned {
		st.BlockedBy = s.holders()
	}
	return st
}

// Close wakes every waiter; Put and an empty Get then fail with
// ErrClosed.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.broadcast()
}

// headSeq is the seq of the newest transaction put whole (0: none).
func (s *Store) headSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headMark == nil {
		return 0
	}
	return s.headMark.Seq
}
