package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/spec"
)

// The merge's side of shard DDL (spec shard_ddl): it feeds each DDL of a
// selected table to ShardDDLState in merged order, emits the logical DDL
// the state lets out, skips the rows of held shard tables and, when a
// lock releases, re-reads those rows from the binlog (a catch-up) and
// emits them right after the DDL that released them, in their merge
// order. Held rows are never buffered: a lock costs the catch-up's
// reader, not memory.

// DecisionAction is what an operator decides about a shard-DDL lock.
type DecisionAction string

// The decisions an operator can make about a lock.
const (
	// DecisionUnlock emits the lock's DDL now and releases its rows.
	DecisionUnlock DecisionAction = "unlock"
	// DecisionSkip emits nothing and releases its rows, which then go out
	// under the schema each shard table has.
	DecisionSkip DecisionAction = "skip"
)

// Valid reports whether a is one of the decisions.
func (a DecisionAction) Valid() bool { return a == DecisionUnlock || a == DecisionSkip }

// DDLDecision is an operator's decision about a lock, with the point of
// the stream it applied at: after Taken source transactions (Cursor.Taken;
// seq alone does not name a point, as transactions whose rows are all
// held take none), when the last seq out was AfterSeq. Kept (in Raft, or
// beside capture's cursor) so that a replay or a new owner applies it at
// the same point.
type DDLDecision struct {
	Lock     int            `json:"lock"`
	Action   DecisionAction `json:"action"`
	AfterSeq uint64         `json:"afterSeq"`
	Taken    uint64         `json:"taken"`
}

// ErrNoLock: a decision names a lock that is not open.
var ErrNoLock = errors.New("no such lock")

type heldKey struct {
	src   int
	table string // "schema.table"
}

type decideReq struct {
	lock   int
	action DecisionAction
	reply  chan error
}

// shardDDL is a Destination's shard-DDL merge; nil in passthrough mode.
// Its methods run on the merge loop, but for View and Decide.
type shardDDL struct {
	d      *Destination
	state  *ShardDDLState
	shared bool // a cursor holds state: change a clone
	view   atomic.Pointer[ShardDDLState]
	held   map[heldKey]*DDLLock
	// heldBySource counts the holds per source, for the fast path.
	heldBySource []int
	srcIndex     map[string]int
	optimistic   bool // shard_ddl: optimistic
	// views caches, per table version, the table its rows go out as
	// while an optimistic entry of its logical table is open (nil: as
	// they are); emptied when the state changes.
	views     map[*change.Table]*change.Table
	decisions []DDLDecision // known ones not applied yet, in order
	decide    chan decideReq
	warned    map[int]time.Time // lock → when its last warning went out
	published time.Time         // when the state was last published
	dirty     bool              // a held-row count changed since
}

func newShardDDL(d *Destination, resume *ShardDDLState, decisions []DDLDecision) *shardDDL {
	n := len(d.cfg.Spec.Sources)
	x := &shardDDL{d: d, srcIndex: map[string]int{}, decide: make(chan decideReq), warned: map[int]time.Time{},
		optimistic: d.cfg.Spec.ShardDDL == spec.ShardDDLOptimistic}
	for i, src := range d.cfg.Spec.Sources {
		x.srcIndex[src.Name] = i
	}
	if resume != nil {
		x.state = resume.clone()
		if len(x.state.Announced) != n {
			x.state.Announced = make([]bool, n)
		}
	} else {
		x.state = NewShardDDLState(n)
	}
	x.decisions = slices.Clone(decisions)
	x.rebuild()
	return x
}

// mut returns the state to change (a clone if a cursor holds it).
func (x *shardDDL) mut() *ShardDDLState {
	if x.shared {
		x.state = x.state.clone()
		x.shared = false
		x.d.cursor.ShardDDL = x.state
	}
	return x.state
}

// publish lets readers (View, ShardDDL) see the state; from then on it is
// theirs too, and changes go to a clone.
func (x *shardDDL) publish() {
	x.view.Store(x.state)
	x.published = x.d.cfg.Clock.Now()
	x.shared, x.dirty = true, false
}

// rebuild refreshes what follows from the state (the held tables, the
// cursor's state) and publishes it.
func (x *shardDDL) rebuild() {
	x.held = map[heldKey]*DDLLock{}
	x.heldBySource = make([]int, len(x.d.cfg.Spec.Sources))
	for _, l := range x.state.Locks {
		for _, h := range l.Holds {
			src, table := splitShard(h.Shard)
			if i, ok := x.srcIndex[src]; ok {
				x.held[heldKey{i, table}] = l
				x.heldBySource[i]++
			}
		}
	}
	x.views = nil
	x.d.cursor.ShardDDL = x.state
	x.publish()
}

// filtering reports whether source src's rows need looking at one by one:
// some of its tables are held, or an optimistic view is open.
func (x *shardDDL) filtering(src int) bool {
	return x.heldBySource[src] > 0 || len(x.state.Views) > 0
}

// pad shows ev's rows with their logical table's view, when one is open
// and their columns differ from it.
func (x *shardDDL) pad(ev *change.Event) {
	if len(x.state.Views) == 0 {
		return
	}
	t := ev.Rows[0].Table
	vt, ok := x.views[t]
	if !ok {
		if cols := x.state.Views[x.logical(t.FullName())]; cols != nil && columnsSignature(cols) != columnsSignature(t.Columns) {
			vt = &change.Table{Schema: t.Schema, Name: t.Name, Columns: cols, Charset: t.Charset}
		}
		if x.views == nil {
			x.views = map[*change.Table]*change.Table{}
		}
		x.views[t] = vt
	}
	if vt == nil {
		return
	}
	for i := range ev.Rows {
		ev.Rows[i] = ev.Rows[i].WithView(vt)
	}
}

// cursorTaken marks the state as held by a cursor.
func (x *shardDDL) cursorTaken() { x.shared = true }

// heldLock returns the lock holding source src's table, or nil.
func (x *shardDDL) heldLock(src int, schemaName, table string) *DDLLock {
	if x.heldBySource[src] == 0 {
		return nil
	}
	return x.held[heldKey{src, schemaName + "." + table}]
}

// announce counts source src's tables at its start (once per state).
func (x *shardDDL) announce(src int, tables []string) {
	if x.state.Announced[src] {
		return
	}
	s := x.mut()
	s.Announced[src] = true
	name := x.d.cfg.Spec.Sources[src].Name
	for _, t := range tables {
		s.Join(x.logical(t), ShardName(name, t))
	}
	x.rebuild()
}

// logical returns the logical "schema.table" of "schema.table".
func (x *shardDDL) logical(table string) string {
	sn, tn, _ := strings.Cut(table, ".")
	ls, lt := x.d.router.Rename(sn, tn)
	return ls + "." + lt
}

// onDDL handles a DDL transaction of source src, offered and next in the
// merge: the cursor moves past it, what the state lets out is emitted
// (with a seq), and released rows are re-read.
func (x *shardDDL) onDDL(ctx context.Context, src int, ev *change.Event, emit func(*change.Event) error) error {
	d := x.d
	d.take(src)
	sc := &d.cursor.Sources[src]
	sc.LastKey = d.merger.Last(src)
	sc.at(ev.EndPos, ev)
	if ev.Schema != nil {
		sc.Schema = ev.Schema
	}
	out := x.decideDDL(src, ev, d.merger.Last(src), nil)
	d.merger.Done(src)
	if out != nil {
		if err := x.emitDDL(out, emit); err != nil {
			return err
		}
	}
	return x.runCatchUps(ctx, emit)
}

// emitDDL emits one DDL transaction with the next seq.
func (x *shardDDL) emitDDL(ev *change.Event, emit func(*change.Event) error) error {
	x.d.cursor.Seq++
	ev.Seq = x.d.cursor.Seq
	x.d.stamp(ev)
	return emit(ev)
}

// decideDDL feeds a DDL of source src, with merge key key, to the state
// and returns the event to emit, if any. cu is the catch-up source being
// re-read when the DDL comes from one (its held tables change), else nil.
func (x *shardDDL) decideDDL(src int, ev *change.Event, key int64, cu *CatchUpSource) *change.Event {
	d := x.d
	if cu == nil {
		for _, t := range ev.DDL.Tables {
			sn, tn, _ := strings.Cut(t, ".")
			if x.heldLock(src, sn, tn) != nil {
				return nil // part of the held rows: the catch-up reads it
			}
		}
	}
	if out, ok := x.renameDDL(src, ev); ok {
		return out
	}
	if _, truncate := schema.TruncatedTable(ev.DDL.Schema, ev.DDL.SQL, schema.SQLMode(ev.DDL.SQLMode)); truncate || len(ev.DDL.Tables) != 1 {
		return ev // no schema change, or several tables: as it is
	}
	lds, err := schema.ShardDDL(ev.DDL.Schema, ev.DDL.SQL, schema.SQLMode(ev.DDL.SQLMode), d.router.Rename)
	if err != nil || len(lds) != 1 {
		d.log.Warn("shard DDL not merged: it goes out as the shard ran it", "source", ev.Source, "pos", ev.Pos.String(), "sql", ev.DDL.SQL, "err", err)
		return ev
	}
	ld := lds[0]
	table := ev.DDL.Tables[0]
	logical := x.logical(table)
	shard := ShardName(d.cfg.Spec.Sources[src].Name, table)
	s := x.mut()
	defer x.rebuild()
	var v DDLVerdict
	var l *DDLLock
	sig := TableSignature(ev.Schema, table)
	if sig == "" {
		sig = ld.Key // no schema model to compare: the statements then
	}
	decided := false
	if x.optimistic && ld.Kind == schema.DDLAlter {
		if l = s.OptimisticConflict(logical, shard, ld, ev.CommitTime); l != nil {
			v, decided = DDLConflict, true
		} else if (ld.AddsColumns || ld.DropsColumns) && !s.Held(logical, shard) {
			v, l := s.Optimistic(logical, shard, ld, ev.CommitTime)
			return x.optimisticVerdict(s, v, l, ev, ld, table, logical, sig)
		}
	}
	switch {
	case decided:
	case ld.Kind == schema.DDLCreate:
		v, l = s.Create(logical, shard, ld, sig, ev.CommitTime)
	case ld.Kind == schema.DDLDrop:
		v, l = s.Drop(logical, shard)
	default:
		v, l = s.Alter(logical, shard, ld, ev.CommitTime)
	}
	switch v {
	case DDLEmit:
		s.Altered(logical, sig)
		if logical == table {
			return ev // a table no route renames: as the source ran it
		}
		return logicalDDL(ev, ld.Text, uint64(ld.SQLMode), logical)
	case DDLHold, DDLConflict:
		l.Holds = append(l.Holds, Hold{Shard: shard, From: ev.EndPos, LastKey: key, FromMark: markOf(ev)})
		if cu != nil {
			delete(cu.Tables, table)
			delete(cu.TableMarks, table)
		}
		if v == DDLConflict {
			d.log.Warn("shard DDL conflicts with the lock's: the shard table's rows wait until `braid ddl skip` or `braid ddl unlock` decides",
				"lock", l.ID, "table", logical, "shard", shard, "sql", ev.DDL.SQL, "lock_sql", l.SQL)
		} else {
			d.log.Info("shard DDL lock holds a shard table's rows until every shard table runs it", "lock", l.ID, "table", logical,
				"shard", shard, "done", len(l.Done), "waiting", l.Waiting)
		}
		return nil
	case DDLRelease:
		if ld.Kind != schema.DDLDrop {
			s.Altered(logical, sig)
		}
		x.release(s, l)
		d.log.Info("shard DDL lock released: its DDL goes out, then the rows it held", "lock", l.ID, "table", logical, "shards", len(l.Done))
		return logicalDDL(ev, l.SQL, l.SQLMode, logical)
	}
	return nil // DDLSkip
}

// optimisticVerdict carries out ShardDDLState.Optimistic's verdict v,
// keeping the logical table's view: the columns its rows go out with
// while the shard tables differ (ADDs that went out are in it at once,
// DROPs leave it at the last shard table), gone once no optimistic entry
// of the table is open.
func (x *shardDDL) optimisticVerdict(s *ShardDDLState, v DDLVerdict, l *DDLLock, ev *change.Event, ld schema.LogicalDDL, table, logical, sig string) *change.Event {
	view := func() []change.Column {
		if cols := s.Views[logical]; cols != nil {
			return cols
		}
		return TableColumns(ev.Schema, table, 1) // the shard's columns before this DDL
	}
	setView := func(cols []change.Column) {
		if s.Views == nil {
			s.Views = map[string][]change.Column{}
		}
		s.Views[logical] = cols
	}
	defer func() {
		if s.find(logical, true) == nil {
			delete(s.Views, logical) // every shard table has the same columns again
		}
	}()
	switch v {
	case DDLEmit: // an ADD at the first shard table
		if l != nil {
			setView(withColumns(view(), TableColumns(ev.Schema, table, 0)))
			x.d.log.Info("shard DDL out at the first shard table (optimistic): the others' rows read the new columns as NULL until they run it",
				"table", logical, "shard", l.Done[0], "waiting", len(l.Waiting))
		}
		s.Altered(logical, sig)
		if logical == table {
			return ev
		}
		return logicalDDL(ev, ld.Text, uint64(ld.SQLMode), logical)
	case DDLHold: // a DROP, waiting for the last shard table
		if len(l.Done) == 1 {
			setView(view()) // the columns stay, NULL in the rows of those that dropped them
		}
		return nil
	case DDLRelease: // the last shard table's DROP
		setView(slices.DeleteFunc(slices.Clone(view()), func(c change.Column) bool { return slices.Contains(l.Columns, strings.ToLower(c.Name)) }))
		s.Altered(logical, sig)
		return logicalDDL(ev, l.SQL, l.SQLMode, logical)
	}
	return nil
}

// withColumns is view with the columns of cols it lacks (by name), each
// after the column it follows in cols.
func withColumns(view, cols []change.Column) []change.Column {
	out := slices.Clone(view)
	has := func(name string) int {
		return slices.IndexFunc(out, func(c change.Column) bool { return strings.EqualFold(c.Name, name) })
	}
	for i, c := range cols {
		if has(c.Name) >= 0 {
			continue
		}
		at := 0
		if i > 0 {
			at = has(cols[i-1].Name) + 1
		}
		out = slices.Insert(out, at, c)
	}
	return out
}

// release queues the re-read of l's held rows (l is out of s's locks).
func (x *shardDDL) release(s *ShardDDLState, l *DDLLock) {
	var cu CatchUp
	for _, h := range l.Holds {
		name, table := splitShard(h.Shard)
		i, ok := x.srcIndex[name]
		if !ok {
			continue
		}
		k := slices.IndexFunc(cu.Sources, func(c CatchUpSource) bool { return c.Source == i })
		if k < 0 {
			sc := &x.d.cursor.Sources[i]
			cu.Sources = append(cu.Sources, CatchUpSource{Source: i, Pos: h.From, PosMark: h.FromMark, LastKey: h.LastKey,
				Until: sc.Pos, UntilMark: sc.Mark,
				Tables: map[string]change.Position{}, TableMarks: map[string]Mark{}})
			k = len(cu.Sources) - 1
		}
		c := &cu.Sources[k]
		if !reached(h.From, h.FromMark, c.Pos, c.PosMark) {
			c.Pos, c.PosMark, c.LastKey = h.From, h.FromMark, h.LastKey
		}
		c.Tables[table], c.TableMarks[table] = h.From, h.FromMark
	}
	slices.SortFunc(cu.Sources, func(a, b CatchUpSource) int { return a.Source - b.Source })
	if len(cu.Sources) > 0 {
		s.CatchUps = append(s.CatchUps, &cu)
	}
	delete(x.warned, l.ID)
}

// ddlTable is the one table a DDL event changes, "" when it changes
// several.
func ddlTable(ev *change.Event) string {
	if len(ev.DDL.Tables) != 1 {
		return ""
	}
	return ev.DDL.Tables[0]
}

// logicalDDL is ev as its logical table's DDL, with text sql, which
// means what it says under sql_mode mode.
func logicalDDL(ev *change.Event, sql string, mode uint64, logical string) *change.Event {
	out := *ev
	ls, lt, _ := strings.Cut(logical, ".")
	out.DDL = &change.DDL{Schema: ls, SQL: sql, SQLMode: mode, Tables: []string{logical}, LogicalSchema: ls, LogicalTable: lt,
		LogicalTables: []string{logical}}
	return &out
}

// countHeld adds n held row changes to l.
// The count readers see is refreshed at most every 100 ms: publishing
// costs the next change a clone of the state.
func (x *shardDDL) countHeld(l *DDLLock, n int) {
	if l = x.mut().Lock(l.ID); l == nil {
		return
	}
	l.HeldRows += int64(n)
	x.dirty = true
	if x.d.cfg.Clock.Now().Sub(x.published) >= 100*time.Millisecond {
		x.publish()
	}
}

// flush publishes a count not yet published; the merge calls it before
// it waits.
func (x *shardDDL) flush() {
	if x.dirty {
		x.publish()
	}
}

// boundary runs between transactions of the merge: it applies the
// decisions due here (kept ones whose point this is, and new ones asked
// for now) and warns of old locks.
func (x *shardDDL) boundary(ctx context.Context, emit func(*change.Event) error) error {
	for len(x.decisions) > 0 && x.decisions[0].Taken <= x.d.cursor.Taken {
		dec := x.decisions[0]
		x.decisions = x.decisions[1:]
		if dec.Taken < x.d.cursor.Taken {
			continue // before our start: the cursor has it
		}
		if err := x.apply(ctx, dec, emit); err != nil && !errors.Is(err, ErrNoLock) {
			return err
		}
	}
	select {
	case req := <-x.decide:
		return x.decideNow(ctx, req, emit)
	default:
	}
	return nil
}

// decideNow records an operator's decision at this point and applies
// it; the reply goes to the caller. A decision whose keeping failed may
// still be kept (a write whose outcome is unknown), so the merge stops
// then (the error returned): whoever runs it next reads what was kept.
func (x *shardDDL) decideNow(ctx context.Context, req decideReq, emit func(*change.Event) error) error {
	name := x.d.cfg.Spec.Name
	switch {
	case len(x.decisions) > 0:
		req.reply <- fmt.Errorf("group: destination %s is still replaying to where an earlier decision applied: try again in a moment", name)
		return nil
	case x.state.Lock(req.lock) == nil:
		req.reply <- fmt.Errorf("%w %d on destination %s: `braid ddl list %s` shows the open ones", ErrNoLock, req.lock, name, name)
		return nil
	}
	dec := DDLDecision{Lock: req.lock, Action: req.action, AfterSeq: x.d.cursor.Seq, Taken: x.d.cursor.Taken}
	if keep := x.d.cfg.Keep; keep != nil {
		if err := keep.KeepDecision(ctx, dec); err != nil {
			err = fmt.Errorf("group: keep the decision about lock %d of %s: %w", req.lock, name, err)
			req.reply <- err
			return err
		}
	}
	err := x.apply(ctx, dec, emit)
	req.reply <- err
	return err
}

// apply carries out a decision: the lock goes, its DDL goes out (unlock)
// or not (skip), and its rows are re-read.
func (x *shardDDL) apply(ctx context.Context, dec DDLDecision, emit func(*change.Event) error) error {
	l := x.state.Lock(dec.Lock)
	if l == nil {
		return ErrNoLock
	}
	s := x.mut()
	l = s.Lock(dec.Lock)
	s.removeLock(l)
	x.release(s, l)
	x.rebuild()
	x.d.log.Info("shard DDL lock decided", "lock", l.ID, "table", l.Logical, "action", dec.Action, "after_seq", dec.AfterSeq)
	if dec.Action == DecisionUnlock {
		first := x.d.cfg.Spec.Sources[0].Name
		if len(l.Done) > 0 {
			first, _ = splitShard(l.Done[0])
		}
		i := x.srcIndex[first]
		pos := x.d.cursor.Sources[i].Pos
		ev := logicalDDL(&change.Event{Type: change.EventDDL, Source: first, Pos: pos, EndPos: pos, CommitTime: l.Since}, l.SQL, l.SQLMode, l.Logical)
		if err := x.emitDDL(ev, emit); err != nil {
			return err
		}
	}
	return x.runCatchUps(ctx, emit)
}

// warnOld logs each lock older than the spec's ddl_lock_warn_after, again
// each time that long has passed.
func (x *shardDDL) warnOld(now time.Time) {
	after := time.Duration(x.d.cfg.Spec.DDLLockWarnAfter)
	if after <= 0 {
		after = spec.DefaultDDLLockWarnAfter
	}
	for _, l := range x.state.Locks {
		if now.Sub(l.Since) < after || now.Sub(x.warned[l.ID]) < after {
			continue
		}
		x.warned[l.ID] = now
		x.d.log.Warn("a shard DDL lock is old: the shard tables waiting have not run its DDL; run it there, or decide with `braid ddl unlock` or `braid ddl skip`",
			"lock", l.ID, "table", l.Logical, "sql", l.SQL, "since", l.Since.UTC().Format(time.RFC3339), "waiting", l.Waiting,
			"conflicts", len(l.Conflicts), "held_rows", l.HeldRows)
	}
}

// Decide applies an operator's decision (DecisionUnlock or DecisionSkip)
// about lock id at the merge's next transaction boundary, after
// Config.Keep kept it. It fails with ErrNoLock when the lock is
// not open, and when the destination does not merge shard DDL.
func (d *Destination) Decide(ctx context.Context, lock int, action DecisionAction) error {
	if !action.Valid() {
		return fmt.Errorf("group: decision %q: want %s or %s", action, DecisionUnlock, DecisionSkip)
	}
	if d.ddl == nil {
		return fmt.Errorf("%w %d: destination %s passes shard DDL through (shard_ddl: passthrough)", ErrNoLock, lock, d.cfg.Spec.Name)
	}
	req := decideReq{lock: lock, action: action, reply: make(chan error, 1)}
	select {
	case d.ddl.decide <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ShardDDL returns the shard-DDL merge's state as of the last transaction
// out (nil in passthrough mode); callers must not modify it. Safe for
// concurrent use.
func (d *Destination) ShardDDL() *ShardDDLState {
	if d.ddl == nil {
		return nil
	}
	return d.ddl.view.Load()
}
