package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
)

// leftChange is a change the gate left out (its key not yet read), with
// its table's index, its binlog position, when the reader passed it and
// the server it read it from (sourceSnapshot.serverGen).
type leftChange struct {
	table int
	rc    change.RowChange
	pos   change.Position
	at    time.Time
	gen   int
}

// A transaction reaches the binlog, and the reader, a moment before its
// rows are visible to other sessions: MariaDB and MySQL write the binlog
// and then commit in the engine. So a change the reader passed just
// before a chunk was registered may be missing from the chunk's SELECT
// too. A chunk's window therefore starts with the changes of its table
// left out within leftRecently before it was registered, and fold applies
// a window as the latest change of each key: a change the SELECT saw
// already is applied again to the same effect. (A table without a key
// is read in a consistent snapshot whose binlog position tells fold
// which of them it saw, see pendingChunk.low.) The gap between binlog
// and engine commit is a group commit's last step, well under a
// millisecond unless the server stalls: leftRecently is far beyond it.
// At most leftRecentMax changes are kept, the newest, so the memory they
// hold stays small.
const (
	leftRecently  = 2 * time.Second
	leftRecentMax = 8192
)

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

// pass is the reader's emit: it filters the source's events through the
// snapshot, passes them on, and emits chunks at the boundaries they are
// due.
//
// Before it lets pushMu go, with mu held since, it emits the pending
// chunks due: a chunk the snapshot goroutine selected while the reader
// was in here (pushMu held, mu let go while pushing) goes out then, as
// readChunk counts on when it finds pushMu taken.
func (g *sourceSnapshot) pass(ctx context.Context, ev *change.Event) error {
	g.pushMu.Lock()
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.pushMu.Unlock() // first, mu still held
	if err := g.gate(ctx, ev); err != nil {
		return err
	}
	if g.inTx || g.state == nil {
		return nil
	}
	return g.emitDue(ctx)
}

// gate is pass's filter, under pushMu and mu.
func (g *sourceSnapshot) gate(ctx context.Context, ev *change.Event) error {
	if !g.announced && ev.Type == change.EventProgress && ev.Tables != nil {
		g.announced = true
		if g.state == nil {
			g.start(ev)
		}
		g.learn(ev)
		close(g.ready)
	}
	// A transaction before the point the chunks read again are fresh at
	// may find its rows already so. The point may be on another server
	// than the reader's (a chunk read again before a failover, or on a
	// server the snapshot connection reached and the reader did not):
	// txFrom compares by GTID then, as positions of two servers say
	// nothing of each other. Decided once per transaction: chunks go out
	// between transactions only.
	if ev.Type == change.EventBegin {
		g.fresh = g.state != nil && !g.state.FreshAt.IsZero() && !txFrom(ev, g.state.FreshAt, g.state.FreshMark)
	}
	if ev.Type == change.EventRows && g.fresh && g.state != nil {
		ev.FreshAt = g.state.FreshAt
	}
	g.switched(ev)
	if g.state == nil || g.state.Done {
		g.recent, g.recentHead = nil, 0 // no chunk will need them
		if ev.Type == change.EventDDL {
			g.learn(ev)
		}
		return g.send(ev)
	}
	switch ev.Type {
	case change.EventHeartbeat:
		if err := g.send(ev); err != nil {
			return err
		}
		// A stale heartbeat has binlog behind it: not caught up.
		if g.inTx || ev.Stale {
			return nil
		}
		for _, p := range g.pending {
			if p.selected {
				p.beats++
			}
		}
		for len(g.pending) > 0 {
			if p := g.pending[0]; !p.selected || ev.Pos.Compare(p.high) < 0 && p.beats < 2 {
				break
			}
			// Caught up: the server had nothing more to send.
			if err := g.emitPending(ctx); err != nil {
				return err
			}
		}
		return nil
	case change.EventBegin:
		if ev.Lost != "" {
			// A marker of lost transactions has no rows to leave out:
			// it goes, whatever the snapshot left.
			g.inTx = true
			return g.send(ev)
		}
		g.inTx, g.begin = true, ev
		return nil
	case change.EventRows:
		kept := g.filterRows(ev)
		if len(kept) == 0 {
			return nil
		}
		if g.begin != nil {
			if err := g.send(g.begin); err != nil {
				return err
			}
			g.begin = nil
		}
		ev.Rows = kept
		return g.send(ev)
	case change.EventCommit:
		g.inTx = false
		g.boundary, g.boundMark = ev.Pos, markOf(ev)
		if b := g.begin; b != nil {
			// Every row was left out: the transaction moves the position
			// and the clock on, as one of unselected tables does.
			g.begin = nil
			if err := g.send(&change.Event{Type: change.EventProgress, Source: ev.Source, ServerID: ev.ServerID, Pos: b.Pos, EndPos: ev.Pos, GTID: ev.GTID, CommitTime: ev.CommitTime,
				GTIDs: ev.GTIDs, Server: ev.Server}); err != nil {
				return err
			}
		} else if err := g.send(ev); err != nil {
			return err
		}
	case change.EventDDL:
		g.learn(ev)
		g.boundary, g.boundMark = ev.EndPos, markOf(ev)
		if err := g.send(ev); err != nil {
			return err
		}
	case change.EventProgress:
		g.boundary, g.boundMark = ev.EndPos, markOf(ev)
		if err := g.send(ev); err != nil {
			return err
		}
	default:
		return g.send(ev)
	}
	return g.atBoundary(ctx)
}

// switched drops the pending chunks when ev shows the reader reads
// another server than before (a failover, engine/binlog/failover.go): a
// chunk's high watermark is a file:pos of the server its SELECT ran on,
// and compared with the new server's positions it says nothing (passed
// at once where the new server's files are numbered ahead, before the
// changes the chunk holds, which would then go out again). Read again,
// the chunks are selected on the server the snapshot connection reaches
// now and wait for its positions, their windows starting afresh as a
// new chunk's do.
func (g *sourceSnapshot) switched(ev *change.Event) {
	if ev.Server == nil {
		return
	}
	if g.server != nil && !g.server.Same(ev.Server) {
		g.serverGen++ // the changes left out so far have the old server's positions
		if g.state != nil && len(g.pending) > 0 {
			g.log.Info("snapshot reads its pending chunks again: the source switched servers", "chunks", len(g.pending))
			g.dropPending(0)
		}
	}
	g.server = ev.Server
}

// send pushes ev into the source's queue; called under pushMu and mu, it
// lets mu go meanwhile, so that the snapshot goroutine can register and
// select chunks while a full queue holds the reader (pushMu keeps the
// queue's order).
func (g *sourceSnapshot) send(ev *change.Event) error {
	g.mu.Unlock()
	defer g.mu.Lock()
	return g.push(ev)
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

// learn takes the table versions an event brings, and drops the pending
// chunks from the first of a table a DDL names on (see dropPending).
func (g *sourceSnapshot) learn(ev *change.Event) {
	if ev.Type == change.EventProgress && ev.Tables != nil {
		g.learnVersions(ev.Tables, ev.Versions)
		g.boundary, g.boundMark = ev.Pos, markOf(ev)
		return
	}
	if ev.DDL == nil {
		return
	}
	g.learnVersions(ev.DDL.Tables, ev.Versions)
	if g.state == nil {
		return
	}
	for i, p := range g.pending {
		if slices.Contains(ev.DDL.Tables, g.state.Tables[p.table].Name) {
			g.dropPending(i)
			return
		}
	}
}

// dropPending drops the pending chunks from the i-th on, marked stale
// (one whose SELECT runs sees it after): a chunk of a table a DDL changed
// is read again with the new columns, and those after it, which follow
// on from it, are read again after it.
func (g *sourceSnapshot) dropPending(i int) {
	for _, p := range g.pending[i:] {
		p.stale = true
	}
	clear(g.pending[i:])
	g.pending = g.pending[:i]
	g.signal()
}

func (g *sourceSnapshot) learnVersions(names []string, versions []*change.Table) {
	for i, name := range names {
		if i < len(versions) {
			g.versions[name] = versions[i]
		}
	}
}

// filterRows returns the row changes of ev that go out, keeping those
// left out in the windows of the pending chunks they touch.
func (g *sourceSnapshot) filterRows(ev *change.Event) []change.RowChange {
	t := ev.Rows[0].Table
	ti := g.tableIndex(t.FullName())
	if ti < 0 || g.state.Tables[ti].Done {
		return ev.Rows
	}
	tk := g.keyFor(t)
	now := g.d.cfg.Clock.Now()
	return byZone(ev.Rows, func(row []change.Value) bool { return g.emitted(ti, tk, row) }, func(rc change.RowChange) {
		g.toWindows(ti, tk, rc, ev.Pos)
		g.leaveRecent(leftChange{table: ti, rc: rc, pos: ev.Pos, at: now, gen: g.serverGen})
	})
}

// toWindows keeps a change of table ti left out in the window of each
// pending chunk of the table whose key range holds its old or new key
// (fold would pass it over in the others), or in all of them when its
// keys are not integers.
func (g *sourceSnapshot) toWindows(ti int, tk tableKey, rc change.RowChange, at change.Position) {
	var keys [][]keyPart
	ranged := tk.ints
	for _, img := range []bool{false, true} {
		if !ranged || img && !rc.HasAfter() || !img && !rc.HasBefore() {
			continue
		}
		row := rc.Before()
		if img {
			row = rc.After()
		}
		k, ok := rowKey(tk, row)
		ranged = ok
		keys = append(keys, k)
	}
	for _, p := range g.pending {
		if p.table == ti && (!ranged || !p.key.ints || slices.ContainsFunc(keys, p.holds)) {
			p.window, p.windowAt = append(p.window, rc), append(p.windowAt, at)
		}
	}
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
// of now, oldest first, and their positions; sameServer: only those read
// from the server the reader reads now, whose positions compare with
// its snapshots'.
func (g *sourceSnapshot) recentOf(ti int, now time.Time, sameServer bool) ([]change.RowChange, []change.Position) {
	var out []change.RowChange
	var at []change.Position
	for _, c := range g.recent[g.recentHead:] {
		if c.table == ti && now.Sub(c.at) <= leftRecently && (!sameServer || c.gen == g.serverGen) {
			out, at = append(out, c.rc), append(at, c.pos)
		}
	}
	return out, at
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

// filterHeld returns the row changes of ev (of the transaction first
// begins), read again by a shard-DDL catch-up after its lock held them,
// that went out had they not been held: by the chunks kept before ev's
// position (on another server, before its GTID), as the gate filtered
// them when they were live. Without it the catch-up would emit a change
// of a key whose chunk came later, and a later change left out (its
// effect in that chunk) could leave a row the source no longer has.
func (g *sourceSnapshot) filterHeld(first, ev *change.Event) []change.RowChange {
	t := ev.Rows[0].Table
	name := t.FullName()
	g.recMu.Lock()
	recorded := g.recorded
	g.recMu.Unlock()
	seen, done := false, false
	var through []keyPart
	for _, c := range recorded {
		if c.Table != name || !txFrom(first, c.At, c.AtMark) {
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
			if !reached(g.boundary, g.boundMark, rec.At, rec.AtMark) {
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
		return g.emitDue(ctx)
	}
	return nil
}

// emitDue emits the pending chunks whose high watermark the boundary has
// passed, in order; called at a boundary, under pushMu and mu.
func (g *sourceSnapshot) emitDue(ctx context.Context) error {
	for len(g.pending) > 0 && g.pending[0].selected && g.boundary.Compare(g.pending[0].high) >= 0 {
		if err := g.emitPending(ctx); err != nil {
			return err
		}
	}
	return nil
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
	var freshMark Mark
	if version != nil {
		conn, err := g.d.cfg.Sources.Snapshot(ctx, g.d.cfg.Spec.Sources[g.src])
		if err != nil {
			return err
		}
		tk := g.keyFor(version)
		if !tk.ints {
			tk.cols = nil
		}
		rows.text, err = conn.Chunk(ctx, version, tk.cols, rec.After, rec.Through, 0)
		if err == nil {
			freshAt, freshMark, err = conn.Fresh()
		}
		conn.Close()
		if err != nil && !errors.Is(err, binlog.ErrNoTable) {
			return err
		}
	}
	return g.emit(ti, version, rows, rec.Through, chunkOut{chunk: rec, kept: true, freshAt: freshAt, freshMark: freshMark})
}

// emitPending emits the first pending chunk, its window folded in, at
// the current boundary; a stale one is dropped to be read again.
func (g *sourceSnapshot) emitPending(ctx context.Context) error {
	p := g.pending[0]
	// It stays first while it goes out (mu is let go while it is
	// pushed): the next chunk to read follows on from it.
	defer func() {
		g.pending = slices.Delete(g.pending, 0, 1)
		g.signal()
	}()
	if p.stale {
		return nil
	}
	rows := fold(p)
	t := g.state.Tables[p.table]
	if g.d.cfg.ReplayOnly {
		return errors.New("group: a replay reader cannot make snapshot chunks")
	}
	rec := Placement{Source: g.src, Index: g.state.Chunks, Table: t.Name, After: t.After, Through: p.through, At: g.boundary,
		AtMark: g.boundMark, Time: g.d.cfg.Clock.Now().UnixMicro()}
	g.recMu.Lock()
	g.recorded = append(g.recorded, rec)
	g.recMu.Unlock()
	return g.emit(p.table, p.version, rows, p.through, chunkOut{chunk: rec})
}

// emit sends a chunk as one transaction of INSERTs at the current
// boundary, with the state after it on its EventCommit.
func (g *sourceSnapshot) emit(ti int, version *change.Table, rows chunkRows, through []string, out chunkOut) error {
	rec := out.chunk
	next := g.state.Clone()
	next.Chunks++
	// The later of the two points: they may be on two servers (a
	// failover between the reads), compared by GTID then.
	if !out.freshAt.IsZero() && (next.FreshAt.IsZero() || !reached(next.FreshAt, next.FreshMark, out.freshAt, out.freshMark)) {
		next.FreshAt, next.FreshMark = out.freshAt, out.freshMark
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
	if err := g.send(&begin); err != nil {
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
		if err := g.send(&ev); err != nil {
			return err
		}
	}
	commit := base
	commit.Type, commit.SnapshotState = change.EventCommit, next
	if err := g.send(&commit); err != nil {
		return err
	}
	g.state = next
	g.signal() // run may be waiting for the kept chunks to go out
	g.rows.Add(int64(n))
	g.publishStats()
	if next.Done {
		g.log.Info("snapshot done", "tables", len(next.Tables), "rows", g.rows.Load(), "took", g.d.cfg.Clock.Now().Sub(time.Unix(0, g.started.Load())).Round(time.Millisecond))
	}
	return nil
}
