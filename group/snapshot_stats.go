package group

import "time"

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

// Stats returns the source's snapshot progress.
func (g *sourceSnapshot) Stats() SnapshotStats {
	st := g.stats.Load()
	if st == nil {
		return SnapshotStats{}
	}
	out := *st
	out.Rows = g.rows.Load()
	out.EstimatedRows = g.estimated.Load()
	if el := g.d.cfg.Clock.Now().Sub(time.Unix(0, g.started.Load())).Seconds(); el > 0 && !out.Done {
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
