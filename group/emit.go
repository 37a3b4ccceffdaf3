package group

import (
	"context"
	"strings"

	"github.com/braid-cdc/braid/engine/change"
)

// emitTx emits source src's offered transaction whole, starting with first.
// The cursor moves past the transaction before its last event (the
// EventCommit or the EventDDL) is emitted, so Cursor, called from emit
// then, is the boundary after it.
func (d *Destination) emitTx(ctx context.Context, src int, first *change.Event, q *sourceQueue, emit func(*change.Event) error) error {
	if d.ddl != nil {
		switch {
		case first.Type == change.EventDDL:
			return d.ddl.onDDL(ctx, src, first, emit)
		case d.ddl.filtering(src) && first.Lost == "": // a marker has no rows to hold
			d.take(src)
			return d.emitFiltering(ctx, src, first, q, emit)
		}
	}
	var before *Cursor // a marker's: the cursor right before it
	if first.Lost != "" {
		before = d.Cursor()
	}
	d.take(src)
	d.cursor.Seq++
	seq := d.cursor.Seq
	sc := &d.cursor.Sources[src]
	sc.LastKey = d.merger.Last(src)
	first.Seq = seq
	d.stamp(first)
	if first.Lost != "" {
		if err := d.keepMarker(ctx, src, first.Lost, seq, before); err != nil {
			return err
		}
		d.markerOut(src, first.Lost, seq)
	}
	if first.Type == change.EventDDL {
		sc.at(first.EndPos, first)
		if first.Schema != nil {
			sc.Schema = first.Schema
		}
		if err := emit(first); err != nil {
			return err
		}
		d.merger.Done(src)
		return nil
	}
	if err := emit(first); err != nil {
		return err
	}
	for {
		var ev *change.Event
		select {
		case e, ok := <-q.ch:
			if !ok {
				return d.sourceEnded(ctx, src, q)
			}
			ev = q.took(e)
		case <-ctx.Done():
			return ctx.Err()
		}
		if ev.Type == change.EventHeartbeat {
			continue // cannot come inside a transaction; harmless
		}
		ev.Seq = seq
		d.stamp(ev)
		if ev.Lost != "" {
			ev.CommitTime = first.CommitTime // the marker's, set by offer
		}
		if ev.Type == change.EventCommit {
			sc.at(ev.Pos, ev)
			if ev.SnapshotState != nil {
				sc.Snapshot = ev.SnapshotState
			}
		}
		if err := emit(ev); err != nil {
			return err
		}
		if ev.Type == change.EventCommit {
			d.done(src, first)
			return nil
		}
	}
}

// emitFiltering is emitTx for a source some of whose tables a shard-DDL
// lock holds, or while an optimistic view is open: held rows are left out
// (the catch-up reads them again), a transaction left with none is not
// emitted, and the others go out with their logical table's view.
func (d *Destination) emitFiltering(ctx context.Context, src int, first *change.Event, q *sourceQueue, emit func(*change.Event) error) error {
	sc := &d.cursor.Sources[src]
	sc.LastKey = d.merger.Last(src)
	next := func() (*change.Event, error) {
		select {
		case e, ok := <-q.ch:
			if !ok {
				return nil, d.sourceEnded(ctx, src, q)
			}
			return q.took(e), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	keep := func(ev *change.Event) bool {
		t := ev.Rows[0].Table
		// Held rows are read again from the binlog once the lock goes; a
		// snapshot's are not there, so they go out now, shown with the
		// logical table's columns (pad).
		if l := d.ddl.heldLock(src, t.Schema, t.Name); l != nil && !ev.Snapshot {
			d.ddl.countHeld(l, len(ev.Rows))
			return false
		}
		d.ddl.pad(ev)
		return true
	}
	commit := func(c *change.Event) {
		sc.at(c.Pos, c)
		if c.SnapshotState != nil {
			sc.Snapshot = c.SnapshotState
		}
	}
	if err := d.emitFiltered(first, next, keep, commit, emit); err != nil {
		return err
	}
	d.done(src, first)
	return nil
}

// done tells the merger that source src's offered transaction, which
// began with first, went out; a snapshot chunk was not offered.
func (d *Destination) done(src int, first *change.Event) {
	if !first.Snapshot {
		d.merger.Done(src)
	}
}

// stamp gives a rows event's table version its logical names, or a DDL
// its, so that every consumer reads them from the event instead of
// asking the router (which caches, and so belongs to the merge loop).
//
// A rows event's version goes out as the merge's own copy of it,
// stamped (stamps): the version itself belongs to the reader that built
// it, whose schema model keeps it and reads every field of it on the
// reader's goroutine (it compares each DDL's result with it), so the
// merge never writes to it. The rows' Table becomes the copy, the same
// one for every event of the version; rows that carry a copy already (an
// event stamped before) are left as they are.
func (d *Destination) stamp(ev *change.Event) {
	switch {
	case len(ev.Rows) > 0:
		t := ev.Rows[0].Table
		if t.LogicalName != "" {
			return // the merge's copy: stamped when it went out before
		}
		c := d.stamps.of(t, d.router)
		for i := range ev.Rows {
			if ev.Rows[i].Table == t {
				ev.Rows[i].Table = c
			}
		}
	case ev.DDL != nil:
		ev.DDL.LogicalSchema, ev.DDL.LogicalTable = d.router.Rename(ev.DDL.Origin())
		if ev.DDL.LogicalTables != nil {
			break // a logical DDL of the shard-DDL merge: named already
		}
		ev.DDL.LogicalTables = make([]string, len(ev.DDL.Tables))
		for i, t := range ev.DDL.Tables {
			s, n, _ := strings.Cut(t, ".")
			ls, lt := d.router.Rename(s, n)
			ev.DDL.LogicalTables[i] = ls + "." + lt
		}
	}
}

// stampsKept is how many versions a generation of stamps holds.
const stampsKept = 4096

// stamps are the merge loop's stamped copies of table versions (see
// Destination.stamp), by the version a reader handed out. The last one
// used answers most events (rows of one table come in runs). The copies
// are kept in two generations: a version found in the older one moves to
// the current one, and when the current one is full the older one goes,
// with the versions no event carried for a generation (replaced by a
// DDL, a finished catch-up's). One used again then gets a new copy,
// named alike.
type stamps struct {
	lastOf, last *change.Table
	cur, old     map[*change.Table]*change.Table
}

// of returns the stamped copy of version t.
func (s *stamps) of(t *change.Table, r *Router) *change.Table {
	if t == s.lastOf {
		return s.last
	}
	c, ok := s.cur[t]
	if !ok {
		if c, ok = s.old[t]; !ok {
			// A shallow copy: the reader's version and the copy
			// share Columns and Unique, which neither writes.
			v := *t
			v.LogicalSchema, v.LogicalName = r.Rename(t.Schema, t.Name)
			c = &v
		}
		if len(s.cur) >= stampsKept {
			s.old, s.cur = s.cur, nil
		}
		if s.cur == nil {
			s.cur = map[*change.Table]*change.Table{}
		}
		s.cur[t] = c
	}
	s.lastOf, s.last = t, c
	return c
}
