package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-cdc/braid/binlog"
	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/spec"
)

// The initial snapshot (spec snapshot: initial) puts the rows each source's
// selected tables hold where the destination starts into the stream, as
// transactions of INSERTs ("chunks"), while the binlog's changes keep
// flowing. It is Flink CDC's incremental snapshot, done per source in
// front of the merge:
//
//   - A source's tables are read one after the other, each in chunks of
//     snapshot_chunk_rows rows in key order (a table whose key is not all
//     integer columns, or that has none, in one piece), by plain SELECTs on
//     a connection of the snapshot's own: no lock, no write.
//   - A chunk is registered before its SELECT runs, and from then on every
//     change the binlog brings to its table's unread keys is kept beside
//     it. Once the SELECT and the server's end of binlog after it (the
//     chunk's high watermark H) are known, the chunk waits until the
//     source's reader has passed H, then the changes kept are folded into
//     the rows selected, in binlog order: the rows are then the table's
//     rows at that boundary, and the chunk goes out there as a transaction
//     of its own.
//   - Until then the reader's changes to keys not yet emitted are left
//     out of the stream (their effect is in the chunk when it comes), so a
//     change to a key never goes out before the key's snapshot row. An
//     UPDATE that moves a row from an emitted key to an unread one goes out
//     as the old key's DELETE, and the reverse as the new key's INSERT.
//
// A chunk is not one of the source's transactions, so it takes no part in
// the merge's commit-time order: the merge emits it as soon as it heads
// its source's queue. Where a chunk goes therefore depends on timing, so
// the merge keeps each chunk in the destination's placement log
// (Config.RecordPlacement: Raft in a cluster, a file beside the cursors in
// capture) before it goes out: the source, the key range, the source
// boundary it follows and the point of the merged stream it goes out at
// (Taken). A restart, a new owner or a replay reader from an earlier
// cursor emits the logged chunks at the same boundaries and the same
// points, so every transaction keeps its seq, and reads no new chunk
// before they are all out. It selects their key ranges again, so their
// rows are as they are then (marked with the source's end of binlog then,
// change.Event.FreshAt), which a consumer applying the stream in order
// overwrites with the changes that follow until it has caught up.
// Progress (per table: the last key emitted, rows, chunks) is part of each
// source's cursor, so a restart goes on at the next chunk.
//
// A shard-DDL catch-up, which reads held rows again from the binlog,
// filters them by the chunks out before their position (filterHeld), as
// the gate did when they were live.

// Placement records the point of the merged stream at which something
// went out whose point depends on when it came, not on the binlogs alone:
// one chunk of the initial snapshot, or a late transaction (Late). It is
// kept in the destination's placement log before it goes out, and a
// replay puts it at the same point again. The log is stored under the
// name of what it first held: the chunk log (FileStore, raftstore).
type Placement struct {
	// Source is the source's index in the spec; Index numbers the
	// source's chunks from 0 (change.SnapshotState.Chunks before it).
	Source int `json:"source"`
	Index  int `json:"index"`
	// Table is "schema.table" as the source names it.
	Table string `json:"table"`
	// After and Through bound the chunk's keys: after After (empty: from
	// the first), up to and including Through (empty: to the table's end).
	After   []string `json:"after,omitempty"`
	Through []string `json:"through,omitempty"`
	// At is the source's transaction boundary the chunk follows in the
	// source's stream; Taken is the point of the merged stream it goes out
	// at (Cursor.Taken before it). Time is its commit time (µs) as shown.
	At    change.Position `json:"at"`
	Taken uint64          `json:"taken"`
	Time  int64           `json:"time"`
	// Late marks not a chunk but a late transaction (see Merger.Offer):
	// source Source's transaction that begins At went out at point Taken,
	// below keys already out, and a replay emits it there again. Index
	// and Table are unset.
	Late bool `json:"late,omitempty"`
}

// splitLate parts a placement log into the snapshot's chunks and the late
// transactions.
func splitLate(log []Placement) (chunks, lates []Placement) {
	for _, c := range log {
		if c.Late {
			lates = append(lates, c)
		} else {
			chunks = append(chunks, c)
		}
	}
	return chunks, lates
}

// chunkOut is what the merge learns of a chunk whose events a source's
// gate queued: the chunk, and whether it is kept already (a replay: it
// goes out at its Taken) or new (it goes out at once, kept first).
type chunkOut struct {
	chunk Placement
	kept  bool
	// freshAt is a kept chunk's change.Event.FreshAt.
	freshAt change.Position
}

// snapshotBatch is how many rows one EventRows of a chunk carries.
const snapshotBatch = 512

// snapshotProgressEvery is how often a running snapshot logs progress.
const snapshotProgressEvery = 10 * time.Second

// SnapshotStats is a source's snapshot progress, for status pages.
type SnapshotStats struct {
	Tables, TablesDone int
	Rows               int64
	// EstimatedRows is the servers' estimate of all the tables' rows
	// (0: unknown); RowsPerSecond the rate since the snapshot started
	// here, ETA the time left at that rate.
	EstimatedRows int64
	RowsPerSecond float64
	ETA           time.Duration
	Done          bool
}

// sourceSnapshot is one source's snapshot: the gate between its reader
// and its queue, and the goroutine that reads its chunks.
type sourceSnapshot struct {
	d    *Destination
	src  int
	name string
	log  *slog.Logger
	push func(*change.Event) error // into the source's queue

	mu        sync.Mutex
	state     *change.SnapshotState // nil until the reader announced its tables
	ready     chan struct{}         // closed once the reader announced its tables
	announced bool
	versions  map[string]*change.Table
	keys      map[*change.Table]tableKey
	boundary  change.Position // the boundary after the last transaction passed
	inTx      bool
	begin     *change.Event // the open transaction's EventBegin, not yet pushed
	beats     int           // heartbeats since the pending chunk became ready
	pending   *pendingChunk
	// recent are the changes left out lately (see leftRecently), oldest
	// first from recentHead on.
	recent     []leftChange
	recentHead int
	changed    chan struct{} // signalled (capacity 1) when pending goes or state changes
	after      [][]keyPart   // parsed After of each table, cached per state
	afterOf    *change.SnapshotState
	// recorded are the source's chunks from the log and those queued
	// since, by Index; under recMu, which is never held while pushing (the
	// merge reads them, see filterHeld).
	recMu    sync.Mutex
	recorded []Placement
	// outbox tells the merge of each chunk queued, in queue order.
	outbox chan chunkOut

	rows      atomic.Int64
	estimated atomic.Int64
	started   atomic.Int64 // when this run began reading, Unix ns
	stats     atomic.Pointer[SnapshotStats]
}

// tableKey is how a table version's rows are keyed: its key columns, and
// whether they are all integers (then it is read in chunks).
type tableKey struct {
	cols []int
	ints bool
}

// chunkRows are a chunk's rows: as the SELECT gave them (text, formatted
// straight from the server's text), or as Values once changes were folded
// in.
type chunkRows struct {
	text   *change.TextRows
	values [][]change.Value
}

func (r chunkRows) len() int {
	if r.text != nil {
		return r.text.Len()
	}
	return len(r.values)
}

// row is row k as Values.
func (r chunkRows) row(k int) []change.Value {
	if r.text != nil {
		return r.text.Row(k)
	}
	return r.values[k]
}

// changes are rows from to to as INSERTs of t numbered from 0.
func (r chunkRows) changes(t *change.Table, from, to int) []change.RowChange {
	if r.text != nil {
		return r.text.Changes(from, from, to)
	}
	return change.NewValueRows(t, from, r.values[from:to])
}

// leftChange is a change the gate left out (its key not yet read), with
// its table's index and when the reader passed it.
type leftChange struct {
	table int
	rc    change.RowChange
	at    time.Time
}

// A transaction reaches the binlog, and the reader, a moment before its
// rows are visible to other sessions: MariaDB and MySQL write the binlog
// and then commit in the engine. So a change the reader passed just
// before a chunk was registered may be missing from the chunk's SELECT
// too. A chunk's window therefore starts with the changes of its table
// left out within leftRecently before it was registered, and fold applies
// a window as the latest change of each key: a change the SELECT saw
// already is applied again to the same effect. The gap between binlog
// and engine commit is a group commit's last step, well under a
// millisecond unless the server stalls: leftRecently is far beyond it.
// At most leftRecentMax changes are kept, the newest, so the memory they
// hold stays small.
const (
	leftRecently  = 2 * time.Second
	leftRecentMax = 8192
)

// pendingChunk is a chunk registered and not yet emitted.
type pendingChunk struct {
	table   int // index in state.Tables
	version *change.Table
	key     tableKey
	after   []keyPart
	// window holds the table's changes to keys after `after` since a
	// moment before the chunk was registered (see leftRecently), in
	// binlog order.
	window []change.RowChange
	// Set once the SELECT is done: its rows, the chunk's last key (nil:
	// to the table's end) and the high watermark.
	selected bool
	rows     chunkRows
	through  []string
	high     change.Position
	// stale: a DDL of the table came since the chunk was registered; it
	// is dropped and read again.
	stale bool
}

// keyPart is one integer key value, comparable across signedness.
type keyPart struct {
	neg bool
	mag uint64 // |v|
}

func (a keyPart) compare(b keyPart) int {
	switch {
	case a.neg && !b.neg:
		return -1
	case !a.neg && b.neg:
		return 1
	case a.neg:
		return cmp.Compare(b.mag, a.mag)
	}
	return cmp.Compare(a.mag, b.mag)
}

func (a keyPart) String() string {
	if a.neg {
		return "-" + strconv.FormatUint(a.mag, 10)
	}
	return strconv.FormatUint(a.mag, 10)
}

// partOf is an integer Value's keyPart.
func partOf(v change.Value) (keyPart, bool) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return keyPart{neg: true, mag: uint64(-(x + 1)) + 1}, true
		}
		return keyPart{mag: uint64(x)}, true
	case uint64:
		return keyPart{mag: x}, true
	}
	return keyPart{}, false
}

// parseKey parses a key saved as decimal text.
func parseKey(text []string) ([]keyPart, error) {
	out := make([]keyPart, len(text))
	for i, s := range text {
		neg := strings.HasPrefix(s, "-")
		m, err := strconv.ParseUint(strings.TrimPrefix(s, "-"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("snapshot key %q: %w", s, err)
		}
		out[i] = keyPart{neg: neg && m != 0, mag: m}
	}
	return out, nil
}

func keyText(k []keyPart) []string {
	out := make([]string, len(k))
	for i, p := range k {
		out[i] = p.String()
	}
	return out
}

func compareKeys(a, b []keyPart) int {
	for i := range a {
		if c := a[i].compare(b[i]); c != 0 {
			return c
		}
	}
	return 0
}

var intTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "integer": true, "bigint": true}

// keyOf returns t's key columns (the primary key, or the unique key the
// schema model keys it by).
func keyOf(t *change.Table) tableKey {
	k := tableKey{ints: true}
	for i, c := range t.Columns {
		if c.Key {
			k.cols = append(k.cols, i)
			k.ints = k.ints && intTypes[c.Type]
		}
	}
	k.ints = k.ints && len(k.cols) > 0
	return k
}

func newSourceSnapshot(d *Destination, src int, from *change.SnapshotState, recorded []Placement) *sourceSnapshot {
	g := &sourceSnapshot{d: d, src: src, name: d.cfg.Spec.Sources[src].Name, log: d.log.With("source", d.cfg.Spec.Sources[src].Name),
		ready: make(chan struct{}), versions: map[string]*change.Table{}, keys: map[*change.Table]tableKey{},
		changed: make(chan struct{}, 1),
		outbox:  make(chan chunkOut, d.cfg.QueueEvents+2)} // a chunk takes an event of the queue at least
	g.started.Store(d.cfg.Now().UnixNano())
	for _, c := range recorded {
		if c.Source == src {
			g.recorded = append(g.recorded, c)
		}
	}
	if from != nil {
		g.state = from
		g.publishStats()
	}
	return g
}

// active reports whether the snapshot still has chunks to emit.
func (g *sourceSnapshot) active() bool {
	return g.state == nil || !g.state.Done
}

func (g *sourceSnapshot) signal() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// keyFor returns the key of a table version, computed once.
func (g *sourceSnapshot) keyFor(t *change.Table) tableKey {
	k, ok := g.keys[t]
	if !ok {
		k = keyOf(t)
		if len(g.keys) > 1024 {
			clear(g.keys)
		}
		g.keys[t] = k
	}
	return k
}

// afterKeys returns each table's parsed After, for the current state.
func (g *sourceSnapshot) afterKeys() [][]keyPart {
	if g.afterOf != g.state {
		g.after = make([][]keyPart, len(g.state.Tables))
		for i, t := range g.state.Tables {
			g.after[i], _ = parseKey(t.After) // made by keyText: parses
		}
		g.afterOf = g.state
	}
	return g.after
}

// tableIndex is the state's index of a table, or -1.
func (g *sourceSnapshot) tableIndex(name string) int {
	for i := range g.state.Tables {
		if g.state.Tables[i].Name == name {
			return i
		}
	}
	return -1
}

// emitted says whether a row of table ti has gone out in the snapshot
// (true: its changes go out) or not yet (false: they are left out; its
// chunk brings their effect).
func (g *sourceSnapshot) emitted(ti int, tk tableKey, row []change.Value) bool {
	st := g.state
	if st.Done || ti < 0 || st.Tables[ti].Done {
		return true
	}
	if ti != st.Next() || !tk.ints || len(st.Tables[ti].After) == 0 {
		return false
	}
	k, ok := rowKey(tk, row)
	if !ok {
		return false
	}
	return compareKeys(k, g.afterKeys()[ti]) <= 0
}

// rowKey is an integer-keyed row's key.
func rowKey(tk tableKey, row []change.Value) ([]keyPart, bool) {
	k := make([]keyPart, len(tk.cols))
	for i, c := range tk.cols {
		p, ok := partOf(row[c])
		if !ok {
			return nil, false
		}
		k[i] = p
	}
	return k, true
}

// pass is the reader's emit: it filters the source's events through the
// snapshot, passes them on, and emits chunks at the boundaries they are
// due.
func (g *sourceSnapshot) pass(ctx context.Context, ev *change.Event) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.announced && ev.Type == change.EventProgress && ev.Tables != nil {
		g.announced = true
		if g.state == nil {
			g.start(ev)
		}
		g.learn(ev)
		close(g.ready)
	}
	if ev.Type == change.EventRows && g.state != nil && !g.state.FreshAt.IsZero() && ev.Pos.Compare(g.state.FreshAt) < 0 {
		ev.FreshAt = g.state.FreshAt
	}
	if g.state == nil || g.state.Done {
		g.recent, g.recentHead = nil, 0 // no chunk will need them
		if ev.Type == change.EventDDL {
			g.learn(ev)
		}
		return g.push(ev)
	}
	switch ev.Type {
	case change.EventHeartbeat:
		if err := g.push(ev); err != nil {
			return err
		}
		// A stale heartbeat has binlog behind it: not caught up.
		if p := g.pending; p != nil && p.selected && !g.inTx && !ev.Stale {
			g.beats++
			if ev.Pos.Compare(p.high) >= 0 || g.beats >= 2 {
				// Caught up: the server had nothing more to send.
				return g.emitPending(ctx)
			}
		}
		return nil
	case change.EventBegin:
		g.inTx, g.begin = true, ev
		return nil
	case change.EventRows:
		kept := g.filterRows(ev)
		if len(kept) == 0 {
			return nil
		}
		if g.begin != nil {
			if err := g.push(g.begin); err != nil {
				return err
			}
			g.begin = nil
		}
		ev.Rows = kept
		return g.push(ev)
	case change.EventCommit:
		g.inTx = false
		g.boundary = ev.Pos
		if b := g.begin; b != nil {
			// Every row was left out: the transaction moves the position
			// and the clock on, as one of unselected tables does.
			g.begin = nil
			if err := g.push(&change.Event{Type: change.EventProgress, Source: ev.Source, ServerID: ev.ServerID, Pos: b.Pos, EndPos: ev.Pos, GTID: ev.GTID, CommitTime: ev.CommitTime}); err != nil {
				return err
			}
		} else if err := g.push(ev); err != nil {
			return err
		}
	case change.EventDDL:
		g.learn(ev)
		g.boundary = ev.EndPos
		if err := g.push(ev); err != nil {
			return err
		}
	case change.EventProgress:
		g.boundary = ev.EndPos
		if err := g.push(ev); err != nil {
			return err
		}
	default:
		return g.push(ev)
	}
	return g.atBoundary(ctx)
}

// start makes the state of a fresh snapshot from the reader's first
// event, which names the selected tables existing where it starts.
func (g *sourceSnapshot) start(ev *change.Event) {
	st := &change.SnapshotState{Tables: make([]change.SnapshotTable, 0, len(ev.Tables))}
	for _, name := range ev.Tables {
		st.Tables = append(st.Tables, change.SnapshotTable{Name: name})
	}
	st.Done = len(st.Tables) == 0
	g.state = st
	g.publishStats()
}

// learn takes the table versions an event brings, and marks a pending
// chunk of a table a DDL names stale.
func (g *sourceSnapshot) learn(ev *change.Event) {
	if ev.Type == change.EventProgress && ev.Tables != nil {
		g.learnVersions(ev.Tables, ev.Versions)
		g.boundary = ev.Pos
		return
	}
	if ev.DDL == nil {
		return
	}
	g.learnVersions(ev.DDL.Tables, ev.Versions)
	if p := g.pending; p != nil && g.state != nil && slices.Contains(ev.DDL.Tables, g.state.Tables[p.table].Name) {
		p.stale = true
	}
}

func (g *sourceSnapshot) learnVersions(names []string, versions []*change.Table) {
	for i, name := range names {
		if i < len(versions) {
			g.versions[name] = versions[i]
		}
	}
}

// filterRows returns the row changes of ev that go out, keeping those of
// a pending chunk's table in its window.
func (g *sourceSnapshot) filterRows(ev *change.Event) []change.RowChange {
	t := ev.Rows[0].Table
	ti := g.tableIndex(t.FullName())
	if ti < 0 || g.state.Tables[ti].Done {
		return ev.Rows
	}
	tk := g.keyFor(t)
	p := g.pending
	keep := p != nil && p.table == ti && !p.stale
	now := time.Now()
	return byZone(ev.Rows, func(row []change.Value) bool { return g.emitted(ti, tk, row) }, func(rc change.RowChange) {
		if keep {
			p.window = append(p.window, rc)
		}
		g.leaveRecent(leftChange{table: ti, rc: rc, at: now})
	})
}

// leaveRecent keeps a change left out for the windows of chunks
// registered within leftRecently, dropping those older than that.
func (g *sourceSnapshot) leaveRecent(c leftChange) {
	for g.recentHead < len(g.recent) && (c.at.Sub(g.recent[g.recentHead].at) > leftRecently || len(g.recent)-g.recentHead >= leftRecentMax) {
		g.recent[g.recentHead] = leftChange{}
		g.recentHead++
	}
	if g.recentHead > len(g.recent)/2 {
		// Slide down rather than grow: the kept part is at most half.
		n := copy(g.recent, g.recent[g.recentHead:])
		clear(g.recent[n:])
		g.recent, g.recentHead = g.recent[:n], 0
	}
	g.recent = append(g.recent, c)
}

// recentOf returns the changes of table ti left out within leftRecently
// of now, oldest first.
func (g *sourceSnapshot) recentOf(ti int, now time.Time) []change.RowChange {
	var out []change.RowChange
	for _, c := range g.recent[g.recentHead:] {
		if c.table == ti && now.Sub(c.at) <= leftRecently {
			out = append(out, c.rc)
		}
	}
	return out
}

// byZone returns the row changes that go out, given whether a row's key
// has gone out in the snapshot: a change of keys gone out goes out, one
// of keys not yet is left out (its chunk brings its effect, and left is
// told of it), and an UPDATE that moves a row from one to the other goes
// out as the DELETE or the INSERT of the side gone out.
func byZone(rows []change.RowChange, out func([]change.Value) bool, left func(change.RowChange)) []change.RowChange {
	kept := rows[:0:0]
	for _, rc := range rows {
		var before, after []change.Value
		if rc.HasBefore() {
			before = rc.Before()
		}
		if rc.HasAfter() {
			after = rc.After()
		}
		oldOut := before != nil && out(before)
		newOut := after != nil && out(after)
		if (before != nil && !oldOut) || (after != nil && !newOut) {
			left(rc)
		}
		switch {
		case rc.Kind == change.Update && oldOut && !newOut:
			del, _ := rc.Split()
			kept = append(kept, del)
		case rc.Kind == change.Update && !oldOut && newOut:
			_, ins := rc.Split()
			kept = append(kept, ins)
		case rc.Kind == change.Update && oldOut && newOut, rc.Kind == change.Insert && newOut, rc.Kind == change.Delete && oldOut:
			kept = append(kept, rc)
		}
	}
	return kept
}

// filterHeld returns the row changes of ev, read again by a shard-DDL
// catch-up after its lock held them, that went out had they not been
// held: by the chunks kept before ev's position, as the gate filtered
// them when they were live. Without it the catch-up would emit a change
// of a key whose chunk came later, and a later change left out (its
// effect in that chunk) could leave a row the source no longer has.
func (g *sourceSnapshot) filterHeld(ev *change.Event) []change.RowChange {
	t := ev.Rows[0].Table
	name := t.FullName()
	g.recMu.Lock()
	recorded := g.recorded
	g.recMu.Unlock()
	seen, done := false, false
	var through []keyPart
	for _, c := range recorded {
		if c.Table != name || c.At.Compare(ev.Pos) > 0 {
			continue
		}
		seen = true
		if len(c.Through) == 0 {
			done = true
			break
		}
		through, _ = parseKey(c.Through) // chunks go in key order: the last one is the furthest
	}
	if done {
		return ev.Rows
	}
	tk := keyOf(t)
	return byZone(ev.Rows, func(row []change.Value) bool {
		if !seen || !tk.ints {
			return false
		}
		k, ok := rowKey(tk, row)
		return ok && compareKeys(k, through) <= 0
	}, func(change.RowChange) {})
}

// atBoundary emits what is due after the boundary just passed: the
// chunks of the log that follow it, then a pending chunk whose high
// watermark the reader has passed.
func (g *sourceSnapshot) atBoundary(ctx context.Context) error {
	for g.active() && g.state != nil {
		if rec, ok := g.nextRecorded(); ok {
			if rec.At.Compare(g.boundary) > 0 {
				return nil // it follows a later boundary
			}
			if err := g.replayChunk(ctx, rec); err != nil {
				return err
			}
			continue
		}
		if g.d.cfg.ReplayOnly {
			// A replay reader emits the live destination's chunks only:
			// wait until it has logged the next one (then it has passed
			// this boundary, or put the chunk here).
			if err := g.awaitRecord(ctx); err != nil {
				return err
			}
			continue
		}
		if p := g.pending; p != nil && p.selected && g.boundary.Compare(p.high) >= 0 {
			return g.emitPending(ctx)
		}
		return nil
	}
	return nil
}

// nextRecorded returns the logged chunk the state expects next, if any.
func (g *sourceSnapshot) nextRecorded() (Placement, bool) {
	n := g.state.Chunks
	g.recMu.Lock()
	defer g.recMu.Unlock()
	if n < len(g.recorded) {
		return g.recorded[n], true
	}
	return Placement{}, false
}

// keptChunks is how many of the source's chunks are known.
func (g *sourceSnapshot) keptChunks() int {
	g.recMu.Lock()
	defer g.recMu.Unlock()
	return len(g.recorded)
}

// awaitRecord waits, unlocked, until the placement log holds the
// source's next chunk.
func (g *sourceSnapshot) awaitRecord(ctx context.Context) error {
	n := g.state.Chunks
	for {
		if list := g.d.cfg.Placements; list != nil {
			var mine []Placement
			for _, c := range list() {
				if c.Source == g.src {
					mine = append(mine, c)
				}
			}
			g.recMu.Lock()
			g.recorded = mine
			g.recMu.Unlock()
		}
		if n < g.keptChunks() {
			return nil
		}
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			g.mu.Lock()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		g.mu.Lock()
	}
}

// replayChunk emits a logged chunk: its key range as it is now.
func (g *sourceSnapshot) replayChunk(ctx context.Context, rec Placement) error {
	ti := g.tableIndex(rec.Table)
	if ti < 0 || rec.Index != g.state.Chunks {
		return fmt.Errorf("group: source %s: the snapshot's chunk log does not match the cursor (chunk %d of %s, the cursor expects chunk %d): delete the cursor and the chunk log to start the snapshot over",
			g.name, rec.Index, rec.Table, g.state.Chunks)
	}
	version := g.versions[rec.Table]
	var rows chunkRows
	var freshAt change.Position
	if version != nil {
		conn, err := binlog.OpenSnapshot(ctx, g.d.cfg.Spec.Sources[g.src])
		if err != nil {
			return err
		}
		tk := g.keyFor(version)
		if !tk.ints {
			tk.cols = nil
		}
		rows.text, err = conn.Chunk(ctx, version, tk.cols, rec.After, rec.Through, 0)
		if err == nil {
			freshAt, err = conn.Position()
		}
		conn.Close()
		if err != nil && !errors.Is(err, binlog.ErrNoTable) {
			return err
		}
	}
	return g.emit(ti, version, rows, rec.Through, chunkOut{chunk: rec, kept: true, freshAt: freshAt})
}

// emitPending emits the pending chunk, its window folded in, at the
// current boundary; a stale one is dropped to be read again.
func (g *sourceSnapshot) emitPending(ctx context.Context) error {
	p := g.pending
	g.pending, g.beats = nil, 0
	defer g.signal()
	if p.stale {
		return nil
	}
	rows := fold(p)
	t := g.state.Tables[p.table]
	if g.d.cfg.ReplayOnly {
		return errors.New("group: a replay reader cannot make snapshot chunks")
	}
	rec := Placement{Source: g.src, Index: g.state.Chunks, Table: t.Name, After: t.After, Through: p.through, At: g.boundary,
		Time: g.d.cfg.Now().UnixMicro()}
	g.recMu.Lock()
	g.recorded = append(g.recorded, rec)
	g.recMu.Unlock()
	return g.emit(p.table, p.version, rows, p.through, chunkOut{chunk: rec})
}

// fold applies a chunk's window to its selected rows: the rows its key
// range holds after the last change kept, in key order.
func fold(p *pendingChunk) chunkRows {
	var through []keyPart
	if p.through != nil {
		through, _ = parseKey(p.through)
	}
	in := func(row []change.Value) bool {
		if !p.key.ints {
			return true // one piece: the whole table
		}
		k, ok := rowKey(p.key, row)
		if !ok {
			return false
		}
		return (p.after == nil || compareKeys(k, p.after) > 0) && (through == nil || compareKeys(k, through) <= 0)
	}
	if len(p.window) == 0 {
		return p.rows
	}
	idOf := func(row []change.Value) string {
		var b strings.Builder
		cols := p.key.cols
		if len(cols) == 0 {
			for i := range row {
				cols = append(cols, i)
			}
		}
		for _, c := range cols {
			fmt.Fprintf(&b, "%T:%v\x00", row[c], row[c])
		}
		return b.String()
	}
	// A keyed table's rows are replaced by key: the window's latest
	// change of a key decides it, whether or not the SELECT saw the
	// change already (see leftRecently). Rows of a table without a key
	// may repeat: one is added or taken away per change.
	keyed := len(p.key.cols) > 0
	byID := map[string][][]change.Value{}
	var order []string
	put := func(row []change.Value) {
		id := idOf(row)
		rs, ok := byID[id]
		if !ok {
			order = append(order, id)
		}
		if keyed {
			rs = rs[:0]
		}
		byID[id] = append(rs, row)
	}
	for k := range p.rows.len() {
		put(p.rows.row(k))
	}
	for _, rc := range p.window {
		if !sameColumns(rc.Table, p.version) {
			continue // of another version: a DDL made the chunk stale
		}
		if rc.HasBefore() {
			if before := rc.Before(); in(before) {
				id := idOf(before)
				if rs := byID[id]; len(rs) > 0 {
					byID[id] = rs[1:]
				}
			}
		}
		if rc.HasAfter() {
			if after := rc.After(); in(after) {
				put(after)
			}
		}
	}
	out := make([][]change.Value, 0, p.rows.len())
	for _, id := range order {
		out = append(out, byID[id]...)
		delete(byID, id)
	}
	if p.key.ints {
		slices.SortFunc(out, func(a, b []change.Value) int {
			ka, _ := rowKey(p.key, a)
			kb, _ := rowKey(p.key, b)
			return compareKeys(ka, kb)
		})
	}
	return chunkRows{values: out}
}

// sameColumns reports whether two table versions have the same columns.
func sameColumns(a, b *change.Table) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || len(a.Columns) != len(b.Columns) {
		return false
	}
	for i := range a.Columns {
		if !strings.EqualFold(a.Columns[i].Name, b.Columns[i].Name) {
			return false
		}
	}
	return true
}

// emit sends a chunk as one transaction of INSERTs at the current
// boundary, with the state after it on its EventCommit.
func (g *sourceSnapshot) emit(ti int, version *change.Table, rows chunkRows, through []string, out chunkOut) error {
	rec := out.chunk
	next := g.state.Clone()
	next.Chunks++
	if next.FreshAt.Compare(out.freshAt) < 0 {
		next.FreshAt = out.freshAt
	}
	t := &next.Tables[ti]
	t.Chunks++
	n := rows.len()
	t.Rows += int64(n)
	if through == nil {
		t.Done, t.After = true, nil
	} else {
		t.After = through
	}
	next.Done = next.Next() == len(next.Tables)
	when := time.UnixMicro(rec.Time)
	base := change.Event{Source: g.name, Pos: g.boundary, CommitTime: when, Snapshot: true, FreshAt: out.freshAt}
	begin := base
	begin.Type = change.EventBegin
	g.outbox <- out // never blocks: see its capacity
	if err := g.push(&begin); err != nil {
		return err
	}
	for i := 0; i < n; i += snapshotBatch {
		ev := base
		ev.Type = change.EventRows
		ev.Rows = rows.changes(version, i, min(i+snapshotBatch, n))
		if rows.text != nil {
			// The events share the rows' buffer: each counts its share.
			ev.BinlogBytes = rows.text.Bytes() * int64(len(ev.Rows)) / int64(n)
		}
		if err := g.push(&ev); err != nil {
			return err
		}
	}
	commit := base
	commit.Type, commit.SnapshotState = change.EventCommit, next
	if err := g.push(&commit); err != nil {
		return err
	}
	g.state = next
	g.rows.Add(int64(n))
	g.publishStats()
	if next.Done {
		g.log.Info("snapshot done", "tables", len(next.Tables), "rows", g.rows.Load(), "took", g.d.cfg.Now().Sub(time.Unix(0, g.started.Load())).Round(time.Millisecond))
	}
	return nil
}

// run reads the source's chunks until the snapshot is done or ctx ends.
// sem bounds how many sources read at once.
func (g *sourceSnapshot) run(ctx context.Context, sem chan struct{}) error {
	select {
	case <-g.ready:
	case <-ctx.Done():
		return nil
	}
	// Logged chunks come first, emitted by the reader at their boundaries.
	for {
		g.mu.Lock()
		done, replaying := g.state.Done, g.state.Chunks < g.keptChunks()
		g.mu.Unlock()
		if done {
			return nil
		}
		if !replaying {
			break
		}
		select {
		case <-g.changed:
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-g.d.keptOut: // the other sources' kept chunks too
	case <-ctx.Done():
		return nil
	}
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	case <-ctx.Done():
		return nil
	}
	var conn *binlog.SnapshotConn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	g.started.Store(g.d.cfg.Now().UnixNano())
	g.rows.Store(0)
	lastLog := g.d.cfg.Now()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if conn == nil {
			c, err := binlog.OpenSnapshot(ctx, g.d.cfg.Spec.Sources[g.src])
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				g.log.Warn("snapshot cannot connect; retrying", "err", err, "retry_in", backoff)
				if !sleepCtx(ctx, backoff) {
					return nil
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			conn = c
			if g.estimated.Load() == 0 {
				g.estimate(conn)
			}
		}
		more, err := g.readChunk(ctx, conn)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			g.log.Warn("snapshot chunk failed; reading it again", "err", err, "retry_in", backoff)
			conn.Close()
			conn = nil
			if !sleepCtx(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if !more {
			return nil
		}
		if now := g.d.cfg.Now(); now.Sub(lastLog) >= snapshotProgressEvery {
			lastLog = now
			st := g.Stats()
			g.log.Info("snapshot progress", "tables_done", st.TablesDone, "tables", st.Tables, "rows", st.Rows,
				"rows_per_s", int64(st.RowsPerSecond), "eta", st.ETA.Round(time.Second))
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// estimate asks the server how many rows the tables left hold.
func (g *sourceSnapshot) estimate(conn *binlog.SnapshotConn) {
	g.mu.Lock()
	var tables []*change.Table
	for _, t := range g.state.Tables {
		if v := g.versions[t.Name]; v != nil && !t.Done {
			tables = append(tables, v)
		}
	}
	g.mu.Unlock()
	var n int64
	for _, t := range tables {
		n += conn.EstimateRows(t)
	}
	g.estimated.Store(max(n, 1))
}

// readChunk registers, selects and hands over the next chunk, then waits
// until it has been emitted (or dropped as stale); it reports whether the
// snapshot has more to read.
func (g *sourceSnapshot) readChunk(ctx context.Context, conn *binlog.SnapshotConn) (bool, error) {
	g.mu.Lock()
	if g.state.Done {
		g.mu.Unlock()
		return false, nil
	}
	ti := g.state.Next()
	t := g.state.Tables[ti]
	version := g.versions[t.Name]
	p := &pendingChunk{table: ti, version: version}
	if version != nil {
		p.key = g.keyFor(version)
		if !p.key.ints && len(t.After) == 0 && t.Chunks == 0 {
			g.log.Warn("snapshot reads a table whose key is not made of integer columns in one piece: its rows are held in memory while it is read",
				"table", t.Name)
		}
	}
	if len(t.After) > 0 {
		p.after = g.afterKeys()[ti]
	}
	if len(p.key.cols) > 0 {
		// Only a keyed table's window can be applied again to rows
		// that have its changes already (see leftRecently).
		p.window = g.recentOf(ti, time.Now())
	}
	g.pending = p
	g.mu.Unlock()

	var rows chunkRows
	var err error
	limit := g.d.cfg.Spec.SnapshotChunkRows
	if version != nil {
		cols := p.key.cols
		if !p.key.ints {
			cols, limit = nil, 0
		}
		rows.text, err = conn.Chunk(ctx, version, cols, t.After, nil, limit)
		if errors.Is(err, binlog.ErrNoTable) {
			g.mu.Lock()
			gone := g.versions[t.Name] == nil
			g.mu.Unlock()
			if gone {
				rows, err = chunkRows{}, nil // dropped since: nothing to read
			}
		}
	}
	var high change.Position
	if err == nil {
		high, err = conn.Position()
	}
	g.mu.Lock()
	if err != nil {
		g.pending = nil
		g.mu.Unlock()
		return true, err
	}
	p.rows, p.high, p.selected = rows, high, true
	if n := rows.len(); version != nil && p.key.ints && limit > 0 && n == limit {
		k, _ := rowKey(p.key, rows.row(n-1))
		p.through = keyText(k)
	}
	if !g.inTx && g.boundary.Compare(high) >= 0 {
		if err := g.emitPending(ctx); err != nil {
			g.mu.Unlock()
			return false, err
		}
	}
	g.mu.Unlock()
	// Wait until the reader has emitted it.
	for {
		g.mu.Lock()
		waiting := g.pending == p
		g.mu.Unlock()
		if !waiting {
			return true, nil
		}
		select {
		case <-g.changed:
		case <-ctx.Done():
			return false, nil
		}
	}
}

// Stats returns the source's snapshot progress.
func (g *sourceSnapshot) Stats() SnapshotStats {
	st := g.stats.Load()
	if st == nil {
		return SnapshotStats{}
	}
	out := *st
	out.Rows = g.rows.Load()
	out.EstimatedRows = g.estimated.Load()
	if el := g.d.cfg.Now().Sub(time.Unix(0, g.started.Load())).Seconds(); el > 0 && !out.Done {
		out.RowsPerSecond = float64(out.Rows) / el
		if left := out.EstimatedRows - out.Rows; left > 0 && out.RowsPerSecond > 0 {
			out.ETA = time.Duration(float64(left) / out.RowsPerSecond * float64(time.Second))
		}
	}
	return out
}

// publishStats refreshes what Stats reads; called under mu.
func (g *sourceSnapshot) publishStats() {
	st := &SnapshotStats{Tables: len(g.state.Tables), Done: g.state.Done}
	for _, t := range g.state.Tables {
		if t.Done {
			st.TablesDone++
		}
	}
	g.stats.Store(st)
}

// snapshotOn reports whether spec ds asks for an initial snapshot.
func snapshotOn(ds *spec.Spec) bool { return ds.Snapshot == spec.SnapshotInitial }
