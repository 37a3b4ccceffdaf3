package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
)

// ErrDetached: the client id was detached (it held the store full too
// long) while it had batches handed out; they are gone. Reading again (a
// new stream, or a rollback) serves it from its cursor.
var ErrDetached = errors.New("stream: client id detached")

// ErrReplaysBusy: as many replay readers as the store allows
// (Config.MaxReplays) run already; the client may retry in a moment.
var ErrReplaysBusy = errors.New("stream: too many replays")

// ErrHistoryGone: a client asked for transactions that neither the store
// nor the sources' binlogs hold any longer.
var ErrHistoryGone = errors.New("stream: history gone")

// StartKind says where a new client id starts.
type StartKind string

// The start kinds: the destination's first transaction, the next one to
// come, a seq, the first transaction committed at or after a time.
const (
	StartEarliest StartKind = "earliest"
	StartLatest   StartKind = "latest"
	StartSeq      StartKind = "seq"
	StartTime     StartKind = "time"
)

// Start is where a new client id starts: written earliest, latest, seq:N
// or time:RFC3339 (ParseStart). The zero Start is the store's default.
type Start struct {
	Kind StartKind
	Seq  uint64    // StartSeq: the first seq handed out
	Time time.Time // StartTime
}

// ParseStart reads earliest, latest, seq:N or time:RFC3339 ("" is the
// zero Start).
func ParseStart(v string) (Start, error) {
	switch {
	case v == "":
		return Start{}, nil
	case v == string(StartEarliest), v == string(StartLatest):
		return Start{Kind: StartKind(v)}, nil
	case strings.HasPrefix(v, "seq:"):
		n, err := strconv.ParseUint(v[len("seq:"):], 10, 64)
		if err != nil || n == 0 {
			return Start{}, fmt.Errorf("start %q: seq:N takes the first seq to read, 1 or more", v)
		}
		return Start{Kind: StartSeq, Seq: n}, nil
	case strings.HasPrefix(v, "time:"):
		t, err := time.Parse(time.RFC3339Nano, v[len("time:"):])
		if err != nil {
			return Start{}, fmt.Errorf("start %q: time: takes an RFC 3339 time, e.g. time:2026-12-01T10:00:00Z", v)
		}
		return Start{Kind: StartTime, Time: t}, nil
	}
	return Start{}, fmt.Errorf("start %q: want earliest, latest, seq:N or time:RFC3339", v)
}

func (st Start) String() string {
	switch st.Kind {
	case StartSeq:
		return "seq:" + strconv.FormatUint(st.Seq, 10)
	case StartTime:
		return "time:" + st.Time.Format(time.RFC3339Nano)
	}
	return string(st.Kind)
}

// ReplayFunc starts a private pipeline after from (nil: from the
// destination's start) to serve client, or says why it cannot (an error
// wrapping group.ErrPurged when the sources no longer hold from).
type ReplayFunc func(from *group.Cursor, client string) (*Pipeline, error)

// OpenOptions say how a client id is subscribed by Open.
type OpenOptions struct {
	// Start is where a new client id starts; zero: Config.Start. A known
	// client id goes on from where it is.
	Start Start
	// Ephemeral: the client keeps no cursor; its owner unsubscribes it
	// when it goes.
	Ephemeral bool
	// Consumer: a consumer opens it through a server (canal or native),
	// Owner being its user ("" without users): a new client id counts
	// toward Owner's Config.MaxClientsPerOwner, and its replays draw on
	// Owner's share of Config.MaxReplays. A known client id opened so for
	// the first time (one restored from its saved cursor) is Owner's from
	// then on.
	Consumer bool
	Owner    string
}

// Open subscribes client where o says if it is new (see Start); a known
// client id only counts as seen (one refused, ErrBeforeLoss, is told so). A start older than the store holds is
// served by a replay reader (Config.Replay); its error, when the sources
// no longer hold that history, wraps ErrHistoryGone and names the oldest
// seq the store can serve.
func (s *Store) Open(ctx context.Context, client string, o OpenOptions) error {
	s.mu.Lock()
	if c, ok := s.clients[client]; ok {
		c.lastSeen = time.Now()
		if o.Consumer && !c.owned {
			c.owned, c.owner = true, o.Owner
		}
		s.mu.Unlock()
		return c.refused // refused for good (ErrBeforeLoss), or nil
	}
	if o.Consumer && s.countOwned(o.Owner) >= s.cfg.MaxClientsPerOwner {
		s.mu.Unlock()
		return s.tooMany(client, o.Owner)
	}
	key := shareKey(client, &storeClient{owned: o.Consumer, owner: o.Owner})
	st := o.Start
	if st.Kind == "" {
		st = s.cfg.Start
	}
	after, origin, since, here := s.startPoint(st)
	if !here && s.cfg.Replay == nil {
		// No replays here: the oldest transaction held whole is as far
		// back as it goes.
		after, origin, here = s.floor, s.floorMark, true
	}
	if here {
		c := s.newClient(after, origin)
		c.since, c.ephemeral, c.owned, c.owner = since, o.Ephemeral, o.Consumer, o.Owner
		s.clients[client] = c
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	r, err := s.startReplay(client, key, origin, after, since, 0)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[client]; ok {
		go r.Close() // another Open won
		return nil
	}
	if o.Consumer && s.countOwned(o.Owner) >= s.cfg.MaxClientsPerOwner {
		go r.Close() // others of Owner's came in meanwhile
		return s.tooMany(client, o.Owner)
	}
	c := s.newClient(after, origin)
	c.since, c.ephemeral, c.owned, c.owner = since, o.Ephemeral, o.Consumer, o.Owner
	c.detached, c.replay = true, r
	s.clients[client] = c
	return nil
}

// startPoint is where a client starting at st begins: after the
// transaction of seq after, origin the nearest cursor at or before it,
// skipping transactions committed before since; here says whether the
// store holds what it needs. The caller holds mu.
func (s *Store) startPoint(st Start) (after uint64, origin *group.Cursor, since time.Time, here bool) {
	switch st.Kind {
	case StartLatest:
		if s.headMark != nil {
			after = s.headMark.Seq
		}
		return max(after, s.floor), s.headMark, time.Time{}, true
	case StartSeq:
		after = st.Seq - 1
		return after, s.nearestCursor(after), time.Time{}, after >= s.floor
	case StartTime:
		if s.floor == 0 || s.firstHeldBefore(st.Time) {
			return s.floor, s.floorMark, st.Time, true
		}
		return 0, nil, st.Time, false
	}
	return 0, nil, time.Time{}, s.floor == 0 // earliest
}

// nearestCursor is the newest cursor the store knows at or before seq
// (nil: the destination's start): a replay from it reads the least
// before seq. The caller holds mu.
func (s *Store) nearestCursor(seq uint64) *group.Cursor {
	var best *group.Cursor
	consider := func(c *group.Cursor) {
		if c != nil && c.Seq <= seq && (best == nil || c.Seq > best.Seq) {
			best = c
		}
	}
	consider(s.floorMark)
	consider(s.headMark)
	if s.cfg.points != nil {
		for _, c := range s.cfg.points() {
			consider(c)
		}
	}
	for _, c := range s.clients {
		if c.refused != nil {
			continue // before a loss: no replay goes on from there
		}
		consider(c.mark)
		consider(c.origin)
	}
	return best
}

// firstHeldBefore reports whether the first transaction the store holds
// whole (or, when it holds none, the newest put) committed before t: the
// first one at or after t is then held or yet to come, commit times
// being merged in order. The caller holds mu.
func (s *Store) firstHeldBefore(t time.Time) bool {
	for i := range s.entries {
		ev := s.entries[i].ev
		if ev.Seq > s.floor && (ev.Type == change.EventBegin || ev.Type == change.EventDDL) {
			return ev.CommitTime.Before(t)
		}
	}
	return !s.headAt.IsZero() && s.headAt.Before(t)
}

// startReplay starts a replay reader for client after from, handing it
// the transactions after after (and committed at or after since), its
// batch ids from nextID on; key is whose share it draws on (shareKey).
func (s *Store) startReplay(client, key string, from *group.Cursor, after uint64, since time.Time, nextID int64) (*Pipeline, error) {
	s.mu.Lock()
	running, mine := s.startingReplays, s.startingBy[key]
	for id, c := range s.clients {
		if c.replay != nil {
			running++
			if shareKey(id, c) == key {
				mine++
			}
		}
	}
	if running >= s.cfg.MaxReplays {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %d replay readers serve client ids behind the store already, at most %d at once: retry in a moment", ErrReplaysBusy, running, s.cfg.MaxReplays)
	}
	if share := s.replayShare(); mine >= share {
		s.mu.Unlock()
		who := "client id " + client
		if u, ok := strings.CutPrefix(key, "u:"); ok {
			who = "user " + u
		}
		return nil, fmt.Errorf("%w: %s runs %d of the destination's %d replay readers already, at most %d at once: retry once one has caught up", ErrReplaysBusy, who, mine, s.cfg.MaxReplays, share)
	}
	s.startingReplays++
	s.startingBy[key]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.startingReplays--
		if s.startingBy[key]--; s.startingBy[key] == 0 {
			delete(s.startingBy, key)
		}
		s.mu.Unlock()
	}()
	r, err := s.cfg.Replay(from, client)
	if err != nil {
		return nil, s.historyError(err)
	}
	r.Store.mu.Lock()
	c := r.Store.newClient(after, from)
	c.since, c.nextID = since, nextID
	r.Store.clients[client] = c
	r.Store.mu.Unlock()
	return r, nil
}

// historyError turns a replay's failure into what the client is told.
func (s *Store) historyError(err error) error {
	if !errors.Is(err, group.ErrPurged) {
		return fmt.Errorf("stream: cannot replay the history asked for: %w", err)
	}
	s.mu.Lock()
	oldest := s.floor + 1
	s.mu.Unlock()
	return fmt.Errorf("%w: %v; the oldest seq still available is %d: start at seq:%d or later, or at latest", ErrHistoryGone, err, oldest, oldest)
}

// route says who serves client's next batch: its replay reader (started
// now if it was detached), with the store's floor, past which the replay
// hands out nothing, or nil for the store itself, which it rejoins here
// once the replay has caught up with what the store holds.
//
// The store's other clients may ack each transaction as it comes, and
// the floor move with the newest: a replay a transaction behind would
// never reach it. So once the replay has read up to the floor the client
// is pinned (storeClient.pinned): the store keeps what comes from then
// on, the floor stays, and the client rejoins when it has acked up to
// it. (A pinned client holding the store full for Config.DetachAfter is
// let go by Maintain, and its replay serves it on.)
func (s *Store) route(client string) (*Pipeline, uint64, error) {
	for {
		s.mu.Lock()
		c, ok := s.clients[client]
		if !ok {
			s.mu.Unlock()
			return nil, 0, nil // getHere says it is not subscribed
		}
		if c.reset {
			c.reset = false
			s.mu.Unlock()
			return nil, 0, fmt.Errorf("%w: it held the store full too long; the batches handed out before are void: read again from the last one acked", ErrDetached)
		}
		if !c.detached {
			s.mu.Unlock()
			return nil, 0, nil
		}
		c.lastSeen = time.Now()
		if c.refused != nil {
			s.mu.Unlock()
			return nil, 0, c.refused
		}
		if c.replay == nil {
			from, after, since, nextID, key := c.resumeCursor(), c.done, c.since, c.nextID, shareKey(client, c)
			s.mu.Unlock()
			r, err := s.startReplay(client, key, from, after, since, nextID)
			if err != nil {
				return nil, 0, err
			}
			s.mu.Lock()
			if s.clients[client] != c || c.replay != nil || !c.detached {
				s.mu.Unlock()
				go r.Close()
				continue
			}
			c.replay = r
		}
		r := c.replay
		rc := r.Store.client(client)
		if len(rc.batches) == 0 && rc.clean && rc.since.IsZero() && rc.done >= s.floor {
			// Caught up: every transaction after rc.done is held here.
			c.detached, c.replay, c.pinned, c.letGo = false, nil, false, nil
			c.acked, c.next, c.batches = s.base, s.base, nil
			c.after, c.done, c.clean, c.nextID, c.ahead = rc.done, rc.done, true, rc.nextID, false
			if rc.mark != nil {
				c.mark, c.markAt = rc.mark, rc.markAt
			}
			floor := s.floor
			s.mu.Unlock()
			s.cfg.Logger.Info("replayed client caught up: it reads from the store again", "client", client, "seq", rc.done, "store_floor", floor)
			go r.Close()
			return nil, 0, nil
		}
		if !c.pinned && c.letGo != r && r.Store.headSeq() >= s.floor {
			c.pinned, c.acked, c.next = true, s.base, s.base
		}
		floor := s.floor
		s.mu.Unlock()
		return r, floor, nil
	}
}

// replayEnded is what a client is told when its replay reader's store
// closed: why the replay stopped, or ErrClosed.
func (s *Store) replayEnded(client string, r *Pipeline) error {
	err := r.Err()
	s.mu.Lock()
	if c := s.clients[client]; c != nil && c.replay == r {
		c.replay, c.pinned = nil, false // the next read starts another, from its cursor
		s.trim()
	}
	closed := s.closed
	s.mu.Unlock()
	if err == nil || closed {
		return ErrClosed
	}
	return s.historyError(err)
}

// ErrReplayDiverged: a client's replay reader read a transaction the
// stream never had where the stream has a LOST marker (replayDiverged).
var ErrReplayDiverged = errors.New("stream: replay diverged from the stream at a loss")

// diverges returns the first event replay r would hand client (up to seq
// upto) that the destination's live run did not have at its seq: one at
// a seq where the live run's LOST marker went out that is not that
// marker, or a marker the live run emitted at another seq; first says
// whether it is the next event client would get. nil when there is none.
//
// A replay reader may read, on a source's server that then dies, a
// transaction the live reader never did (a consumer's replay ahead of a
// live reader held by backpressure); after the failover and the accept
// of the loss, the live run emits the LOST marker at the seq the replay
// gave that transaction. No replay may hand it out: the stream never had
// it, and its consumer would miss the marker (a silent divergence). The
// markers are noted before they are emitted, and a replay hands out
// nothing past the store's floor, so every marker up to upto is known.
func (r *Pipeline) diverges(client string, upto uint64) (ev *change.Event, first bool) {
	live := r.cfg.replayOf
	if live == nil {
		return nil, false
	}
	markers := live.Dest.MarkersOut()
	if len(markers) == 0 {
		return nil, false
	}
	at := make(map[string]uint64, len(markers))
	for seq, lost := range markers {
		at[lost] = seq
	}
	s := r.Store
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[client]
	if !ok {
		return nil, false
	}
	s.skip(c)
	end := s.bounded(c.next, upto)
	for i := c.next; i < end; i++ {
		e := s.entries[i-s.base].ev
		lost, marker := markers[e.Seq]
		seq, out := at[e.Lost]
		if (marker && e.Lost != lost) || (e.Lost != "" && out && seq != e.Seq) {
			return e, e.Seq == s.entries[c.next-s.base].ev.Seq
		}
	}
	return nil, false
}

// replayDiverged ends client's replay r, which read ev, a transaction the
// stream does not have at its seq (diverges), and says so.
func (s *Store) replayDiverged(client string, r *Pipeline, ev *change.Event) error {
	s.mu.Lock()
	if c := s.clients[client]; c != nil && c.replay == r {
		c.replay, c.pinned = nil, false // the next read starts another, from its cursor
		s.trim()
	}
	s.mu.Unlock()
	go r.Close()
	markers := r.cfg.replayOf.Dest.MarkersOut()
	live, after := markers[ev.Seq], ev.Seq
	what := fmt.Sprintf("the stream has there the LOST marker of %s, transactions of source %s lost in a failover", live, ev.Source)
	if live == "" {
		what = fmt.Sprintf("the stream has another transaction there; this is the LOST marker of %s", ev.Lost)
		for seq, lost := range markers {
			if lost == ev.Lost {
				after = seq
			}
		}
	}
	err := fmt.Errorf("%w: client id %s: its replay reader read, as seq %d, a transaction the stream never had (%s): "+
		"it read on a source's server past what the stream read before a failover lost it, so it is not handed out and the replay is ended. "+
		"Read again: a new replay from the client's cursor goes on past the loss as the stream did, or stops saying why; "+
		"or drop the client id (braid consumer drop) and subscribe it again after the marker (seq:%d)",
		ErrReplayDiverged, client, ev.Seq, what, after)
	s.cfg.Logger.Warn("a replay diverged from the stream at a loss: ended", "client", client, "seq", ev.Seq, "err", err)
	return err
}

// holders are the client ids the store waits for: not detached (or
// pinned), their acked point the oldest event held. The caller holds mu.
func (s *Store) holders() []string {
	var ids []string
	for id, c := range s.clients {
		if (!c.detached || c.pinned) && c.acked == s.base {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Notice is something Maintain did or saw, for the owner to log.
type Notice struct {
	// Kind is NoticeBlocked, NoticeDetached or NoticeExpired.
	Kind string
	// Clients are the client ids concerned.
	Clients []string
	// For is how long the store has been full, or the client unseen.
	For time.Duration
}

// The kinds of Notice.
const (
	NoticeBlocked  = "blocked"
	NoticeDetached = "detached"
	NoticeExpired  = "expired"
)

// Maintain applies the store's consumer policy at now: once the store
// has been full for Config.WarnAfter it names the client ids holding it
// (and Stats shows them as BlockedBy); after Config.DetachAfter it
// detaches them (their cursors stay; a replay reader serves them when
// they read again); it drops client ids unseen for Config.ExpireAfter.
// The owner of the store calls it periodically and logs the notices.
func (s *Store) Maintain(now time.Time) []Notice {
	var notes []Notice
	var stop []*Pipeline
	s.mu.Lock()
	if s.full {
		held := now.Sub(s.fullSince)
		if !s.warned && held >= s.cfg.WarnAfter {
			s.warned = true
			if ids := s.holders(); len(ids) > 0 {
				notes = append(notes, Notice{Kind: NoticeBlocked, Clients: ids, For: held})
			}
		}
		if s.cfg.DetachAfter > 0 && s.cfg.Replay != nil && held >= s.cfg.DetachAfter {
			ids := s.holders()
			for _, id := range ids {
				if c := s.clients[id]; c.pinned {
					c.pinned, c.letGo = false, c.replay // its replay serves it on
					s.trim()
				}
			}
			ids = slices.DeleteFunc(ids, func(id string) bool { return s.clients[id].detached })
			if len(ids) > 0 && len(ids) < s.attached() {
				for _, id := range ids {
					c := s.clients[id]
					c.detached, c.reset = true, len(c.batches) > 0
					c.batches = nil
				}
				notes = append(notes, Notice{Kind: NoticeDetached, Clients: ids, For: held})
				s.fullSince, s.warned = now, false // the next holder gets its own time
				s.trim()
			}
		}
	}
	if d := s.cfg.ExpireAfter; d > 0 {
		var ids []string
		for id, c := range s.clients {
			if c.reading == 0 && now.Sub(c.lastSeen) >= d && !isSink(id) {
				ids = append(ids, id)
				if c.replay != nil {
					stop = append(stop, c.replay)
				}
				delete(s.clients, id)
			}
		}
		if len(ids) > 0 {
			slices.Sort(ids)
			notes = append(notes, Notice{Kind: NoticeExpired, Clients: ids, For: d})
			s.trim()
		}
	}
	s.mu.Unlock()
	for _, r := range stop {
		r.Close()
	}
	return notes
}

// attached counts the clients the store serves itself; the caller holds
// mu.
func (s *Store) attached() int {
	n := 0
	for _, c := range s.clients {
		if !c.detached {
			n++
		}
	}
	return n
}
