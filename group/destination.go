package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/spec"
)

// Config configures a Destination. Zero fields take the defaults given.
type Config struct {
	// Spec is the destination; required, with defaults applied
	// (spec.Parse applies them).
	Spec *spec.Spec
	// Resume continues after this cursor instead of the sources' start
	// positions.
	Resume *Cursor
	// QueueEvents and QueueBytes bound each source's queue of events read
	// ahead of the merge, in events and in estimated bytes (Event.Size); a
	// full queue makes its reader wait, though an empty one always takes
	// one event. Defaults: 256 events (measured in bench/: 1024 held
	// 300 MiB for four sources and merged slower) and 4 MiB. A
	// destination's memory is therefore bounded by its store's bound plus,
	// per source, QueueBytes and the reader's read-ahead (ReadAhead
	// binlog events, at most 8 KiB each by MariaDB's and MySQL's default
	// binlog_row_event_max_size, and their decoded rows), and with an
	// initial snapshot QueueBytes more of chunks read ahead (MemoryBound).
	QueueEvents int
	QueueBytes  int64
	// ReadAhead is each reader's binlog.Config.ReadAhead. Default:
	// 512 (measured in bench/: with 128 four sources merged about 20%
	// slower, on a live heap about 30 MiB smaller).
	ReadAhead int
	// StallLog is how long strict order may wait for a source before each
	// log line naming it. Default: 5s.
	StallLog time.Duration
	// Logger receives the readers' lines and stall reports. Default: discard.
	Logger *slog.Logger
	// Clock is the time the destination reads (see Clock). Default: Real.
	Clock Clock
	// Sources is what the destination reads its sources through (see
	// Sources). Default: Binlog, the servers.
	Sources Sources
	// Keep keeps what a replay or a new owner needs to emit the same
	// stream: the operators' shard-DDL decisions (each applies where it
	// applied first, a point after Resume; a new one is kept before it
	// applies, and an error refuses it) and the placements of snapshot
	// chunks and late transactions (each goes out where it went first; a
	// new one is kept before it goes out, and an error stops the
	// destination). Read when the destination starts and, by a
	// ReplayOnly one, as it goes. Default: nothing kept.
	Keep Keeper
	// ReplayOnly makes the destination emit only chunks kept already,
	// waiting for the next one to be kept where it has none: a replay
	// reader beside the destination's live run, which keeps them.
	ReplayOnly bool
	// LiveGTIDs, for a replay reader, returns the GTID state the
	// destination's live run has read from source src
	// (Destination.ReadGTIDs): its reader does not read on on another
	// server that lacks some of it (binlog.Config.Live). Default: none.
	LiveGTIDs func(src int) string
	// Reached is the furthest cursor an earlier run of the destination
	// is known to have emitted to (a faster client's), when it is past
	// Resume. Up to its point the run emits what that run emitted: a
	// source whose next transaction is past Reached's position for it
	// waits there, bounding nothing, until the run's point reaches
	// Reached's. In that run a watermark may have let the others' go
	// ahead of such a transaction, which came below them only after the
	// run ended (a clock further behind than max_clock_skew): sorted by
	// key now, it would take a seq the faster client has seen go to
	// another, and that client, which reads on after its cursor, would
	// never see it. After the point it comes late, kept as such.
	// Default: none.
	Reached *Cursor
	// LiveOrder, for a replay reader, is its live run's OrderLog
	// (Destination.Order): at each point the live run has taken, the
	// replay takes the same source's transaction, and it takes no point
	// the live run has not. Default: none (the placements alone).
	LiveOrder *OrderLog
}

// ReadAheadEventBytes is the memory allowed for one binlog event a reader
// reads ahead: the event (at most 8 KiB by the servers' default
// binlog_row_event_max_size) and, twice that, its decoded row images (an
// interface header and boxed number per value: up to 24 bytes for a
// one-byte column).
const ReadAheadEventBytes = 3 * 8 << 10

// MemoryBound is what a destination of n sources may hold with its queues
// and read-ahead at cfg's bounds (defaults where zero) and a store bounded
// to storeBytes: the number a node's memory limit is built from. With an
// initial snapshot (cfg.Spec's snapshot: initial) each source also holds
// the chunks it read ahead while earlier ones wait for its reader, less
// than QueueBytes before it reads the next (see readChunk): that one
// chunk, which a snapshot held before it read ahead too, is not counted,
// nor a table read in one piece (a key not of integers: its rows are held
// whole while it is read, with a warning).
func MemoryBound(n int, cfg Config, storeBytes int64) int64 {
	queue, ahead := cfg.QueueBytes, int64(cfg.ReadAhead)
	if queue <= 0 {
		queue = DefaultQueueBytes
	}
	if ahead <= 0 {
		ahead = DefaultReadAhead
	}
	per := queue + ahead*ReadAheadEventBytes
	if cfg.Spec != nil && snapshotOn(cfg.Spec) {
		per += queue
	}
	return storeBytes + int64(n)*per
}

// The defaults of Config's bounds.
const (
	DefaultQueueEvents       = 256
	DefaultQueueBytes  int64 = 4 << 20
	DefaultReadAhead         = 512
)

// Destination reads every source of a spec with an binlog.Reader and merges
// their transactions into one stream (see Merger for the order).
type Destination struct {
	cfg     Config
	readers []Reader
	merger  *Merger
	router  *Router             // used by the merge loop only
	stamps  stamps              // the merge loop's stamped versions (stamp)
	ddl     *shardDDL           // nil with shard_ddl: passthrough
	online  *schema.OnlineRules // spec online_ddl: helper tables (nil: off)
	// migrations are, per source, the online schema changes its reader
	// last reported under way (Migrations), routed by migRouter (the
	// merge's Router is the merge loop's); under migMu.
	migMu      sync.Mutex
	migrations [][]Migration
	migRouter  *Router
	// snaps are the sources' snapshots (nil entries: done or off); kept
	// are the chunks kept before that go out from the cursor on, in
	// order, keptNext the next of them.
	snaps    []*sourceSnapshot
	kept     []Placement
	keptNext int
	// keptOut is closed once every chunk of kept has gone out: no source
	// reads a new chunk before, or it could take a point of the stream
	// the first run gave to another transaction.
	keptOut     chan struct{}
	keptOutOnce sync.Once
	// lates are the late transactions kept before that go out from the
	// cursor on, in order (Placement.Late), lateNext the next of
	// them; lateHeld marks the sources whose queue one of them heads, not
	// offered until its point. latesRead is when a ReplayOnly
	// destination last read them.
	lates     []Placement
	lateNext  int
	lateHeld  []bool
	latesRead time.Time
	// reached is Config.Reached while the run is short of its point;
	// reachedHeld marks the sources whose queue a transaction past it,
	// or a new snapshot chunk, heads, held until the run reaches it
	// (pastReached, dueChunk).
	reached     *Cursor
	reachedHeld []bool
	// reachedOut is closed once the run is past Config.Reached's point
	// (at once without one): no source reads a new snapshot chunk
	// before, which the earlier run emitted later, if at all.
	reachedOut chan struct{}
	// order is what this run took at each recent point (Order); nil in
	// a replay, which no one follows.
	order *OrderLog

	cursor Cursor
	skew   time.Duration
	log    *slog.Logger

	lastSeen  []time.Time // per source: when its last event reached the merge
	fineTime  []bool      // per source: its commit times have sub-second precision
	published time.Time
	statsMu   sync.Mutex
	stats     Stats
	accepted  [][]AcceptedLoss // per source, under statsMu (lost.go)
}

// New checks the configuration and builds the readers; it does not connect.
func New(cfg Config) (*Destination, error) {
	ds := cfg.Spec
	if ds == nil {
		return nil, errors.New("group: no spec")
	}
	if cfg.QueueEvents <= 0 {
		cfg.QueueEvents = DefaultQueueEvents
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	if cfg.ReadAhead <= 0 {
		cfg.ReadAhead = DefaultReadAhead
	}
	if cfg.StallLog <= 0 {
		cfg.StallLog = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = Real
	}
	if cfg.Sources == nil {
		cfg.Sources = Binlog
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	filter, err := spec.CompileTableFilter(ds.Tables)
	if err != nil {
		return nil, err
	}
	if r := cfg.Resume; r != nil && len(r.Sources) != len(ds.Sources) {
		return nil, fmt.Errorf("group: cursor has %d sources, destination %s has %d: the spec's sources changed; delete the cursor to start over", len(r.Sources), ds.Name, len(ds.Sources))
	}
	router, err := NewRouter(ds.Route)
	if err != nil {
		return nil, err
	}
	online, err := schema.NewOnlineRules(ds.OnlineDDLRules())
	if err != nil {
		return nil, err
	}
	d := &Destination{cfg: cfg, merger: NewMerger(len(ds.Sources), ds.Ordering.Strict()), router: router, online: online,
		skew: time.Duration(ds.MaxClockSkew), log: log.With("dest", ds.Name)}
	d.cursor.Sources = make([]SourceCursor, len(ds.Sources))
	d.migrations = make([][]Migration, len(ds.Sources))
	d.lastSeen = make([]time.Time, len(ds.Sources))
	d.fineTime = make([]bool, len(ds.Sources))
	if ds.ShardDDL != spec.ShardDDLPassthrough {
		var from *ShardDDLState
		if cfg.Resume != nil {
			from = cfg.Resume.ShardDDL
		}
		decisions, err := cfg.keptDecisions()
		if err != nil {
			return nil, err
		}
		d.ddl = newShardDDL(d, from, decisions)
	}
	placed, err := cfg.keptPlacements()
	if err != nil {
		return nil, err
	}
	chunks, lates := splitLate(placed)
	if !snapshotOn(ds) {
		chunks = nil
	}
	d.snaps = make([]*sourceSnapshot, len(ds.Sources))
	d.accepted = acceptedOf(placed, len(ds.Sources))
	for i, src := range ds.Sources {
		var from *change.SnapshotState
		if r := cfg.Resume; r != nil {
			from = r.Sources[i].Snapshot
		}
		if snapshotOn(ds) && (from == nil || !from.Done || !cfg.Resume.Sources[i].passed(from)) {
			d.snaps[i] = newSourceSnapshot(d, i, from, chunks)
		}
		// Every source announces its tables: the shard-DDL merge counts
		// them, the snapshot learns them, and the cursor keeps the schema
		// from the start (a restart then reads a DDL that ran while braid
		// was down instead of taking the server's schema for its point).
		pc := binlog.Config{Destination: ds.Name, Source: src, Tables: filter,
			Heartbeat: time.Duration(ds.Heartbeat), Logger: d.log, ReadAhead: cfg.ReadAhead, AnnounceTables: true, OnlineDDL: online,
			Accepted: lossesOf(placed, i), Losses: d.keptLosses(i)}
		if live := cfg.LiveGTIDs; live != nil {
			pc.Live = func() string { return live(i) }
		}
		d.cursor.Sources[i].Name = src.Name
		if r := cfg.Resume; r != nil {
			sc := r.Sources[i]
			if sc.Name != src.Name {
				return nil, fmt.Errorf("group: cursor source %d is %q, destination %s has %q: the spec's sources changed; delete the cursor to start over", i, sc.Name, ds.Name, src.Name)
			}
			pc.Resume = sc.resume() // nil: the source had sent nothing before the cursor; it starts at the spec's start
			d.merger.Restore(i, sc.LastKey)
			d.cursor.Sources[i] = sc
		}
		p, err := cfg.Sources.Reader(pc)
		if err != nil {
			return nil, err
		}
		d.readers = append(d.readers, p)
	}
	if cfg.Resume != nil {
		d.cursor.Seq, d.cursor.Taken = cfg.Resume.Seq, cfg.Resume.Taken
	}
	counted := cfg.Resume == nil || cfg.Resume.counted()
	if !counted {
		cfg.LiveOrder, d.cfg.LiveOrder = nil, nil
	}
	if !cfg.ReplayOnly && counted {
		d.order = newOrderLog(cfg.Resume)
	}
	reach := cfg.Reached
	if lo := cfg.LiveOrder; reach == nil && lo != nil {
		reach = lo.start // a replay from before its live run's start
	}
	if r := reach; counted && r != nil && r.counted() && r.Taken > d.cursor.Taken && len(r.Sources) == len(ds.Sources) {
		d.reached, d.reachedHeld = r, make([]bool, len(ds.Sources))
	}
	d.reachedOut = make(chan struct{})
	if d.reached == nil {
		close(d.reachedOut)
	}
	d.kept = keptAfter(chunks, d.cursor.Taken)
	d.lates, d.lateHeld, d.latesRead = keptAfter(lates, d.cursor.Taken), make([]bool, len(ds.Sources)), cfg.Clock.Now()
	d.keptOut = make(chan struct{})
	if len(d.kept) == 0 {
		d.keptOutOnce.Do(func() { close(d.keptOut) })
	}
	return d, nil
}

// ReadGTIDs returns the GTID state source src's reader has read up to
// (binlog.Stats.GTIDs): what a replay reader's server must hold
// (Config.LiveGTIDs). Safe for concurrent use.
func (d *Destination) ReadGTIDs(src int) string {
	return d.readers[src].Stats().GTIDs.String()
}

// Cursor returns the boundary after the last transaction emitted; called
// from emit during an EventCommit or EventDDL, after that transaction. Call
// it from emit or after Run returns.
func (d *Destination) Cursor() *Cursor {
	if d.ddl != nil {
		d.ddl.cursorTaken()
	}
	return d.cursor.Clone()
}

// Run reads every source and calls emit with the merged stream until ctx
// ends (then it returns nil) or a source fails for good (then it returns
// that error). A transaction's events come together and carry its Seq:
// EventBegin, EventRows..., EventCommit, or one EventDDL. Sources' progress
// and heartbeats are consumed here and not emitted.
//
// emit runs on Run's goroutine; it may block (backpressure reaches the
// readers through their bounded queues). A Destination runs once.
func (d *Destination) Run(parent context.Context, emit func(*change.Event) error) error {
	ctx, cancel := context.WithCancel(parent)
	if d.order != nil {
		defer d.order.end()
	}
	queues := make([]*sourceQueue, len(d.readers))
	arrived := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()       // after cancel: the readers stop, then Run returns
	var sem chan struct{} // bounds the sources reading a snapshot at once
	if snapshotOn(d.cfg.Spec) {
		sem = make(chan struct{}, max(1, d.cfg.Spec.SnapshotParallelism))
	}
	snapErr := make(chan error, len(d.readers))
	for i, p := range d.readers {
		q := newSourceQueue(d.cfg.QueueEvents, d.cfg.QueueBytes, arrived)
		queues[i] = q
		pass := func(ev *change.Event) error { return q.put(ctx, ev) }
		// The snapshot goroutine also sends on q.ch, so the reader's
		// goroutine, which closes it, first stops that one and waits.
		snapCtx, stopSnap := context.WithCancel(ctx)
		snapDone := make(chan struct{})
		g := d.snaps[i]
		if g != nil {
			g.push = func(ev *change.Event) error { return q.put(snapCtx, ev) }
			pass = func(ev *change.Event) error { return g.pass(ctx, ev) }
		}
		if g != nil && !d.cfg.ReplayOnly {
			wg.Go(func() {
				defer close(snapDone)
				// An error after the reader stopped is the reader's.
				if err := g.run(snapCtx, sem); err != nil && snapCtx.Err() == nil {
					snapErr <- err
					cancel()
				}
			})
		} else {
			close(snapDone)
		}
		wg.Go(func() {
			defer q.signal()
			defer close(q.ch)
			defer func() { stopSnap(); <-snapDone }()
			q.err = p.Run(ctx, func(ev *change.Event) error {
				if ev.Type == change.EventHeartbeat && !ev.Stale {
					ev.CommitTime = d.cfg.Clock.Now() // when braid learnt the source was idle
				}
				if ev.Schema != nil {
					d.noteMigrations(i, ev.Schema)
				}
				return pass(ev)
			})
		})
	}
	err := d.merge(ctx, queues, arrived, emit)
	cancel()
	if parent.Err() != nil {
		return nil
	}
	select {
	case serr := <-snapErr:
		return serr
	default:
	}
	return err
}

// consumeHead handles source s's head event: a heartbeat or an empty
// transaction moves the source's watermark (and position) on and is
// consumed; a transaction is offered to the merger.
func (d *Destination) consumeHead(s int, head []*change.Event, offered []bool) error {
	ev := head[s]
	switch ev.Type {
	case change.EventHeartbeat:
		if ev.Stale {
			break // sent before binlog read after it: promises nothing
		}
		if d.reached != nil && d.cursor.Taken < d.reached.Taken && !d.atReached(s) {
			// Short of the position the earlier run reached on this
			// source, that run took more of it, which is still to come:
			// the others wait for it as they did then. A heartbeat says
			// the source is idle now, which it was not there (a server
			// sends one only at its binlog's end); taken as a promise,
			// it let a replay send another source's transaction ahead
			// of this one's, in an order the earlier run did not take
			// (TestReplayBeforeLiveStart, 4-8% of runs).
			break
		}
		// Nothing the source commits from now on is older than braid's
		// clock minus the skew allowance.
		d.promise(s, ev.CommitTime)
	case change.EventProgress:
		if ev.Tables != nil && d.ddl != nil {
			d.ddl.announce(s, ev.Tables)
		}
		// A transaction of no selected table promises what a heartbeat
		// does, from its own commit time: the source's clock is trusted
		// to within max_clock_skew, no closer. Taken as it is, it would
		// be one race from sending the next transaction late whenever
		// that one's time is below it: a replica's own write, stamped by
		// the replica's clock ahead of the replicated transactions
		// around it, or a statement that began before the one logged
		// ahead of it committed. From a primary the same history has
		// no such write, so the stream would depend on the server read.
		d.promise(s, ev.CommitTime)
		sc := &d.cursor.Sources[s]
		sc.at(ev.EndPos, ev)
		if ev.Schema != nil {
			sc.Schema = ev.Schema
		}
	case change.EventBegin, change.EventDDL:
		if ev.CommitTime.Nanosecond() != 0 && !ev.Snapshot {
			d.fineTime[s] = true // MySQL 8's immediate_commit_timestamp
		}
		if d.keptLate(s, ev, head) {
			// It goes out at its point (dueLate); till then the others'
			// transactions go without waiting for this source, as they
			// went before it the first time.
			d.lateHeld[s], offered[s] = true, true
			d.merger.Hold(s, true)
			return nil
		}
		if d.pastReached(s, ev) {
			// The earlier run had not emitted it by the point it
			// reached: the others go there as they went then.
			d.reachedHeld[s], offered[s] = true, true
			d.merger.Hold(s, true)
			return nil
		}
		d.offer(s, ev)
		offered[s] = true
		return nil
	default:
		return fmt.Errorf("group: source %s sent a %s event outside a transaction", ev.Source, ev.Type)
	}
	head[s] = nil
	return nil
}

// Order is the run's OrderLog, for its replay readers (Config.LiveOrder);
// nil for a replay, or a run from a cursor that counts no points.
func (d *Destination) Order() *OrderLog { return d.order }

// take moves the cursor past the point at which source src's transaction
// goes out (or is left out whole) and notes it in the OrderLog.
func (d *Destination) take(src int) {
	if d.order != nil {
		d.order.took(d.cursor.Taken, src)
	}
	d.cursor.Taken++
}

// pastReached reports whether ev, source s's next transaction, begins
// past the position Config.Reached holds for s while the run is short of
// its point: the earlier run emitted it later, if at all.
func (d *Destination) pastReached(s int, ev *change.Event) bool {
	if d.reached == nil || d.cursor.Taken >= d.reached.Taken {
		return false
	}
	rs := &d.reached.Sources[s]
	if rs.Pos.IsZero() && rs.GTIDs.IsZero() {
		return true // the source had emitted nothing by then
	}
	switch {
	case ev.Lost != "":
		// A marker of lost transactions has the former server's
		// position: it went out before the point if the state the
		// reader went on from is held there.
		if covers, ok := rs.GTIDs.Covers(ev.GTIDs); ok {
			return !covers
		}
	case rs.Pos.IsZero():
		// The point is right after a marker: a GTID state, no position.
		if held, ok := rs.GTIDs.Holds(ev.GTID); ok {
			return !held
		}
	}
	return txFrom(ev, rs.Pos, rs.Mark)
}

// atReached reports whether source s's cursor is at or past the position
// Config.Reached holds for it: the earlier run took nothing more of it
// before the point.
func (d *Destination) atReached(s int) bool {
	rs, sc := &d.reached.Sources[s], &d.cursor.Sources[s]
	if rs.Pos.IsZero() && rs.GTIDs.IsZero() {
		return true
	}
	if sc.Pos.IsZero() || rs.Pos.IsZero() {
		// Either is right after a marker: a GTID state, no position.
		if covers, ok := sc.GTIDs.Covers(rs.GTIDs); ok {
			return covers
		}
	}
	return reached(sc.Pos, sc.Mark, rs.Pos, rs.Mark)
}

// releaseReached offers, once the run reaches Config.Reached's point,
// the transactions held at it (pastReached); so also when no source has
// more to bring before it (each held there, or at its position there
// with nothing offered) short of the point, which the earlier run's
// cursor says cannot be (a loss accepted since, a changed filter), with
// a warning.
func (d *Destination) releaseReached(head []*change.Event) {
	if d.reached == nil {
		return
	}
	if d.cursor.Taken < d.reached.Taken {
		for s, held := range d.reachedHeld {
			if _, offered := d.merger.Offered(s); !held && (offered || !d.atReached(s)) {
				return
			}
		}
		d.log.Warn("no source has more to bring before the point the furthest client's cursor names, short of it: going on from here",
			"taken", d.cursor.Taken, "reached", d.reached.Taken)
	}
	for s, held := range d.reachedHeld {
		if !held {
			continue
		}
		d.reachedHeld[s] = false
		d.merger.Hold(s, false)
		if !head[s].Snapshot { // a new chunk goes out next (dueChunk)
			d.offer(s, head[s])
		}
	}
	d.reached = nil
	close(d.reachedOut)
}

// offer offers source s's transaction beginning with ev to the merger.
// A marker of lost transactions (ev.Lost) takes the source's last key,
// which it shows as its commit time: it stands where the source
// continued, the same in every run.
func (d *Destination) offer(s int, ev *change.Event) {
	if ev.Lost == "" {
		d.merger.Offer(s, ev.CommitTime.UnixMicro())
		return
	}
	if k := d.merger.OfferMarker(s); k.Time != math.MinInt64 {
		ev.CommitTime = time.UnixMicro(k.Time)
	}
}

// promise raises source s's watermark to t less max_clock_skew: what a
// heartbeat stamped t, or a transaction of no selected table committed
// at t, promises of the source's next transactions. A source that stamps
// commits in whole seconds (MariaDB, MySQL 5.7) gives them keys down to
// the start of that second, so its watermark is cut to the second, or
// its next transaction would come in below it, late.
func (d *Destination) promise(s int, t time.Time) {
	wm := t.Add(-d.skew)
	if !d.fineTime[s] {
		wm = wm.Truncate(time.Second)
	}
	d.merger.Watermark(s, wm.UnixMicro())
}

// sourceEnded reports a source whose reader stopped.
func (d *Destination) sourceEnded(ctx context.Context, s int, q *sourceQueue) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if q.err != nil {
		return q.err
	}
	return fmt.Errorf("group: source %s stopped", d.cfg.Spec.Sources[s].Name)
}

// Putter takes a destination's events in order, each transaction's last
// event with the cursor after it as its mark (stream.Store is one).
type Putter interface {
	Put(ctx context.Context, ev *change.Event, mark *Cursor) error
}

// RunInto runs the destination (see Run) into a store: every event goes in,
// and each transaction's last event carries the cursor after it as its mark.
func (d *Destination) RunInto(ctx context.Context, store Putter) error {
	return d.Run(ctx, func(ev *change.Event) error {
		var mark *Cursor
		if ev.Type == change.EventCommit || ev.Type == change.EventDDL {
			mark = d.Cursor()
		}
		return store.Put(ctx, ev, mark)
	})
}
