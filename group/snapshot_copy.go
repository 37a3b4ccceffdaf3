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

// readChunk registers, selects and hands over the next chunk, then waits
// until it has been emitted (or dropped as stale); it reports whether the
// snapshot has more to read.
func (g *sourceSnapshot) readChunk(ctx context.Context, conn SnapshotConn) (bool, error) {
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
		p.window = g.recentOf(ti, g.d.cfg.Clock.Now())
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
