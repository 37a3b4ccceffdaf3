package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
)

// PipelineConfig is what StartPipeline assembles. Zero fields take the
// defaults given.
type PipelineConfig struct {
	// Spec is the destination's spec, defaults applied. Required.
	Spec *spec.Spec
	// Clients are the client ids subscribed before the first event, each
	// after its cursor (nil: from the first event the store holds).
	// Default: none.
	Clients map[string]*group.Cursor
	// Resume is the cursor the destination starts after. Default: the
	// slowest of Clients' cursors, or the spec's start positions when
	// none has one (a client without a cursor then sees the whole stream).
	Resume *group.Cursor
	// Store bounds the store. Default: stream.Config's defaults.
	Store Config
	// Logger receives the destination's logs. Default: discarded.
	Logger *slog.Logger
	// Serve says the store serves consumers that come and go (canal and
	// native clients): new client ids start at the spec's consumers.start,
	// one behind the store gets a replay reader, and the spec's
	// detach_after and expire_after apply. Without it (capture printing)
	// the store has the one consumer it was given.
	Serve bool
	// Keep keeps the destination's shard-DDL decisions and placements
	// (group.Config.Keep); the pipeline also holds them, for replay
	// readers (given every one known when they start) and Served.
	// Clients' cursors are its caller's to keep. Default: nothing kept
	// past the pipeline.
	Keep group.Keeper

	// replayOf, set for a replay reader, is the live pipeline it replays:
	// it applies the decisions the live one holds and emits only the
	// placements the live one keeps.
	replayOf *Pipeline
}

// maintainEvery is how often a serving pipeline applies its consumer
// policy (Store.Maintain).
const maintainEvery = 250 * time.Millisecond

// Pipeline is a destination merging into a bounded store on its own
// goroutine: what `braid capture` prints from, what its servers and a
// cluster node serve to consumers.
type Pipeline struct {
	Dest  *group.Destination
	Store *Store

	name string
	cfg  PipelineConfig
	ctx  context.Context // the pipeline's run; replays run under it
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{} // closed when the run ended; err is then set
	err  error

	kept *held // nil for a replay reader

	// start is the destination's start cursor (group.StartCursorID), once
	// known: kept by an earlier run, or noted by this one when it reads
	// from the spec's start. A replay from the destination's start reads
	// from it; nil, from the spec's start positions.
	startMu sync.Mutex
	start   *group.Cursor
}

// startCursor returns the destination's start cursor, or nil.
func (p *Pipeline) startCursor() *group.Cursor {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	return p.start
}

// Placements lists the placements kept and made, in order.
func (p *Pipeline) Placements() []group.Placement {
	if p.kept == nil {
		return nil
	}
	return p.kept.placementsNow()
}

// Decisions lists the shard-DDL decisions kept and made, in order.
func (p *Pipeline) Decisions() []group.DDLDecision {
	if p.kept == nil {
		return nil
	}
	return p.kept.decisionsNow()
}

// StartPipeline builds cfg's destination and its store, subscribes
// cfg.Clients and starts the merge into the store; the pipeline closes the
// store when its run ends.
func StartPipeline(ctx context.Context, cfg PipelineConfig) (*Pipeline, error) {
	if cfg.Spec == nil {
		return nil, errors.New("stream: pipeline without a spec")
	}
	start, err := startCursor(&cfg)
	if err != nil {
		return nil, err
	}
	// A LOST marker kept: a client whose cursor lies before its lost
	// transactions is refused alone, and the run starts past them.
	// A loss accepted whose marker has not gone out: a client that lacks
	// what went out before it is refused alone too.
	var markers []group.LostMarker
	var unmarked []group.UnmarkedLoss
	if cfg.replayOf == nil && cfg.Keep != nil {
		placed, err := cfg.Keep.Placements()
		if err != nil {
			return nil, err
		}
		markers, unmarked = group.LostMarkers(placed), group.UnmarkedLosses(placed)
	}
	refused := refuseBeforeLoss(&cfg, markers, unmarked)
	refusedAt := map[string]*group.Cursor{}
	if len(refused) > 0 {
		cfg.Clients = maps.Clone(cfg.Clients)
		for id, why := range refused {
			refusedAt[id] = cfg.Clients[id]
			delete(cfg.Clients, id)
			if cfg.Logger != nil {
				cfg.Logger.Warn("client refused: its cursor lies before transactions lost in a failover", "dest", cfg.Spec.Name, "client", id, "err", why)
			}
		}
	}
	resume := cfg.Resume
	if resume == nil {
		// The slowest client's cursor; when serving, the slowest attached
		// one's: a detached client replays when it reads again rather
		// than hold everyone back now.
		slowest := func(skipDetached bool) *group.Cursor {
			var out *group.Cursor
			for _, c := range cfg.Clients {
				if c != nil && !(skipDetached && c.Detached) && (out == nil || c.Seq < out.Seq) {
					out = c
				}
			}
			return out
		}
		if resume = slowest(cfg.Serve); resume == nil {
			resume = slowest(false)
		}
		if resume != nil && cfg.Logger != nil {
			cfg.Logger.Info("resuming from the slowest consumer's cursor", "dest", cfg.Spec.Name, "seq", resume.Seq, "consumers", len(cfg.Clients))
		}
		if resume == nil && start != nil {
			resume = start
			if cfg.Logger != nil {
				cfg.Logger.Info("no consumer's cursor: resuming from the destination's start cursor", "dest", cfg.Spec.Name)
			}
		}
		// Never from before a loss: no server has what went out there.
		// Nor from a client's cursor right before its marker but short
		// of the source's point (transactions of tables not selected
		// after the last emitted): the run goes from the marker's point.
		for m, ok := lastShort(markers, resume); ok; m, ok = lastShort(markers, resume) {
			resume = m.From.Clone()
			if cfg.Logger != nil {
				cfg.Logger.Info("resuming at the LOST marker of transactions lost in a failover: no server has them, and the stream before cannot be given again",
					"dest", cfg.Spec.Name, "source", sourceName(&cfg, m.Source), "lost", m.Lost, "marker_seq", m.Seq)
			}
		}
	}
	p := &Pipeline{name: cfg.Spec.Name, cfg: cfg, done: make(chan struct{}), start: start}
	gc := group.Config{Spec: cfg.Spec, Resume: resume, Logger: cfg.Logger}
	if resume == nil && cfg.replayOf == nil {
		// The destination's first run: where its sources start, with the
		// schema there, is its start cursor, kept for every later replay
		// from the start and run with no cursor to resume from.
		gc.Sources = group.StartTap(group.Binlog, cfg.Spec, p.noteStart)
	}
	if cfg.replayOf == nil && resume != nil {
		// Up to the furthest client's cursor the run emits what the
		// earlier one did (group.Config.Reached), watermarks and all.
		for _, c := range cfg.Clients {
			if c != nil && c.Taken > resume.Taken && (gc.Reached == nil || c.Taken > gc.Reached.Taken) {
				gc.Reached = c
			}
		}
	}
	if cfg.replayOf != nil {
		gc.Keep, gc.ReplayOnly, gc.LiveGTIDs = replayKeeper{cfg.replayOf.kept, cfg.replayOf.Decisions()}, true, cfg.replayOf.Dest.ReadGTIDs
		gc.LiveOrder = cfg.replayOf.Dest.Order()
	} else {
		kept, err := hold(cfg.Keep)
		if err != nil {
			return nil, err
		}
		p.kept, gc.Keep = kept, kept
	}
	dest, err := group.New(gc)
	if err != nil {
		return nil, err
	}
	p.Dest = dest
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p.log = log
	sc := cfg.Store
	sc.After = resume
	if p.kept != nil {
		sc.points = p.lossPoints
	}
	sc.Logger = log.With("dest", cfg.Spec.Name)
	if cfg.Serve {
		sc.Replay = p.replay
		pol := cfg.Spec.Consumers
		sc.DetachAfter, sc.ExpireAfter = time.Duration(pol.DetachAfter), time.Duration(pol.ExpireAfter)
		if sc.DetachAfter == 0 { // a spec stored before consumers: existed
			sc.DetachAfter = spec.DefaultDetachAfter
		}
		switch pol.ExpireAfter {
		case 0: // a spec stored before expiry had a default
			sc.ExpireAfter = spec.DefaultExpireAfter
		case spec.ExpireNever:
			sc.ExpireAfter = 0
		}
		sc.MaxClientsPerOwner = cmp.Or(pol.MaxClientIDs, sc.MaxClientsPerOwner)
		if pol.Start == spec.StartLatest {
			sc.Start = Start{Kind: StartLatest}
		}
	}
	store := NewStore(sc)
	p.Store = store
	// A client subscribed behind the store starts its replay reader under
	// the pipeline's run at once.
	rctx, stop := context.WithCancel(ctx)
	p.ctx, p.stop = rctx, stop
	for id, why := range refused {
		store.subscribeRefused(id, refusedAt[id], why)
	}
	for client, c := range cfg.Clients {
		switch {
		case c != nil && c.Detached && cfg.Serve:
			store.subscribeDetached(client, c)
		case c != nil:
			store.SubscribeAfter(client, c.Seq, c)
		default:
			store.Subscribe(client)
		}
	}
	if cfg.Serve {
		go p.maintain(rctx)
	}
	go func() {
		p.err = dest.RunInto(rctx, store)
		store.Close() // readers drain what is left, then stop
		close(p.done)
	}()
	return p, nil
}

// startCursor takes the destination's start cursor out of cfg.Clients
// (where a caller handing every kept cursor puts it), or reads it from
// cfg.Keep; nil when none is kept, or one kept for other sources (the
// spec's sources changed).
func startCursor(cfg *PipelineConfig) (*group.Cursor, error) {
	if cfg.replayOf != nil {
		return nil, nil
	}
	start, ok := cfg.Clients[group.StartCursorID]
	if ok {
		cfg.Clients = maps.Clone(cfg.Clients)
		delete(cfg.Clients, group.StartCursorID)
	} else if cfg.Keep != nil {
		kept, err := cfg.Keep.Cursors()
		if err != nil {
			return nil, err
		}
		start = kept[group.StartCursorID]
	}
	if start == nil || len(start.Sources) != len(cfg.Spec.Sources) {
		return nil, nil
	}
	for i, sc := range start.Sources {
		if sc.Name != cfg.Spec.Sources[i].Name {
			return nil, nil
		}
	}
	return start, nil
}

// noteStart keeps the destination's start cursor, which its first run's
// sources announced (group.StartTap).
func (p *Pipeline) noteStart(c *group.Cursor) {
	p.startMu.Lock()
	p.start = c
	p.startMu.Unlock()
	if p.kept == nil || p.kept.Keeper == nil {
		return
	}
	if err := p.kept.Keeper.SaveCursor(group.StartCursorID, c); err != nil {
		p.log.Warn("the destination's start cursor was not kept: a replay from its start on another run reads the schema the servers have then",
			"dest", p.name, "err", err)
	}
}

// replay is the store's ReplayFunc: a pipeline of its own from the
// cursor, reading with server ids of its own (a source refuses a second
// replica with an id already reading), into a store that holds only that
// client's events.
func (p *Pipeline) replay(from *group.Cursor, client string) (*Pipeline, error) {
	ds := *p.cfg.Spec
	ds.Sources = slices.Clone(ds.Sources)
	for i := range ds.Sources {
		src := &ds.Sources[i]
		src.ServerID = spec.DeriveServerID(ds.Name, fmt.Sprintf("%s#%d#replay:%s", src.Name, src.ServerID, client))
	}
	if from == nil {
		// From the destination's start: its start cursor holds the
		// schema there, which the servers' schema now may not be.
		from = p.startCursor()
	}
	if p.kept != nil {
		// Never from before a loss (kept, or kept by this run); from
		// right before its marker, from the marker's point.
		markers := group.LostMarkers(p.kept.placementsNow())
		if m, ok := lastBefore(markers, from); ok {
			what := "the history it asks for (from the destination's start)"
			if from != nil {
				what = fmt.Sprintf("the history it asks for (after seq %d)", from.Seq)
			}
			return nil, lossRefusal(p.name, client, what, m, sourceName(&p.cfg, m.Source))
		}
		if m, ok := lastShort(markers, from); ok {
			from = m.From.Clone()
		}
	}
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if err := group.CheckHistory(ctx, &ds, from); err != nil {
		return nil, err
	}
	seq := uint64(0)
	if from != nil {
		seq = from.Seq
	}
	p.log.Info("replay reader started", "dest", p.name, "client", client, "after_seq", seq)
	return StartPipeline(p.ctx, PipelineConfig{Spec: &ds, Resume: from, Logger: p.log.With("replay", client), replayOf: p,
		Store: Config{MaxBytes: min(p.Store.cfg.MaxBytes, ReplayBytes), MaxEvents: p.Store.cfg.MaxEvents, cutAtMarks: true}})
}

// maintain applies the store's consumer policy until ctx ends, logging
// what it does.
func (p *Pipeline) maintain(ctx context.Context) {
	t := time.NewTicker(maintainEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, n := range p.Store.Maintain(now) {
				switch n.Kind {
				case NoticeBlocked:
					p.log.Warn("the store is full and waits for these client ids to ack", "dest", p.name, "clients", n.Clients,
						"for", n.For.Round(time.Millisecond), "detach_after", p.Store.cfg.DetachAfter)
				case NoticeDetached:
					p.log.Warn("client ids detached: they held the store full; their cursors stay and a replay serves them when they read again",
						"dest", p.name, "clients", n.Clients, "for", n.For.Round(time.Millisecond))
				case NoticeExpired:
					p.log.Info("client ids dropped with their cursors: not seen for consumers.expire_after", "dest", p.name, "clients", n.Clients, "expire_after", n.For)
				}
			}
		}
	}
}

// Served is the pipeline as the servers see it, with live (nil: always)
// deciding whether this node may hand its events out now.
func (p *Pipeline) Served(live func() error) *Served {
	return &Served{Name: p.name, Store: p.Store, Stats: p.Dest.Stats, Live: live, ShardDDL: p.Dest.ShardDDL,
		ShardDDLMode: p.cfg.Spec.ShardDDL, DDLLockWarnAfter: time.Duration(p.cfg.Spec.DDLLockWarnAfter), Decide: p.Dest.Decide,
		Decisions: p.Decisions, Migrations: p.Dest.Migrations, AcceptLost: p.Dest.AcceptLost}
}

// Done is closed when the run ends: its context ended, or a source failed
// for good (Err).
func (p *Pipeline) Done() <-chan struct{} { return p.done }

// Err is the run's error once Done is closed; nil when its context ended.
func (p *Pipeline) Err() error {
	<-p.done
	return p.err
}

// Close stops the run and waits for it.
func (p *Pipeline) Close() {
	p.stop()
	<-p.done
}
