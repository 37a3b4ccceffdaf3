package group

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/braid-cdc/braid/engine/change"
)

// Placement records the point of the merged stream at which something
// went out whose point depends on when it came, not on the binlogs alone:
// one chunk of the initial snapshot, or a late transaction (Late). It is
// kept in the destination's placement log before it goes out, and a
// replay puts it at the same point again. The log is stored under the
// name of what it first held: the chunk log (FileKeeper, raftstore).
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
	// AtMark names At on any server of the source: a replay that reads
	// another server (a failover since) finds the chunk's point by GTID.
	AtMark Mark `json:"atMark,omitzero"`
	// Late marks not a chunk but a late transaction (see Merger.Offer):
	// source Source's transaction that begins At went out at point Taken,
	// below keys already out, and a replay emits it there again. Index
	// and Table are unset.
	Late bool `json:"late,omitempty"`
	// GTID is a late transaction's GTID, when its server logs one: a
	// replay finds it by its GTID, the same on every server of the
	// source, and by At (one server's file:pos) only without.
	GTID string `json:"gtid,omitempty"`
	// Lost marks neither a chunk nor a late transaction but a loss an
	// operator accepted (binlog.Reader.AcceptLoss): source Source's
	// reader goes on past it, now and in every later run that finds it
	// (binlog.Config.Accepted). Kept before the reader goes on; Time is
	// when it was accepted (0 in one kept before braid kept it), the
	// other fields are unset. The marker transaction that names it is
	// ordered by the source's last key (a late one's placement keeps it
	// where it went out when that is below keys out already).
	Lost *change.Loss `json:"lost,omitempty"`
	// MarkerSeq, in a placement with Lost, marks not the accept but
	// where the loss's LOST marker went out (lost.go, LostMarker): the
	// marker's seq, At and AtMark the source's boundary it follows (the
	// point the loss was found at), Cursor the merged stream's cursor
	// right before it (Taken its). Kept once, before it goes out, by the
	// live run that emits it first.
	MarkerSeq uint64  `json:"markerSeq,omitempty"`
	Cursor    *Cursor `json:"cursor,omitempty"`
}

// splitLate parts a placement log into the snapshot's chunks and the late
// transactions.
func splitLate(log []Placement) (chunks, lates []Placement) {
	for _, c := range log {
		if c.Lost != nil {
			continue // a loss accepted (lost.go)
		}
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
	// freshAt is a kept chunk's change.Event.FreshAt, freshMark names it
	// on any server of the source.
	freshAt   change.Position
	freshMark Mark
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
		if g.d.cfg.Keep != nil {
			placed, err := g.d.cfg.keptPlacements()
			if err != nil {
				return err
			}
			chunks, _ := splitLate(placed) // no late transaction or loss is a chunk
			var mine []Placement
			for _, c := range chunks {
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
		case <-g.d.cfg.Clock.After(50 * time.Millisecond):
		}
		g.mu.Lock()
	}
}

// dueChunk returns the source whose snapshot chunk goes out now, or -1,
// and whether nothing else may go now: a chunk kept before goes out at
// the point of the stream it went out at first (the merge waits for its
// source to bring it, and holds its source while it waits for its
// point), a new one at once, kept first with this point.
func (d *Destination) dueChunk(ctx context.Context, chunks []*chunkOut) (src int, wait bool, err error) {
	if d.keptNext >= len(d.kept) && d.cfg.ReplayOnly && slices.ContainsFunc(chunks, func(c *chunkOut) bool { return c != nil }) {
		// A replay reader learns the chunks its live run kept since it
		// started when one heads a queue (not on every turn: the merge's).
		placed, err := d.cfg.keptPlacements()
		if err != nil {
			return -1, false, err
		}
		chunks, _ := splitLate(placed)
		d.kept, d.keptNext = keptAfter(chunks, d.cursor.Taken), 0
	}
	if d.keptNext < len(d.kept) {
		if k := d.kept[d.keptNext]; k.Taken == d.cursor.Taken {
			if c := chunks[k.Source]; c == nil || !c.kept || c.chunk.Index != k.Index {
				return -1, true, nil // its source brings it next
			}
			d.keptNext++
			if d.keptNext == len(d.kept) {
				d.keptOutOnce.Do(func() { close(d.keptOut) })
			}
			d.merger.Hold(k.Source, false)
			return k.Source, false, nil
		}
	}
	for s, c := range chunks {
		if c == nil {
			continue
		}
		if c.kept {
			if c.chunk.Taken < d.cursor.Taken {
				return -1, false, fmt.Errorf("group: source %s: snapshot chunk %d of %s went out at point %d of the stream, which is past (%d): the chunk log does not match the cursor; delete the cursor and the chunk log to start over",
					d.cfg.Spec.Sources[s].Name, c.chunk.Index, c.chunk.Table, c.chunk.Taken, d.cursor.Taken)
			}
			d.merger.Hold(s, true) // its point is later
			continue
		}
		if d.reached != nil && d.cursor.Taken < d.reached.Taken {
			// The earlier run had not emitted it by the point it
			// reached: the others go there as they went then.
			d.reachedHeld[s] = true
			d.merger.Hold(s, true)
			continue
		}
		c.chunk.Taken = d.cursor.Taken
		if keep := d.cfg.Keep; keep != nil {
			if err := keep.KeepPlacement(ctx, c.chunk); err != nil {
				return -1, false, fmt.Errorf("group: source %s: keep snapshot chunk %d of %s: %w", d.cfg.Spec.Sources[s].Name, c.chunk.Index, c.chunk.Table, err)
			}
		}
		return s, false, nil
	}
	return -1, false, nil
}

// keepLate keeps source src's transaction beginning with first, whose key
// is below one that went out already (a source clock further behind than
// max_clock_skew, a transaction committed long after its events' time,
// or a heartbeat read late), before it goes out now: a replay emits it
// at this point again (dueLate), so its seq and the others' stay.
func (d *Destination) keepLate(ctx context.Context, src int, first *change.Event, key Key) error {
	rec := Placement{Source: src, At: first.Pos, GTID: first.GTID, Taken: d.cursor.Taken, Time: key.Time, Late: true}
	if first.Lost != "" {
		rec.GTID = lostGTID + first.Lost // a marker has no GTID: found by what it names
	}
	name := d.cfg.Spec.Sources[src].Name
	if keep := d.cfg.Keep; keep != nil {
		if err := keep.KeepPlacement(ctx, rec); err != nil {
			return fmt.Errorf("group: source %s: keep late transaction at %s: %w", name, first.Pos, err)
		}
	}
	if first.Lost != "" {
		d.log.Info("the marker of transactions lost in a failover goes out where its source continued, below keys out meanwhile; kept so that a replay gives it the same seq",
			"source", name, "lost", first.Lost, "taken", rec.Taken)
		return nil
	}
	d.log.Warn("a transaction came below the merged stream's order (late): it goes out now, out of order, kept so that a replay gives it the same seq; "+
		"a MariaDB transaction is ordered by its first statement's time (the one every server keeps), so one that ran longer than max_clock_skew comes late; if short ones do, raise max_clock_skew or check the source's clock",
		"source", name, "position", first.Pos.String(), "gtid", first.GTID, "commit", time.UnixMicro(key.Time).UTC(), "taken", rec.Taken)
	return nil
}

// keptLate reports whether ev, source s's next transaction, is a late
// transaction kept before (keepLate) that goes out later.
func (d *Destination) keptLate(s int, ev *change.Event, head []*change.Event) bool {
	if d.cfg.ReplayOnly && d.lateNext >= len(d.lates) && d.cfg.Clock.Now().Sub(d.latesRead) >= time.Second {
		d.reloadLates(head)
	}
	return d.isKeptLate(s, ev)
}

func (d *Destination) isKeptLate(s int, ev *change.Event) bool {
	for _, k := range d.lates[d.lateNext:] {
		if k.Source == s && k.isTx(ev) {
			return true
		}
	}
	return false
}

// reloadLates has a replay reader learn the late transactions its live
// run kept since, and hold as such those of them it offered to the
// merger already (it read them before the live run kept them: Withdraw).
func (d *Destination) reloadLates(head []*change.Event) {
	placed, err := d.cfg.keptPlacements()
	if err != nil {
		d.log.Warn("replay reader: cannot read its live run's late transactions", "err", err)
		return
	}
	_, lates := splitLate(placed)
	d.lates, d.lateNext, d.latesRead = keptAfter(lates, d.cursor.Taken), 0, d.cfg.Clock.Now()
	for s, ev := range head {
		if _, offered := d.merger.Offered(s); offered && ev != nil && d.isKeptLate(s, ev) {
			d.merger.Withdraw(s)
			d.lateHeld[s] = true
			d.merger.Hold(s, true)
		}
	}
}

// lostGTID prefixes the GTID field of a late marker of lost transactions
// (change.Event.Lost), which has no GTID of its own.
const lostGTID = "lost:"

// isTx reports whether ev begins late transaction k: the same GTID, or
// where either has none, the same position. A marker of lost
// transactions is the marker naming the same ones, and nothing else.
func (k Placement) isTx(ev *change.Event) bool {
	if marker := strings.HasPrefix(k.GTID, lostGTID); marker || ev.Lost != "" {
		return marker && k.GTID == lostGTID+ev.Lost
	}
	if k.GTID != "" && ev.GTID != "" {
		return k.GTID == ev.GTID
	}
	return k.At == ev.Pos
}

// dueLate returns the source whose kept late transaction goes out now, or
// -1, and whether nothing else may go now (wait, or the late transaction
// is due and its source has not brought it yet).
func (d *Destination) dueLate(head []*change.Event, wait bool) (src int, _ bool, err error) {
	if d.lateNext >= len(d.lates) {
		return -1, wait, nil
	}
	k := d.lates[d.lateNext]
	switch {
	case k.Taken < d.cursor.Taken:
		return -1, wait, fmt.Errorf("group: source %s: a late transaction at %s went out at point %d of the stream, which is past (%d): the chunk log does not match the cursor; delete the cursor and the chunk log to start over",
			d.cfg.Spec.Sources[k.Source].Name, k.At, k.Taken, d.cursor.Taken)
	case k.Taken > d.cursor.Taken || wait:
		return -1, wait, nil
	case !d.lateHeld[k.Source]:
		if head[k.Source] != nil {
			return -1, wait, fmt.Errorf("group: source %s: a late transaction at %s went out at point %d of the stream, but the source brings %s there: the chunk log does not match the binlog; delete the cursor and the chunk log to start over",
				d.cfg.Spec.Sources[k.Source].Name, k.At, k.Taken, head[k.Source].Pos)
		}
		return -1, true, nil // its source brings it next
	}
	d.lateNext++
	d.lateHeld[k.Source] = false
	d.merger.Hold(k.Source, false)
	d.offer(k.Source, head[k.Source])
	return k.Source, false, nil
}

// keptAfter returns the chunks kept that go out at or after point taken,
// in the order they go out.
func keptAfter(chunks []Placement, taken uint64) []Placement {
	var out []Placement
	for _, c := range chunks {
		if c.Taken >= taken {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Placement) int { return cmp.Compare(a.Taken, b.Taken) })
	return out
}
