package grouptest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
)

// Sources is a group.Sources over scripted binlogs, one Log per source
// name. Safe for concurrent use.
type Sources struct {
	mu   sync.Mutex
	logs map[string]*Log
}

var _ group.Sources = (*Sources)(nil)

// NewSources returns sources with no log yet.
func NewSources() *Sources { return &Sources{logs: map[string]*Log{}} }

// Log returns source name's binlog, made empty on first use.
func (s *Sources) Log(name string) *Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[name]
	if l == nil {
		l = &Log{name: name, end: 4, grew: make(chan struct{})}
		l.readCond = sync.NewCond(&l.mu)
		s.logs[name] = l
	}
	return l
}

// Reader implements group.Sources: a reader of cfg.Source's log from
// cfg.Resume (else from its start), of the tables cfg.Tables selects.
func (s *Sources) Reader(cfg binlog.Config) (group.Reader, error) {
	r := &reader{log: s.Log(cfg.Source.Name), cfg: cfg}
	r.from = r.log.pos(4) // the log's beginning
	if cfg.Resume != nil {
		r.from = cfg.Resume.Pos
	}
	return r, nil
}

// File is the binlog file name of every scripted position.
const File = "binlog.000001"

// Log is one source's scripted binlog: transactions, DDL and heartbeats
// in the order appended, each at a position of its own.
type Log struct {
	name string

	mu     sync.Mutex
	items  []item
	end    uint32
	tables []*change.Table // announced by a reader that starts
	grew   chan struct{}   // closed (and replaced) on each append
	// read is how many items a reader has emitted (the most of any),
	// broadcast on readCond when it grows.
	read     int
	readCond *sync.Cond
	// gtid numbers the transactions appended (GTIDs), gtids counts per
	// prefix.
	gtid  string
	gtids map[string]int

	// The snapshot's side (snapshot.go): rows by table and key, chunks
	// to fail, chunks read, the steps of a held log, and whether Begin
	// tells its snapshot's position.
	rows       map[string]map[string][]change.Value
	failChunks int
	chunks     int
	steps      chan step
	inexact    bool
	unseen     []unseenTx // see WriteUnseen
}

type item struct {
	start  change.Position
	events []*change.Event
}

// Tables sets the tables a reader announces where it starts (see
// binlog.Config.AnnounceTables), as the source's schema holds them.
func (l *Log) Tables(ts ...*change.Table) {
	l.mu.Lock()
	l.tables = ts
	l.mu.Unlock()
}

func (l *Log) pos(p uint32) change.Position { return change.Position{File: File, Pos: p} }

// GTIDs numbers the transactions appended from now on prefix-1,
// prefix-2, … (MariaDB's domain-server-seq: "0-1"), counting per
// prefix, as the server that first committed them did; "" appends them
// without GTIDs. A replica's log holds its primary's transactions under
// the primary's GTIDs and its own under its own.
func (l *Log) GTIDs(prefix string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gtid = prefix
}

func (l *Log) append(size uint32, events func(start, end change.Position) []*change.Event) change.Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	start, end := l.pos(l.end), l.pos(l.end+size)
	l.end += size
	evs := events(start, end)
	if l.gtid != "" && size > 0 {
		if l.gtids == nil {
			l.gtids = map[string]int{}
		}
		l.gtids[l.gtid]++
		for _, ev := range evs {
			ev.GTID = fmt.Sprintf("%s-%d", l.gtid, l.gtids[l.gtid])
		}
	}
	l.items = append(l.items, item{start: start, events: evs})
	close(l.grew)
	l.grew = make(chan struct{})
	return start
}

// Marker appends the marker transaction of an accepted loss of lost
// (change.Event.Lost) as a reader emits it: a begin and a commit with no
// rows, both carrying gtids, the state the reader goes on from.
func (l *Log) Marker(lost, gtids string) change.Position {
	return l.append(0, func(start, _ change.Position) []*change.Event {
		state := change.GTIDText(gtids)
		return []*change.Event{
			{Type: change.EventBegin, Source: l.name, Pos: start, Lost: lost, GTIDs: state},
			{Type: change.EventCommit, Source: l.name, Lost: lost, GTIDs: state},
		}
	})
}

// Tx appends a transaction committed at commit that inserts rows into
// t, and returns the position it begins at.
func (l *Log) Tx(commit time.Time, t *change.Table, rows ...[]change.Value) change.Position {
	return l.append(100, func(start, end change.Position) []*change.Event {
		base := change.Event{Source: l.name, Pos: start, CommitTime: commit}
		begin, rs, c := base, base, base
		begin.Type, rs.Type, c.Type = change.EventBegin, change.EventRows, change.EventCommit
		rs.Rows = change.NewValueRows(t, 0, rows)
		for _, r := range rows {
			l.setRow(t, nil, r)
		}
		c.Pos, c.EndPos = end, end
		return []*change.Event{&begin, &rs, &c}
	})
}

// DDL appends a DDL statement committed at commit, which leaves the
// tables it names at versions (in ddl.Tables' order), and returns the
// position it begins at.
func (l *Log) DDL(commit time.Time, ddl *change.DDL, versions ...*change.Table) change.Position {
	return l.append(100, func(start, end change.Position) []*change.Event {
		return []*change.Event{{Type: change.EventDDL, Source: l.name, Pos: start, EndPos: end, CommitTime: commit,
			DDL: ddl, Versions: versions}}
	})
}

// Heartbeat appends a replication heartbeat at the log's end; stale
// marks one read with binlog right behind it (change.Event.Stale). It
// returns once a reader has handed it to the destination, which stamps
// a heartbeat with its clock as it takes it: a test moves the clock
// after that.
func (l *Log) Heartbeat(stale bool) {
	l.append(0, func(start, _ change.Position) []*change.Event {
		return []*change.Event{{Type: change.EventHeartbeat, Source: l.name, Pos: start, Stale: stale}}
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	wake := time.AfterFunc(Stuck, func() {
		l.mu.Lock()
		l.readCond.Broadcast()
		l.mu.Unlock()
	})
	defer wake.Stop()
	deadline := time.Now().Add(Stuck)
	for n := len(l.items); l.read < n; {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("grouptest: no reader took %s's heartbeat within %s: the destination is stuck", l.name, Stuck))
		}
		l.readCond.Wait()
	}
}

// Stuck is how long Heartbeat and Step wait for the destination before
// they panic: a liveness guard far above any step's time, so that a
// hang fails the test that hung at once instead of the package's
// timeout many minutes later, naming no test.
const Stuck = 30 * time.Second

// reader is one group.Reader of a Log.
type reader struct {
	log  *Log
	cfg  binlog.Config
	from change.Position
}

func (r *reader) Stats() binlog.Stats { return binlog.Stats{Connected: true} }

func (r *reader) selected(t string) bool {
	schema, table, _ := strings.Cut(t, ".")
	return r.cfg.Tables == nil || r.cfg.Tables.Match(schema, table)
}

// Run emits the log's events from r.from on, as they are appended, until
// ctx ends. A transaction with no selected row goes as an EventProgress,
// as binlog.Reader sends it. A reader that does not announce its tables
// (a shard-DDL catch-up) sends a heartbeat at the log's end each time
// it has read all, as a server with nothing more to send does; the
// destination's own readers send heartbeats only where the test appends
// them, so that the test decides what each promises.
func (r *reader) Run(ctx context.Context, emit func(*change.Event) error) error {
	if r.cfg.AnnounceTables {
		r.log.mu.Lock()
		ev := &change.Event{Type: change.EventProgress, Source: r.log.name, Pos: r.from, EndPos: r.from, Tables: []string{}}
		for _, t := range r.log.tables {
			if r.selected(t.FullName()) {
				ev.Tables, ev.Versions = append(ev.Tables, t.FullName()), append(ev.Versions, t)
			}
		}
		r.log.mu.Unlock()
		if err := emit(ev); err != nil {
			return err
		}
	}
	next := 0
	for {
		r.log.mu.Lock()
		items, grew := r.log.items, r.log.grew
		r.log.mu.Unlock()
		for ; next < len(items); next++ {
			it := items[next]
			if it.start.Compare(r.from) < 0 {
				continue
			}
			for _, ev := range r.filter(it.events) {
				if err := emit(ev); err != nil {
					return err
				}
			}
			r.log.mu.Lock()
			if r.log.read < next+1 {
				r.log.read = next + 1
				r.log.readCond.Broadcast()
			}
			r.log.mu.Unlock()
		}
		if !r.cfg.AnnounceTables {
			r.log.mu.Lock()
			end := r.log.pos(r.log.end)
			r.log.mu.Unlock()
			if err := emit(&change.Event{Type: change.EventHeartbeat, Source: r.log.name, Pos: end}); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-grew:
		}
	}
}

// filter copies a log item's events for one emit (the destination
// stamps them), leaving out unselected tables' rows.
func (r *reader) filter(events []*change.Event) []*change.Event {
	out := make([]*change.Event, 0, len(events))
	for _, ev := range events {
		e := *ev
		if e.Type == change.EventRows {
			if !r.selected(e.Rows[0].Table.FullName()) {
				continue
			}
			// The merge gives the rows its stamped table: each emit
			// has rows of its own, as a binlog reader's events have.
			e.Rows = slices.Clone(e.Rows)
		}
		if e.Type == change.EventDDL && !slices.ContainsFunc(e.DDL.Tables, r.selected) {
			e = change.Event{Type: change.EventProgress, Source: e.Source, Pos: e.Pos, EndPos: e.EndPos, CommitTime: e.CommitTime}
		}
		out = append(out, &e)
	}
	if len(out) == 2 && out[0].Type == change.EventBegin && out[0].Lost == "" { // every row left out (a marker has none)
		return []*change.Event{{Type: change.EventProgress, Source: out[0].Source, Pos: out[0].Pos, EndPos: out[1].Pos, CommitTime: out[0].CommitTime}}
	}
	return out
}
