package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// The merge of shard DDL (spec shard_ddl) as a pure state machine over
// the DDL of one destination's shard tables, fed in merged order: which
// logical DDL goes out, once, and which shard tables' rows wait. Its
// state is a function of the DDL it was fed, and it is part of the
// cursor, so a replay, a restart or a new owner reaches the same locks.
// The merge (shardddl.go) drives it and re-reads held rows.

// DDLVerdict is what happens to one shard table's DDL.
type DDLVerdict uint8

// The verdicts.
const (
	// DDLEmit: the DDL goes out now, rewritten to the logical table (a
	// logical table's first CREATE, or the DDL of a logical table only
	// one shard table routes to).
	DDLEmit DDLVerdict = iota + 1
	// DDLHold: a lock opened or grew; the shard table's later rows wait.
	DDLHold
	// DDLRelease: the last shard table ran the lock's DDL: it goes out,
	// then the rows held, and the lock is gone.
	DDLRelease
	// DDLSkip: an equivalent DDL went out already (a later shard's
	// CREATE of the same table).
	DDLSkip
	// DDLConflict: the shard table ran a DDL other than its lock's; its
	// rows wait too, and the lock stays until an operator decides.
	DDLConflict
)

// ShardDDLState is the shard-DDL merge's state at a point of the stream.
// The merge treats a state as immutable once a cursor may hold it: it
// changes a clone.
type ShardDDLState struct {
	// Shards maps each logical table ("schema.table") that shard tables
	// route to, to those shard tables (ShardName), sorted.
	Shards map[string][]string `json:"shards,omitempty"`
	// Created maps a logical table to its columns (TableSignature) as of
	// the last DDL of it that went out.
	Created map[string]string `json:"created,omitempty"`
	// Locks are the open locks, by logical table.
	Locks []*DDLLock `json:"locks,omitempty"`
	// LastLock numbers the locks: the next one opened is LastLock+1.
	LastLock int `json:"lastLock,omitempty"`
	// CatchUps are the re-reads of held rows still to run, the first one
	// under way.
	CatchUps []*CatchUp `json:"catchUps,omitempty"`
	// Announced says, per source, that its tables at the start were
	// counted (binlog.Config.AnnounceTables).
	Announced []bool `json:"announced,omitempty"`
	// Views maps a logical table with an optimistic entry open to the
	// columns its rows go out with (the shards' columns, NULL where a
	// shard table has not one of them).
	Views map[string][]change.Column `json:"views,omitempty"`
}

// DDLLock is one open lock of a logical table.
type DDLLock struct {
	ID int `json:"id"`
	// Logical is the logical table, "schema.table".
	Logical string `json:"logical"`
	// SQL is the logical statement that goes out when the lock releases,
	// and Key its canonical form (schema.LogicalDDL).
	SQL string `json:"sql"`
	Key string `json:"key"`
	// SQLMode is the sql_mode SQL means what it says under: the first
	// shard's (schema.LogicalDDL.SQLMode). A lock kept from before braid
	// recorded it has 0, the mode its text was read in then.
	SQLMode uint64 `json:"sqlMode,omitempty"`
	// Since is the commit time of the first shard's DDL.
	Since time.Time `json:"since"`
	// Done are the shard tables that ran it, in merged order; Waiting
	// the others, sorted.
	Done    []string `json:"done"`
	Waiting []string `json:"waiting"`
	// Conflicts maps a shard table that ran another DDL to that DDL's
	// logical text; a lock with conflicts releases only by a decision.
	Conflicts map[string]string `json:"conflicts,omitempty"`
	// Holds are where each held shard table's rows start waiting.
	Holds []Hold `json:"holds,omitempty"`
	// HeldRows counts the row changes held so far.
	HeldRows int64 `json:"heldRows,omitempty"`
	// Optimistic marks an entry of shard_ddl: optimistic, which holds no
	// rows: an ADD COLUMN that went out at the first shard, or a DROP
	// COLUMN that goes out at the last.
	Optimistic bool `json:"optimistic,omitempty"`
	// Columns are the columns the lock's DDL adds, drops or changes
	// (schema.LogicalDDL.Columns): in optimistic mode, another DDL of
	// one of them is a conflict.
	Columns []string `json:"columns,omitempty"`
}

// Hold is where a held shard table's rows start: the boundary after its
// DDL, and its source's merge key there (so re-read rows keep their keys).
type Hold struct {
	Shard   string          `json:"shard"`
	From    change.Position `json:"from"`
	LastKey int64           `json:"lastKey"`
	// FromMark names From on any server of the source.
	FromMark Mark `json:"fromMark,omitzero"`
}

// Mark is change.Mark: a lock may hold rows across a failover of their
// source, so a hold's start, a re-read's position and its end may be
// positions of different servers, which do not compare; a re-read on
// another server than its position's starts there by GTID, and places
// on two servers compare by GTID (reached, txFrom). The zero Mark (a
// state saved before braid kept them, or a source without GTIDs)
// compares by position.
type Mark = change.Mark

// markOf is the Mark of the boundary ev ends at (an EventCommit,
// EventDDL or EventProgress of a binlog reader).
func markOf(ev *change.Event) Mark { return Mark{GTIDs: ev.GTIDs, Server: ev.Server} }

// reached reports whether the boundary at pos (on the server of mark)
// is at or past the boundary at (on the server of atMark).
func reached(pos change.Position, mark Mark, at change.Position, atMark Mark) bool {
	if atMark.Across(mark.Server) {
		if covers, ok := mark.GTIDs.Covers(atMark.GTIDs); ok {
			return covers
		}
	}
	return pos.Compare(at) >= 0
}

// txFrom reports whether the transaction that begins with first (an
// EventBegin or EventDDL of a binlog reader) starts at or past the
// boundary at.
func txFrom(first *change.Event, at change.Position, atMark Mark) bool {
	if atMark.Across(first.Server) {
		if held, ok := atMark.GTIDs.Holds(first.GTID); ok {
			return !held
		}
	}
	return first.Pos.Compare(at) >= 0
}

// CatchUp is one re-read of held rows: per source, from where to where,
// and which tables' rows (each from its own position).
type CatchUp struct {
	Sources []CatchUpSource `json:"sources"`
}

// CatchUpSource is one source's part of a CatchUp.
type CatchUpSource struct {
	Source int `json:"source"`
	// Pos is where the re-read resumes (a boundary), Until where it ends
	// (the source's position in the merge when the lock released).
	Pos, Until change.Position
	// LastKey is the source's merge key at Pos.
	LastKey int64 `json:"lastKey"`
	// Tables maps each held table ("schema.table") to where its rows
	// start counting.
	Tables map[string]change.Position `json:"tables"`
	// PosMark, UntilMark and TableMarks name Pos, Until and each table's
	// start on any server of the source.
	PosMark    Mark            `json:"posMark,omitzero"`
	UntilMark  Mark            `json:"untilMark,omitzero"`
	TableMarks map[string]Mark `json:"tableMarks,omitempty"`
}

// ShardName names shard table "schema.table" of source src: "src/schema.table".
func ShardName(src, table string) string { return src + "/" + table }

// splitShard is ShardName's inverse.
func splitShard(shard string) (src, table string) {
	src, table, _ = strings.Cut(shard, "/")
	return src, table
}

// NewShardDDLState returns the state before any DDL of n sources.
func NewShardDDLState(n int) *ShardDDLState {
	return &ShardDDLState{Shards: map[string][]string{}, Created: map[string]string{}, Announced: make([]bool, n)}
}

// clone returns a deep copy.
func (s *ShardDDLState) clone() *ShardDDLState {
	out := &ShardDDLState{Shards: make(map[string][]string, len(s.Shards)), Created: maps.Clone(s.Created),
		LastLock: s.LastLock, Announced: slices.Clone(s.Announced)}
	if len(s.Views) > 0 {
		out.Views = maps.Clone(s.Views) // the column lists are never modified
	}
	if out.Created == nil {
		out.Created = map[string]string{}
	}
	for k, v := range s.Shards {
		out.Shards[k] = slices.Clone(v)
	}
	for _, l := range s.Locks {
		c := *l
		c.Done, c.Waiting, c.Holds = slices.Clone(l.Done), slices.Clone(l.Waiting), slices.Clone(l.Holds)
		c.Conflicts = maps.Clone(l.Conflicts)
		c.Columns = slices.Clone(l.Columns)
		out.Locks = append(out.Locks, &c)
	}
	for _, cu := range s.CatchUps {
		c := &CatchUp{Sources: slices.Clone(cu.Sources)}
		for i := range c.Sources {
			c.Sources[i].Tables = maps.Clone(c.Sources[i].Tables)
			c.Sources[i].TableMarks = maps.Clone(c.Sources[i].TableMarks)
		}
		out.CatchUps = append(out.CatchUps, c)
	}
	return out
}

// Join records shard table shard as one of logical's (it exists).
func (s *ShardDDLState) Join(logical, shard string) {
	if i, found := slices.BinarySearch(s.Shards[logical], shard); !found {
		s.Shards[logical] = slices.Insert(s.Shards[logical], i, shard)
	}
}

// lock returns logical's open lock, or nil.
func (s *ShardDDLState) lock(logical string) *DDLLock { return s.find(logical, false) }

// find returns logical's open lock (optimistic: its optimistic entry).
func (s *ShardDDLState) find(logical string, optimistic bool) *DDLLock {
	for _, l := range s.Locks {
		if l.Logical == logical && l.Optimistic == optimistic {
			return l
		}
	}
	return nil
}

// Lock returns the open lock numbered id, or nil.
func (s *ShardDDLState) Lock(id int) *DDLLock {
	for _, l := range s.Locks {
		if l.ID == id {
			return l
		}
	}
	return nil
}

func (s *ShardDDLState) removeLock(l *DDLLock) {
	s.Locks = slices.DeleteFunc(s.Locks, func(x *DDLLock) bool { return x == l })
}

// Create records shard table shard of logical creating itself with d,
// sig being the table's columns as created (TableSignature): the logical
// table's first CREATE goes out (and the CREATE of its one shard table),
// a later one of the same columns is skipped, one of other columns is a
// conflict (the shard tables disagree on the logical table's schema) and
// opens or joins a lock that only a decision releases.
func (s *ShardDDLState) Create(logical, shard string, d schema.LogicalDDL, sig string, at time.Time) (DDLVerdict, *DDLLock) {
	s.Join(logical, shard)
	if s.Views[logical] != nil {
		// An optimistic entry is open: a new shard table has the columns
		// of its view, or of the shards that have not run it yet.
		if sig == columnsSignature(s.Views[logical]) {
			return DDLSkip, nil
		}
	}
	key, ok := s.Created[logical]
	switch {
	case !ok || len(s.Shards[logical]) == 1:
		s.Created[logical] = sig
		return DDLEmit, nil
	case key == sig:
		return DDLSkip, nil
	}
	return DDLConflict, s.conflict(logical, shard, d, at)
}

// Altered records that logical's schema became sig, by a DDL that went
// out: a shard table created later must have these columns.
func (s *ShardDDLState) Altered(logical, sig string) {
	if _, ok := s.Created[logical]; ok {
		s.Created[logical] = sig
	}
}

// conflict records shard running d against logical's lock (opening one
// if there is none).
func (s *ShardDDLState) conflict(logical, shard string, d schema.LogicalDDL, at time.Time) *DDLLock {
	l := s.lock(logical)
	if l == nil {
		l = s.open(logical, d, at)
		l.Waiting = nil
	}
	if l.Conflicts == nil {
		l.Conflicts = map[string]string{}
	}
	l.Conflicts[shard] = d.Text
	l.Waiting = slices.DeleteFunc(l.Waiting, func(x string) bool { return x == shard })
	return l
}

func (s *ShardDDLState) open(logical string, d schema.LogicalDDL, at time.Time) *DDLLock {
	s.LastLock++
	l := &DDLLock{ID: s.LastLock, Logical: logical, SQL: d.Text, SQLMode: uint64(d.SQLMode), Key: d.Key, Since: at}
	s.Locks = append(s.Locks, l)
	return l
}

// Drop records shard table shard of logical being dropped: its rows hold
// no lock any more, and a lock it was the last one waiting for releases.
// The last shard table's DROP goes out (DDLEmit); the others are skipped.
func (s *ShardDDLState) Drop(logical, shard string) (DDLVerdict, *DDLLock) {
	shards := s.Shards[logical]
	if i, found := slices.BinarySearch(shards, shard); found {
		s.Shards[logical] = slices.Delete(shards, i, i+1)
	}
	if len(s.Shards[logical]) == 0 {
		delete(s.Shards, logical)
		delete(s.Created, logical)
		if l := s.lock(logical); l != nil {
			s.removeLock(l)
		}
		return DDLEmit, nil
	}
	if l := s.lock(logical); l != nil {
		l.Waiting = slices.DeleteFunc(l.Waiting, func(x string) bool { return x == shard })
		if len(l.Waiting) == 0 && len(l.Conflicts) == 0 {
			s.removeLock(l)
			return DDLRelease, l
		}
	}
	return DDLSkip, nil
}

// Alter records shard table shard of logical running d (any DDL but
// CREATE and DROP). With one shard table it goes out; else the first
// opens a lock holding shard, each equivalent one adds its shard table,
// and the last releases it.
func (s *ShardDDLState) Alter(logical, shard string, d schema.LogicalDDL, at time.Time) (DDLVerdict, *DDLLock) {
	shards := s.Shards[logical]
	if len(shards) <= 1 {
		return DDLEmit, nil
	}
	l := s.lock(logical)
	if l == nil {
		l = s.open(logical, d, at)
		l.Done = []string{shard}
		for _, x := range shards {
			if x != shard {
				l.Waiting = append(l.Waiting, x)
			}
		}
		return DDLHold, l
	}
	if d.Key != l.Key {
		return DDLConflict, s.conflict(logical, shard, d, at)
	}
	i := slices.Index(l.Waiting, shard)
	if i < 0 {
		return DDLSkip, l // ran it twice: the second changes nothing
	}
	l.Waiting = slices.Delete(l.Waiting, i, i+1)
	l.Done = append(l.Done, shard)
	if len(l.Waiting) == 0 && len(l.Conflicts) == 0 {
		s.removeLock(l)
		return DDLRelease, l
	}
	return DDLHold, l
}

// Optimistic records shard table shard of logical running d, an ALTER
// that only adds nullable columns or only drops columns, in optimistic
// mode: no rows wait. An ADD goes out at the first shard table (DDLEmit)
// and is skipped at the others (DDLSkip); a DROP waits (DDLHold) and goes
// out at the last (DDLRelease). Each distinct DDL has an entry of its
// own, open until every shard table has run it; l is d's.
func (s *ShardDDLState) Optimistic(logical, shard string, d schema.LogicalDDL, at time.Time) (v DDLVerdict, l *DDLLock) {
	shards := s.Shards[logical]
	if len(shards) <= 1 {
		return DDLEmit, nil
	}
	i := slices.IndexFunc(s.Locks, func(x *DDLLock) bool { return x.Optimistic && x.Logical == logical && x.Key == d.Key })
	if i < 0 {
		l = s.open(logical, d, at)
		l.Optimistic, l.Columns = true, d.Columns
		l.Done = []string{shard}
		for _, x := range shards {
			if x != shard {
				l.Waiting = append(l.Waiting, x)
			}
		}
		if d.AddsColumns {
			return DDLEmit, l
		}
		return DDLHold, l
	}
	l = s.Locks[i]
	if i := slices.Index(l.Waiting, shard); i >= 0 {
		l.Waiting = slices.Delete(l.Waiting, i, i+1)
		l.Done = append(l.Done, shard)
	}
	if len(l.Waiting) > 0 {
		return map[bool]DDLVerdict{true: DDLSkip, false: DDLHold}[d.AddsColumns], l
	}
	s.removeLock(l)
	if d.AddsColumns {
		return DDLSkip, l // out at the first; now every shard has it
	}
	return DDLRelease, l
}

// OptimisticConflict records, in optimistic mode, shard table shard of
// logical running d, a DDL other than an open optimistic entry's that
// touches one of its columns (the same column added with another type,
// say): a conflict, holding the shard table until a decision, and returns
// the lock that holds it; nil when there is no such conflict.
func (s *ShardDDLState) OptimisticConflict(logical, shard string, d schema.LogicalDDL, at time.Time) *DDLLock {
	for _, e := range s.Locks {
		if e.Optimistic && e.Logical == logical && e.Key != d.Key && slices.ContainsFunc(d.Columns, func(c string) bool { return slices.Contains(e.Columns, c) }) {
			return s.conflict(logical, shard, d, at)
		}
	}
	return nil
}

// Held reports whether shard's rows wait for a lock of logical: it ran
// the lock's DDL, or a conflicting one, and the lock is open.
func (s *ShardDDLState) Held(logical, shard string) bool {
	l := s.lock(logical)
	if l == nil {
		return false
	}
	_, conflict := l.Conflicts[shard]
	return conflict || slices.Contains(l.Done, shard)
}

// TableSignature is table "schema.table"'s columns in snap (names, types,
// nullability), what two shard tables must agree on to be one logical
// table; "" when snap does not hold the table.
func TableSignature(snap *change.SchemaSnapshot, table string) string {
	if snap == nil {
		return ""
	}
	sn, tn, _ := strings.Cut(table, ".")
	i, found := slices.BinarySearchFunc(snap.Tables, [2]string{sn, tn}, func(h change.SchemaTableHistory, k [2]string) int {
		if c := strings.Compare(h.Schema, k[0]); c != 0 {
			return c
		}
		return strings.Compare(h.Name, k[1])
	})
	if !found || len(snap.Tables[i].Versions) == 0 {
		return ""
	}
	t := snap.Tables[i].Versions[len(snap.Tables[i].Versions)-1].Table
	if t == nil {
		return ""
	}
	return columnsSignature(t.Columns)
}

// columnsSignature is TableSignature of columns. Types are compared as
// schema.ComparableType spells them: a shard table on MariaDB (int(11))
// and one on MySQL 8 (int) agree.
func columnsSignature(cols []change.Column) string {
	var b strings.Builder
	for _, c := range cols {
		fmt.Fprintf(&b, "%s %s %v,", strings.ToLower(c.Name), schema.ComparableType(c), c.Nullable)
	}
	return b.String()
}

// TableColumns is table "schema.table"'s columns in snap, back versions
// before the newest (0: the newest); nil when snap does not hold it.
func TableColumns(snap *change.SchemaSnapshot, table string, back int) []change.Column {
	if snap == nil {
		return nil
	}
	sn, tn, _ := strings.Cut(table, ".")
	for _, h := range snap.Tables {
		if h.Schema == sn && h.Name == tn {
			if k := len(h.Versions) - 1 - back; k >= 0 && h.Versions[k].Table != nil {
				return h.Versions[k].Table.Columns
			}
			return nil
		}
	}
	return nil
}
