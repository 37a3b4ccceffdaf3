package group

import (
	"context"
	"errors"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
)

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
		case <-g.d.cfg.Clock.After(100 * time.Millisecond):
		}
	}
	for _, out := range []chan struct{}{
		g.d.keptOut,    // the other sources' kept chunks too
		g.d.reachedOut, // the earlier run's point (Config.Reached)
	} {
		select {
		case <-out:
		case <-ctx.Done():
			return nil
		}
	}
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	case <-ctx.Done():
		return nil
	}
	var conn SnapshotConn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	g.started.Store(g.d.cfg.Clock.Now().UnixNano())
	g.rows.Store(0)
	lastLog := g.d.cfg.Clock.Now()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if conn == nil {
			c, err := g.d.cfg.Sources.Snapshot(ctx, g.d.cfg.Spec.Sources[g.src])
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				g.log.Warn("snapshot cannot connect; retrying", "err", err, "retry_in", backoff)
				if !g.sleep(ctx, backoff) {
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
			if !g.sleep(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if !more {
			return nil
		}
		if now := g.d.cfg.Clock.Now(); now.Sub(lastLog) >= snapshotProgressEvery {
			lastLog = now
			st := g.Stats()
			g.log.Info("snapshot progress", "tables_done", st.TablesDone, "tables", st.Tables, "rows", st.Rows,
				"rows_per_s", int64(st.RowsPerSecond), "eta", st.ETA.Round(time.Second))
		}
	}
	return nil
}

// sleep waits d on the destination's clock; false if ctx ended first.
func (g *sourceSnapshot) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-g.d.cfg.Clock.After(d):
		return true
	}
}

// estimate asks the server how many rows the tables left hold.
func (g *sourceSnapshot) estimate(conn SnapshotConn) {
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

// maxPendingChunks bounds how many chunks wait for the reader at once,
// besides the bytes they hold (see readChunk).
const maxPendingChunks = 64

// readChunk registers, selects and hands over the next chunk, first
// waiting for room among the pending ones; it reports whether the
// snapshot has more to read.
//
// A chunk goes out once the reader has passed its high watermark, and
// the reader is as far behind the server as the merge lets it be: in
// strict order a source's queue drains only as fast as the other sources
// show their later commit times, which MariaDB gives in whole seconds,
// so under steady writes a chunk can wait a second or two. The next
// chunks are therefore selected while the earlier ones wait (their key
// ranges follow on, and they go out in order), as long as the waiting
// ones hold less than Config.QueueBytes and number fewer than
// maxPendingChunks: read one at a time, a snapshot under a writer would
// go at a chunk a second.
func (g *sourceSnapshot) readChunk(ctx context.Context, conn SnapshotConn) (bool, error) {
	g.mu.Lock()
	ti, after, ok := g.nextChunk()
	for !ok {
		if g.state.Done {
			g.mu.Unlock()
			return false, nil
		}
		g.mu.Unlock()
		select {
		case <-g.changed:
		case <-ctx.Done():
			return false, nil
		}
		g.mu.Lock()
		ti, after, ok = g.nextChunk()
	}
	t := g.state.Tables[ti]
	version := g.versions[t.Name]
	p := &pendingChunk{table: ti, version: version}
	if version != nil {
		p.key = g.keyFor(version)
		if !p.key.ints && len(after) == 0 && t.Chunks == 0 {
			g.log.Warn("snapshot reads a table whose key is not made of integer columns in one piece: its rows are held in memory while it is read",
				"table", t.Name)
		}
	}
	if len(after) > 0 {
		p.after, _ = parseKey(after) // made by keyText: parses
	}
	// The window starts with the changes left out a moment before (see
	// leftRecently); a keyless chunk's keep their positions, to be told
	// from those its snapshot saw.
	p.window, p.windowAt = g.recentOf(ti, g.d.cfg.Clock.Now(), len(p.key.cols) == 0)
	g.pending = append(g.pending, p)
	g.mu.Unlock()

	var rows chunkRows
	var low change.Position
	var exact bool
	var err error
	limit := g.d.cfg.Spec.SnapshotChunkRows
	if version != nil {
		cols := p.key.cols
		if !p.key.ints {
			cols, limit = nil, 0
		}
		if len(p.key.cols) == 0 {
			// A keyless table's window cannot be applied again to rows
			// that have its changes already: its SELECT reads in a
			// consistent snapshot whose binlog position fold tells the
			// changes it saw by (see pendingChunk.low).
			if low, exact, err = conn.Begin(ctx); err == nil {
				rows.text, err = conn.Chunk(ctx, version, cols, after, nil, limit)
				if endErr := conn.End(); err == nil {
					err = endErr
				}
			}
			if err == nil && !exact && !g.warnedInexact {
				g.warnedInexact = true
				g.log.Warn("snapshot reads a table without a key on a server that does not tell its snapshot's binlog position (MySQL has no binlog_snapshot_position): identical rows changed while it is read may come out wrong in number",
					"table", t.Name)
			}
		} else {
			rows.text, err = conn.Chunk(ctx, version, cols, after, nil, limit)
		}
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
	if p.stale {
		g.mu.Unlock()
		return true, nil // dropped (see dropPending): read again
	}
	if err != nil {
		g.dropPending(len(g.pending) - 1) // p, the last
		g.mu.Unlock()
		return true, err
	}
	p.rows, p.low, p.exact, p.high, p.selected = rows, low, exact, high, true
	if n := rows.len(); version != nil && p.key.ints && limit > 0 && n == limit {
		k, _ := rowKey(p.key, rows.row(n-1))
		p.through, p.throughKey = keyText(k), k
	}
	g.mu.Unlock()
	// The reader may have passed its high watermark already: emit it
	// here, between two of the reader's events. If the reader is passing
	// one (a full queue may hold it there a long while), it emits it
	// before it lets pushMu go (see pass), and this goroutine reads on.
	if !g.pushMu.TryLock() {
		return true, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.pushMu.Unlock()
	if g.inTx {
		return true, nil // the reader emits it at the commit
	}
	return true, g.emitDue(ctx)
}

// nextChunk returns the table and the key after which the next chunk to
// read starts, following on from the last pending chunk, or false when
// none may be read now: the pending ones hold enough, the last of them
// has not been selected, or the last chunk of all is pending already.
func (g *sourceSnapshot) nextChunk() (ti int, after []string, ok bool) {
	if g.state.Done {
		return 0, nil, false
	}
	n := len(g.pending)
	if n == 0 {
		ti = g.state.Next()
		return ti, g.state.Tables[ti].After, true
	}
	last := g.pending[n-1]
	if !last.selected || n >= maxPendingChunks {
		return 0, nil, false
	}
	var held int64
	for _, p := range g.pending {
		if p.rows.text != nil {
			held += p.rows.text.Bytes()
		}
	}
	if held >= g.d.cfg.QueueBytes {
		return 0, nil, false
	}
	if last.through != nil {
		return last.table, last.through, true
	}
	if last.table+1 < len(g.state.Tables) {
		return last.table + 1, nil, true
	}
	return 0, nil, false
}
