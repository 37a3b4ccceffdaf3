package group

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/spec"
)

// runCatchUps runs the queued re-reads of held rows, in order.
func (x *shardDDL) runCatchUps(ctx context.Context, emit func(*change.Event) error) error {
	for len(x.state.CatchUps) > 0 {
		if err := x.runCatchUp(ctx, emit); err != nil {
			return err
		}
		s := x.mut()
		s.CatchUps = s.CatchUps[1:]
		x.rebuild()
	}
	return nil
}

// rereader is one source's reader in a catch-up.
type rereader struct {
	k    int // index in the catch-up's Sources
	q    *sourceQueue
	head *change.Event
	key  int64
	done bool
	// last names the last boundary read (the re-read's start at first).
	last Mark
}

// runCatchUp re-reads the first queued catch-up from where it stands and
// emits its held rows, a transaction of the merge for each source
// transaction that has some, in merge-key order.
func (x *shardDDL) runCatchUp(ctx context.Context, emit func(*change.Event) error) error {
	d := x.d
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	arrived := make(chan struct{}, 1)
	cu := x.state.CatchUps[0]
	var rs []*rereader
	for k, cs := range cu.Sources {
		r := &rereader{k: k, done: reached(cs.Pos, cs.PosMark, cs.Until, cs.UntilMark) || len(cs.Tables) == 0, last: cs.PosMark}
		rs = append(rs, r)
		if r.done {
			continue
		}
		reader, err := x.catchUpReader(cs)
		if err != nil {
			return err
		}
		r.q = newSourceQueue(64, 1<<20, arrived)
		r.q.openUp() // the merge is well past its start
		wg.Go(func() {
			defer close(r.q.ch)
			r.q.err = reader.Run(cctx, func(ev *change.Event) error { return r.q.put(cctx, ev) })
		})
		d.log.Info("re-reading rows a shard DDL lock held", "source", d.cfg.Spec.Sources[cs.Source].Name,
			"from", cs.Pos.String(), "until", cs.Until.String(), "tables", len(cs.Tables))
	}
	for {
		var next *rereader
		for _, r := range rs {
			for !r.done && r.head == nil {
				if err := x.catchUpHead(ctx, r); err != nil {
					return err
				}
			}
			if r.done {
				continue
			}
			src := x.state.CatchUps[0].Sources[r.k].Source
			if next == nil || r.key < next.key || r.key == next.key && src < x.state.CatchUps[0].Sources[next.k].Source {
				next = r
			}
		}
		if next == nil {
			return nil
		}
		if err := x.catchUpTx(ctx, next, emit); err != nil {
			return err
		}
	}
}

// catchUpReader builds the reader of one catch-up source: its own server
// id, only the held tables, from cs.Pos with the schema as it was there.
func (x *shardDDL) catchUpReader(cs CatchUpSource) (Reader, error) {
	d := x.d
	src := d.cfg.Spec.Sources[cs.Source]
	src.ServerID = spec.DeriveServerID(d.cfg.Spec.Name, fmt.Sprintf("%s#%d#catchup", src.Name, src.ServerID))
	var patterns []string
	for t := range cs.Tables {
		patterns = append(patterns, regexp.QuoteMeta(t))
	}
	slices.Sort(patterns)
	filter, err := spec.CompileTableFilter(patterns)
	if err != nil {
		return nil, err
	}
	// By GTID when another server answers (a failover since the rows
	// were held): the reader checks who answers, as the merge's does.
	resume := &binlog.Resume{Pos: cs.Pos, GTIDs: cs.PosMark.GTIDs.String(), Server: cs.PosMark.Server}
	if snap := d.cursor.Sources[cs.Source].Schema; snap != nil {
		at := schema.SnapshotAt(*snap, cs.Pos)
		resume.Schema = &at
	}
	return d.cfg.Sources.Reader(binlog.Config{Destination: d.cfg.Spec.Name, Source: src, Tables: filter, Resume: resume,
		Heartbeat: time.Duration(d.cfg.Spec.Heartbeat), Logger: d.log.With("catchup", true), ReadAhead: 64, OnlineDDL: d.online})
}

// catchUpHead takes r's next event: a transaction becomes its head, what
// reaches the catch-up's end ends it, progress moves it on.
func (x *shardDDL) catchUpHead(ctx context.Context, r *rereader) error {
	var ev *change.Event
	select {
	case e, ok := <-r.q.ch:
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.q.err != nil {
				return r.q.err
			}
			return fmt.Errorf("group: the re-read of held rows stopped")
		}
		ev = r.q.took(e)
	case <-ctx.Done():
		return ctx.Err()
	}
	cs := &x.state.CatchUps[0].Sources[r.k]
	switch ev.Type {
	case change.EventHeartbeat:
		// Sent when the server has nothing more: all before ev.Pos came
		// (on another server than Until's, all the last boundary holds).
		r.done = reached(ev.Pos, r.last, cs.Until, cs.UntilMark)
	case change.EventProgress:
		r.last = markOf(ev)
		r.done = reached(ev.EndPos, r.last, cs.Until, cs.UntilMark)
	case change.EventBegin, change.EventDDL:
		if txFrom(ev, cs.Until, cs.UntilMark) {
			r.done = true
			return nil
		}
		r.head, r.key = ev, max(ev.CommitTime.UnixMicro(), cs.LastKey)
	}
	return nil
}

// catchUpTx emits r's head transaction: the rows of its held tables, as a
// transaction of the merge if it has any; a DDL of a held table goes to
// the state as the merge would have fed it.
func (x *shardDDL) catchUpTx(ctx context.Context, r *rereader, emit func(*change.Event) error) error {
	first := r.head
	r.head = nil
	s := x.mut()
	cs := &s.CatchUps[0].Sources[r.k]
	cs.LastKey = r.key
	if first.Type == change.EventDDL {
		cs.Pos, cs.PosMark = first.EndPos, markOf(first)
		r.last = cs.PosMark
		var out *change.Event
		if from, ok := cs.Tables[ddlTable(first)]; ok && txFrom(first, from, cs.TableMarks[ddlTable(first)]) {
			out = x.decideDDL(cs.Source, first, r.key, cs)
		}
		r.done = reached(cs.Pos, cs.PosMark, cs.Until, cs.UntilMark)
		if out != nil {
			return x.emitDDL(out, emit)
		}
		return nil
	}
	keep := func(ev *change.Event) bool {
		t := ev.Rows[0].Table
		name := t.Schema + "." + t.Name
		from, ok := cs.Tables[name]
		if !ok || !txFrom(first, from, cs.TableMarks[name]) {
			return false
		}
		if g := x.d.snaps[cs.Source]; g != nil {
			if ev.Rows = g.filterHeld(first, ev); len(ev.Rows) == 0 {
				return false
			}
		}
		x.pad(ev)
		return true
	}
	next := func() (*change.Event, error) {
		select {
		case e, ok := <-r.q.ch:
			if !ok {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, fmt.Errorf("group: the re-read of held rows stopped: %v", r.q.err)
			}
			return r.q.took(e), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return x.d.emitFiltered(first, next, keep, func(commit *change.Event) {
		cs.Pos, cs.PosMark = commit.Pos, markOf(commit)
		r.last = cs.PosMark
		r.done = reached(cs.Pos, cs.PosMark, cs.Until, cs.UntilMark)
	}, emit)
}

// emitFiltered emits the transaction starting with first, whose later
// events next returns, keeping only the rows events keep accepts; a
// transaction left with none is not emitted and takes no seq. committed
// runs before the commit is emitted (or instead, when nothing was).
func (d *Destination) emitFiltered(first *change.Event, next func() (*change.Event, error), keep func(*change.Event) bool,
	committed func(*change.Event), emit func(*change.Event) error) error {
	begun := false
	for {
		ev, err := next()
		if err != nil {
			return err
		}
		switch ev.Type {
		case change.EventRows:
			if !keep(ev) {
				continue
			}
			if !begun {
				begun = true
				d.cursor.Seq++
				first.Seq = d.cursor.Seq
				if err := emit(first); err != nil {
					return err
				}
			}
			ev.Seq = d.cursor.Seq
			d.stamp(ev)
			if err := emit(ev); err != nil {
				return err
			}
		case change.EventCommit:
			committed(ev)
			if !begun {
				return nil
			}
			ev.Seq = d.cursor.Seq
			return emit(ev)
		}
	}
}
