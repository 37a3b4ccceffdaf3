package group

import (
	"math"
	"slices"
	"time"

	"github.com/braid-cdc/braid/engine/change"
)

// Stats is a snapshot of a destination's progress, for status pages.
type Stats struct {
	// Seq is the last transaction emitted.
	Seq uint64
	// Late counts transactions that came below a promised watermark;
	// Undercut those that came below their own source's (Merger.Undercut:
	// the late ones, and the near misses).
	Late, Undercut int
	Sources        []SourceStats
}

// SourceStats is one source's part of Stats.
type SourceStats struct {
	Name string
	// Pos is where the source resumes after the last transaction emitted.
	Pos change.Position
	// LastCommit is the commit time (made monotone) of its last transaction
	// offered; its lag is the time since.
	LastCommit time.Time
	// LastSeen is when its last event or heartbeat reached the merge.
	LastSeen time.Time
	// Waiting is set while strict order waits for this source.
	Waiting bool

	// The source's reader (binlog.Stats), read when Stats is called:
	// Connected while its binlog connection streams; LastError the error
	// that last ended or refused it (empty before the first), LastErrorAt
	// when, Errors how many there were.
	Connected   bool
	LastError   string
	LastErrorAt time.Time
	Errors      uint64
	// Idle: caught up, the source sending only heartbeats; Behind: the
	// server is known to hold binlog the reader has not read. Lag is 0
	// while idle, else the time since the newer of the last event's commit
	// and the last heartbeat (see binlog.Stats.Lag): an idle source does
	// not look like a dead one, and a down one's lag grows.
	Idle, Behind bool
	Lag          time.Duration
	// Events and Bytes count the binlog events and bytes read, Rows the
	// row changes of selected tables.
	Events, Bytes, Rows uint64
	// ReadPos is how far the reader has read (ahead of Pos by what waits
	// in its queue and the merge); ServerPos the server's end of binlog as
	// last learnt.
	ReadPos, ServerPos change.Position
	// GTIDs is the source's GTID state at Pos (MariaDB: the last GTID of
	// each domain; "" when unknown). Server is the server the reader
	// reads (or last read); Switches counts the times it resumed on
	// another server since the destination started here, LastSwitchAt
	// the last.
	GTIDs        string
	Server       *change.Server
	Switches     uint64
	LastSwitchAt time.Time
	// Lost names the GTIDs the stream has that the server answering, a
	// writable (promoted) one, lacks, while the reader waits for them
	// (binlog.Stats.Lost); "" otherwise.
	Lost string
	// Accepted are the losses an operator accepted for the source
	// (AcceptLost), kept with the destination, oldest first.
	Accepted []AcceptedLoss
	// Snapshot is the source's initial-snapshot progress; nil without
	// one (spec snapshot: never).
	Snapshot *SnapshotStats
}

// Stats returns the destination's progress: the merge's, refreshed at
// most every 100 ms and whenever it waits, and each source's reader's,
// read now. Safe for concurrent use.
func (d *Destination) Stats() Stats {
	d.statsMu.Lock()
	st := d.stats
	st.Sources = append([]SourceStats(nil), st.Sources...)
	if len(st.Sources) != len(d.readers) { // before the merge's first publish
		st.Sources = make([]SourceStats, len(d.readers))
		for i, src := range d.cfg.Spec.Sources {
			st.Sources[i].Name = src.Name
		}
	}
	for i := range st.Sources {
		st.Sources[i].Accepted = slices.Clone(d.accepted[i])
	}
	d.statsMu.Unlock()
	now := d.cfg.Clock.Now()
	for i, p := range d.readers {
		rs, ss := p.Stats(), &st.Sources[i]
		ss.Connected, ss.LastError, ss.LastErrorAt, ss.Errors = rs.Connected, rs.LastError, rs.LastErrorAt, rs.Errors
		ss.Lag, ss.Idle, ss.Behind = rs.Lag(now)
		ss.Events, ss.Bytes, ss.Rows = rs.Events, rs.Bytes, rs.Rows
		ss.ReadPos, ss.ServerPos = rs.ReadPos, rs.ServerPos
		ss.Server, ss.Switches, ss.LastSwitchAt, ss.Lost = rs.Server, rs.Switches, rs.LastSwitchAt, rs.Lost
		if g := d.snaps[i]; g != nil {
			sn := g.Stats()
			ss.Snapshot = &sn
		} else if snapshotOn(d.cfg.Spec) {
			ss.Snapshot = &SnapshotStats{Done: true} // done before this run
		}
	}
	return st
}

// publish refreshes Stats; the merge loop calls it.
func (d *Destination) publish(force bool) {
	now := d.cfg.Clock.Now()
	if !force && now.Sub(d.published) < 100*time.Millisecond {
		return
	}
	d.published = now
	st := Stats{Seq: d.cursor.Seq, Late: d.merger.Late(), Undercut: d.merger.Undercut(), Sources: make([]SourceStats, len(d.cursor.Sources))}
	for i, sc := range d.cursor.Sources {
		st.Sources[i] = SourceStats{Name: sc.Name, Pos: sc.Pos, GTIDs: sc.GTIDs.String(), LastSeen: d.lastSeen[i]}
		if last := d.merger.Last(i); last > math.MinInt64 {
			st.Sources[i].LastCommit = time.UnixMicro(last)
		}
	}
	for _, w := range d.merger.Waiting() {
		st.Sources[w].Waiting = true
	}
	d.statsMu.Lock()
	d.stats = st
	d.statsMu.Unlock()
}

// Late counts transactions that came below a watermark already promised
// (their source's clock ran behind braid's by more than max_clock_skew):
// they went out at once, out of order.
func (d *Destination) Late() int { return d.merger.Late() }
