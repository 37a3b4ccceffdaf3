package schema

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/braid-cdc/braid/engine/change"
)

// ErrDDLMismatch is wrapped when a DDL statement does not fit the tracked
// schema (it drops, changes or places a column the model does not have, or
// adds one it already has): the server ran it, so the model is wrong.
var ErrDDLMismatch = errors.New("schema: DDL does not match the tracked schema")

// Tracker keeps the schema of the tables braid reads, as of a position
// in one source's binlog.
//
// Every change appends a version (position, schema or "absent", or
// "unknown") to the table's history, so TableAt answers for any position
// between versions: rows written before an ALTER map through the schema of
// their time.
//
// Invariants: a table's versions have strictly increasing positions; a
// version's *Table is never modified after it is recorded; ApplyDDL is
// idempotent by position (an event at or before the newest one applied is
// skipped), so replaying binlog from an older cursor after
// Restore never applies a DDL twice. Positions are one server's: a
// reader that switches servers calls Rebase.
//
// A Tracker does no I/O and is not safe for concurrent use.
type Tracker struct {
	// noIntWidths: types are spelled as MySQL 8.0.19+ prints them
	// (spelling.go).
	noIntWidths bool
	tables      map[schemaKey]*schemaHistory
	applied     change.Position // newest position ApplyDDL applied
	pending     int             // tables with a pending unknown state
	minPending  change.Position // the earliest pending position, when pending > 0
	// dbCharsets holds the databases' default charsets where they matter
	// (ddlKeptCharset: binary and the converted ones), and serverCharset the server's,
	// which CREATE DATABASE naming none takes: a CREATE TABLE naming no
	// charset takes its database's. A database whose default does not
	// matter is held (as "") only when the server's does, to tell it from
	// one that takes the server's; so snapshots of a utf8 server with many
	// databases stay small.
	dbCharsets    map[string]string
	serverCharset string
	dbApplied     change.Position // where ApplyDDL last changed dbCharsets
	// kept are the tables ("schema.table") the DDL ApplyDDL applied at
	// keptAt acted on and left as the model had them (see Kept).
	kept   []string
	keptAt change.Position
	// online recognises online schema changes' helper tables (nil: none);
	// migrations are those under way and the last ended ones, sorted by
	// table; onlineAt is where ApplyDDL last changed them, and swaps
	// what it swapped in there (onlineddl.go).
	online     *OnlineRules
	migrations []change.OnlineMigration
	onlineAt   change.Position
	swaps      []OnlineSwap
}

type schemaHistory struct {
	versions []schemaVersion
	pending  *change.SchemaPending
}

type schemaVersion struct {
	pos     change.Position
	unknown bool
	state   *schemaState // nil: the table does not exist
}

// schemaState is one version of a table: its columns and the indexes that
// decide which columns are Key.
type schemaState struct {
	table   *change.Table
	indexes []change.SchemaIndex
}

func (st *schemaState) clone() *schemaState {
	c := &schemaState{table: st.table.Clone()}
	for _, ix := range st.indexes {
		ix.Columns = slices.Clone(ix.Columns)
		c.indexes = append(c.indexes, ix)
	}
	return c
}

// equal compares states; nil is no table.
func (st *schemaState) equal(o *schemaState) bool {
	if st == nil || o == nil {
		return st == o
	}
	return reflect.DeepEqual(st.table, o.table) && slices.EqualFunc(st.indexes, o.indexes, func(a, b change.SchemaIndex) bool {
		return a.Name == b.Name && a.Primary == b.Primary && a.Partial == b.Partial && slices.Equal(a.Columns, b.Columns)
	})
}

// NewTracker returns a tracker that knows no table.
func NewTracker() *Tracker {
	return &Tracker{tables: make(map[schemaKey]*schemaHistory), dbCharsets: map[string]string{}}
}

// SetCharsets sets the server's default charset and the databases'
// (name → charset), as the server reports them where reading starts.
func (s *Tracker) SetCharsets(server string, databases map[string]string) {
	s.serverCharset = ddlKeptCharset(strings.ToLower(server))
	clear(s.dbCharsets)
	for db, cs := range databases {
		s.setDBCharset(db, ddlKeptCharset(strings.ToLower(cs)))
	}
}

// setDBCharset records database db's default charset (see dbCharsets).
func (s *Tracker) setDBCharset(db, cs string) {
	if cs == "" && s.serverCharset == "" {
		delete(s.dbCharsets, db)
		return
	}
	s.dbCharsets[db] = cs
}

// databasesChanged reports whether the DDL ApplyDDL applied at pos created,
// altered or dropped a database: the history to save has changed even
// when no table has.
func (s *Tracker) DatabasesChanged(pos change.Position) bool {
	return !pos.IsZero() && s.dbApplied == pos
}

// Kept returns the tables ("schema.table") the DDL ApplyDDL applied at
// pos acted on (ALTER TABLE, CREATE UNIQUE INDEX, DROP INDEX, CREATE OR
// REPLACE TABLE) and left as the model had them: it changed nothing the
// model keeps (ADD FULLTEXT INDEX, ENGINE=, a column's DEFAULT), so it
// made no version and ApplyDDL does not report them, yet the DDL is
// theirs and goes out to their consumers (a SQL target takes its index,
// a sink refuses one it cannot run).
func (s *Tracker) Kept(pos change.Position) []string {
	if pos.IsZero() || s.keptAt != pos {
		return nil
	}
	return s.kept
}

// dbCharset is the default charset a table created in db takes.
func (s *Tracker) dbCharset(db string) string {
	if cs, ok := s.dbCharsets[db]; ok {
		return cs
	}
	return s.serverCharset
}

func (h *schemaHistory) last() schemaVersion { return h.versions[len(h.versions)-1] }

// put records v at pos, replacing a version at the same position and
// keeping the versions in position order.
func (h *schemaHistory) put(pos change.Position, v schemaVersion) {
	v.pos = pos
	i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].pos.Compare(pos) >= 0 })
	if i < len(h.versions) && h.versions[i].pos.Compare(pos) == 0 {
		h.versions[i] = v
		return
	}
	h.versions = slices.Insert(h.versions, i, v)
}

func (s *Tracker) history(k schemaKey) *schemaHistory {
	h := s.tables[k]
	if h == nil {
		h = &schemaHistory{}
		s.tables[k] = h
	}
	return h
}

// LoadCreate adds or replaces a table from a CREATE TABLE statement (what
// SHOW CREATE TABLE prints) as the schema in force at pos. db is the
// table's schema. It clears a pending unknown state of the table.
func (s *Tracker) LoadCreate(pos change.Position, db, createSQL string) error {
	where := fmt.Sprintf("at %s (db %q)", pos, db)
	stmts, perr := ddlParse(createSQL, 0)
	if perr != nil {
		return perr.wrap(where)
	}
	var n *ast.CreateTableStmt
	if len(stmts) == 1 {
		n, _ = stmts[0].node.(*ast.CreateTableStmt)
	}
	if n == nil || len(n.Cols) == 0 {
		return fmt.Errorf("%w %s: not one CREATE TABLE with columns: %.200q", ErrDDLParse, where, createSQL)
	}
	k := ddlName(db, n.Table)
	st, err := schemaFromCreate(k, n, stmts[0].tableCharset, s.dbCharset(k.schema))
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrDDLParse, where, err)
	}
	h := s.history(k)
	if h.pending != nil {
		h.pending = nil
		s.recountPending()
	}
	h.put(pos, s.spelled(schemaVersion{state: st}))
	return nil
}

// ApplyDDL applies one DDL query event's SQL text, run with default
// database db (the query event's schema, may be "") under the session's
// sql_mode mode, at position pos.
//
// It returns the tables ("schema.table") whose schema changed. Statements
// it does not model (non-unique CREATE INDEX, TRUNCATE, CREATE VIEW,
// temporary tables, sequences...) are ignored without error, and events that are not DDL on tables (BEGIN,
// COMMIT, XA, SAVEPOINT, DML) are dropped by a keyword check without
// parsing. SQL it cannot parse returns an error wrapping ErrDDLParse; a
// statement that does not fit the model returns one wrapping
// ErrDDLMismatch. On error nothing is applied.
//
// Events at or before the newest position already applied are skipped.
// Tables marked with MarkUnknownUntil take their snapshot at the first
// event at or after their position.
func (s *Tracker) ApplyDDL(pos change.Position, db, sql string, mode SQLMode) (changed []string, err error) {
	if !s.applied.IsZero() && pos.Compare(s.applied) <= 0 {
		return nil, nil
	}
	if !ddlLead(sql) {
		return s.flipPending(pos, nil), nil
	}
	where := fmt.Sprintf("at %s (db %q)", pos, db)
	stmts, perr := ddlParse(sql, mode)
	if perr != nil {
		return nil, perr.wrap(where)
	}
	x := schemaTxn{s: s, db: db, where: where, staged: make(map[schemaKey]schemaVersion)}
	for _, st := range stmts {
		x.onlineStmt(st, pos, mode)
		if err := x.apply(st); err != nil {
			return nil, err
		}
	}
	s.commitOnline(&x, pos)
	for name, cs := range x.dbCharsets {
		if cs == nil {
			delete(s.dbCharsets, name)
		} else {
			s.setDBCharset(name, *cs)
		}
		s.dbApplied = pos
	}
	s.kept, s.keptAt = nil, pos
	for _, k := range x.order {
		v := s.spelled(x.staged[k])
		h := s.tables[k]
		if h != nil && schemaSame(h.last(), v) || h == nil && v.state == nil && !v.unknown {
			if v.state != nil && !v.unknown {
				s.kept = append(s.kept, k.String())
			}
			continue
		}
		s.history(k).put(pos, v)
		changed = append(changed, k.String())
	}
	s.applied = pos
	return s.flipPending(pos, changed), nil
}

func schemaSame(a, b schemaVersion) bool {
	return a.unknown == b.unknown && a.state.equal(b.state)
}

// flipPending gives every table whose pending position is at or before pos
// its snapshot, as the version at the pending position.
func (s *Tracker) flipPending(pos change.Position, changed []string) []string {
	if s.pending == 0 || pos.Compare(s.minPending) < 0 {
		return changed
	}
	var flipped []string
	for k, h := range s.tables {
		if h.pending == nil || h.pending.Until.Compare(pos) > 0 {
			continue
		}
		var st *schemaState
		if h.pending.After != nil {
			st = schemaFromTable(k, h.pending.After)
		}
		h.put(h.pending.Until, s.spelled(schemaVersion{state: st}))
		h.pending = nil
		if !slices.Contains(changed, k.String()) {
			flipped = append(flipped, k.String())
		}
	}
	sort.Strings(flipped)
	s.recountPending()
	return append(changed, flipped...)
}

func (s *Tracker) recountPending() {
	s.pending, s.minPending = 0, change.Position{}
	for _, h := range s.tables {
		if h.pending == nil {
			continue
		}
		if s.pending == 0 || h.pending.Until.Compare(s.minPending) < 0 {
			s.minPending = h.pending.Until
		}
		s.pending++
	}
}

// schemaFromTable makes a state from a caller's table: its Key columns are
// taken as the primary key.
func schemaFromTable(k schemaKey, t *change.Table) *schemaState {
	st := &schemaState{table: t.Clone()}
	st.table.Schema, st.table.Name = k.schema, k.name
	if key := t.KeyNames(); len(key) > 0 {
		st.indexes = []change.SchemaIndex{{Name: "PRIMARY", Primary: true, Columns: key}}
	}
	st.deriveKeys()
	return st
}

// Table returns the current schema of schema.table (nil, false if unknown
// or dropped). Callers must not modify it.
func (s *Tracker) Table(schema, name string) (*change.Table, bool) {
	h := s.tables[schemaKey{schema, name}]
	if h == nil {
		return nil, false
	}
	return h.last().table()
}

func (v schemaVersion) table() (*change.Table, bool) {
	if v.unknown || v.state == nil {
		return nil, false
	}
	return v.state.table, true
}

// TableAt returns the schema in force at pos: the newest version whose
// position is at or before pos. Callers must not modify it.
func (s *Tracker) TableAt(schema, name string, pos change.Position) (*change.Table, bool) {
	h := s.tables[schemaKey{schema, name}]
	if h == nil {
		return nil, false
	}
	i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].pos.Compare(pos) > 0 })
	if i == 0 {
		return nil, false
	}
	return h.versions[i-1].table()
}

// TableBefore returns the schema in force just before pos: the newest
// version whose position is before pos. Callers must not modify it.
func (s *Tracker) TableBefore(schema, name string, pos change.Position) (*change.Table, bool) {
	h := s.tables[schemaKey{schema, name}]
	if h == nil {
		return nil, false
	}
	i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].pos.Compare(pos) >= 0 })
	if i == 0 {
		return nil, false
	}
	return h.versions[i-1].table()
}

// MarkUnknownUntil records that schema.table's columns are not known from
// the start until the DDL at pos has been applied; after applying the DDL
// event at exactly that position (or the first event after it), the
// table's schema becomes after, a snapshot the caller took from the live
// server (nil: the table no longer exists). It replaces the table's
// history. While unknown, Table returns (nil, false) and Unknown reports
// pos. DDL on the table before pos is ignored.
func (s *Tracker) MarkUnknownUntil(schema, name string, pos change.Position, after *change.Table) {
	k := schemaKey{schema, name}
	h := &schemaHistory{versions: []schemaVersion{{unknown: true}}, pending: &change.SchemaPending{Until: pos}}
	if after != nil {
		h.pending.After = after.Clone()
	}
	s.tables[k] = h
	s.recountPending()
	if !s.applied.IsZero() && pos.Compare(s.applied) <= 0 {
		s.flipPending(s.applied, nil)
	}
}

// Forget removes schema.table's history: the table is absent until a later
// DDL creates it.
func (s *Tracker) Forget(schema, name string) {
	delete(s.tables, schemaKey{schema, name})
	s.recountPending()
}

// Unknown reports whether schema.table is waiting for the DDL at until
// (see MarkUnknownUntil).
func (s *Tracker) Unknown(schema, name string) (until change.Position, ok bool) {
	h := s.tables[schemaKey{schema, name}]
	if h == nil || h.pending == nil {
		return change.Position{}, false
	}
	return h.pending.Until, true
}

// Compact drops every version at or before pos except the newest one at or
// before pos, to bound history. TableAt answers as before for positions at
// or after pos. A table whose only version left is "absent" is forgotten.
func (s *Tracker) Compact(pos change.Position) {
	for k, h := range s.tables {
		i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].pos.Compare(pos) > 0 })
		if i > 1 {
			h.versions = slices.Delete(h.versions, 0, i-1)
		}
		if v := h.versions[0]; len(h.versions) == 1 && h.pending == nil && !v.unknown && v.state == nil {
			delete(s.tables, k)
		}
	}
}

// Rebase keeps the model as it stands and forgets where in the binlog
// each part of it came into force: a reader calls it when it goes on
// reading another server's binlog (a failover resumed by GTID), whose
// positions do not compare with the old server's. Left as they were,
// the new server's DDL would be skipped as applied already whenever its
// binlog files are numbered below the old server's (the invariant
// below), or filed before the newest version, and rows written after it
// would meet the old columns.
//
// Each table keeps its newest version, in force from the zero position
// (before any position of the new server); nothing counts as applied, so
// each DDL the new server sends is applied at its own position (one read
// before the switch never reaches ApplyDDL: the reader knows it by its
// GTID). Migrations under way keep their statements, from the zero
// position; ended ones are forgotten. A table waiting for the DDL at a
// position (MarkUnknownUntil: a start in the past without FULL row
// metadata) keeps waiting for that position, compared from now on with
// the new server's: a limit of a failover during such a start.
func (s *Tracker) Rebase() {
	for k, h := range s.tables {
		v := h.last()
		if !v.unknown && v.state == nil && h.pending == nil {
			delete(s.tables, k) // dropped: absent, as if never seen
			continue
		}
		v.pos = change.Position{}
		h.versions = []schemaVersion{v}
	}
	s.applied, s.dbApplied, s.onlineAt, s.swaps = change.Position{}, change.Position{}, change.Position{}, nil
	s.kept, s.keptAt = nil, change.Position{}
	s.migrations = slices.DeleteFunc(s.migrations, func(m change.OnlineMigration) bool { return !m.Swapped.IsZero() })
	for i := range s.migrations {
		m := &s.migrations[i]
		m.Since = change.Position{}
		m.DDL = slices.Clone(m.DDL) // a snapshot may share it
		for j := range m.DDL {
			m.DDL[j].Pos = change.Position{}
		}
	}
}

// Snapshot returns the whole history; it shares nothing with the tracker.
func (s *Tracker) Snapshot() change.SchemaSnapshot {
	snap := change.SchemaSnapshot{Applied: s.applied, Tables: make([]change.SchemaTableHistory, 0, len(s.tables)), ServerCharset: s.serverCharset,
		Online: cloneMigrations(s.migrations)}
	if len(s.dbCharsets) > 0 {
		snap.Databases = maps.Clone(s.dbCharsets)
	}
	for k, h := range s.tables {
		th := change.SchemaTableHistory{Schema: k.schema, Name: k.name, Versions: make([]change.SchemaVersion, len(h.versions))}
		for i, v := range h.versions {
			sv := change.SchemaVersion{Pos: v.pos, Unknown: v.unknown}
			if v.state != nil {
				c := v.state.clone()
				sv.Table = c.table
				if len(c.indexes) > 0 {
					sv.Indexes = c.indexes
				}
			}
			th.Versions[i] = sv
		}
		if h.pending != nil {
			p := *h.pending
			if p.After != nil {
				p.After = p.After.Clone()
			}
			th.Pending = &p
		}
		snap.Tables = append(snap.Tables, th)
	}
	sort.Slice(snap.Tables, func(i, j int) bool {
		a, b := snap.Tables[i], snap.Tables[j]
		if a.Schema != b.Schema {
			return a.Schema < b.Schema
		}
		return a.Name < b.Name
	})
	return snap
}

// Restore rebuilds a tracker from a Snapshot, checking that it
// is well formed.
func Restore(snap change.SchemaSnapshot) (*Tracker, error) {
	s := NewTracker()
	s.applied = snap.Applied
	s.serverCharset = snap.ServerCharset
	maps.Copy(s.dbCharsets, snap.Databases)
	for _, m := range snap.Online {
		if m.Schema == "" || m.Table == "" || m.Shadow == "" {
			return nil, fmt.Errorf("schema: schema snapshot: an online migration without its table or shadow: %q.%q (%q)", m.Schema, m.Table, m.Shadow)
		}
	}
	s.migrations = cloneMigrations(snap.Online)
	for _, th := range snap.Tables {
		k := schemaKey{th.Schema, th.Name}
		if th.Name == "" || len(th.Versions) == 0 {
			return nil, fmt.Errorf("schema: schema snapshot: table %q has no name or no versions", k)
		}
		if _, dup := s.tables[k]; dup {
			return nil, fmt.Errorf("schema: schema snapshot: table %q twice", k)
		}
		h := &schemaHistory{}
		for i, sv := range th.Versions {
			if i > 0 && sv.Pos.Compare(th.Versions[i-1].Pos) <= 0 {
				return nil, fmt.Errorf("schema: schema snapshot: table %q: versions out of order at %s", k, sv.Pos)
			}
			v := schemaVersion{pos: sv.Pos, unknown: sv.Unknown}
			if sv.Table != nil {
				if sv.Unknown || sv.Table.Schema != k.schema || sv.Table.Name != k.name || len(sv.Table.Columns) == 0 {
					return nil, fmt.Errorf("schema: schema snapshot: table %q: bad version at %s", k, sv.Pos)
				}
				v.state = (&schemaState{table: sv.Table, indexes: sv.Indexes}).clone()
			}
			h.versions = append(h.versions, v)
		}
		if th.Pending != nil {
			p := *th.Pending
			if p.After != nil {
				p.After = p.After.Clone()
			}
			h.pending = &p
		}
		s.tables[k] = h
	}
	s.recountPending()
	return s, nil
}

// schemaTxn stages the changes of one query event, so that an event
// applies whole or not at all.
type schemaTxn struct {
	s      *Tracker
	db     string
	where  string // position and db, for errors
	staged map[schemaKey]schemaVersion
	order  []schemaKey
	// dbCharsets stages databases' default charsets (nil: dropped).
	dbCharsets map[string]*string
	// on stages the migrations (nil: untouched).
	on *onlineTxn
}

// dbCharset is the default charset a table created in db takes, staged
// changes first.
func (x *schemaTxn) dbCharset(db string) string {
	if cs, ok := x.dbCharsets[db]; ok {
		if cs == nil {
			return x.s.serverCharset
		}
		return *cs
	}
	return x.s.dbCharset(db)
}

// dbExists reports whether database db is known to exist (on a server
// whose default charset does not matter, only one whose default does).
func (x *schemaTxn) dbExists(db string) bool {
	if cs, ok := x.dbCharsets[db]; ok {
		return cs != nil
	}
	_, ok := x.s.dbCharsets[db]
	return ok
}

// setDBCharset stages a database's default charset.
func (x *schemaTxn) setDBCharset(db string, cs *string) {
	if x.dbCharsets == nil {
		x.dbCharsets = map[string]*string{}
	}
	x.dbCharsets[db] = cs
}

// databaseCharset is the charset CREATE or ALTER DATABASE's options name,
// and whether they name one.
func databaseCharset(opts []*ast.DatabaseOption) (string, bool) {
	cs, named := "", false
	for _, opt := range opts {
		switch opt.Tp {
		case ast.DatabaseOptionCharset:
			cs, named = strings.ToLower(opt.Value), true
		case ast.DatabaseOptionCollate:
			if !named {
				cs, named = ddlCollationCharset(opt.Value), true
			}
		}
	}
	return ddlKeptCharset(cs), named
}

type schemaStatus uint8

const (
	schemaAbsent  schemaStatus = iota // untracked or dropped
	schemaPresent                     // known columns
	schemaUnknown                     // exists, columns unknown
	schemaPending                     // waiting for a MarkUnknownUntil position: DDL ignored
)

func (x *schemaTxn) get(k schemaKey) (*schemaState, schemaStatus) {
	v, ok := x.staged[k]
	if !ok {
		h := x.s.tables[k]
		if h == nil {
			return nil, schemaAbsent
		}
		if h.pending != nil {
			return nil, schemaPending
		}
		v = h.last()
	}
	switch {
	case v.unknown:
		return nil, schemaUnknown
	case v.state == nil:
		return nil, schemaAbsent
	}
	return v.state, schemaPresent
}

func (x *schemaTxn) put(k schemaKey, v schemaVersion) {
	if _, ok := x.staged[k]; !ok {
		x.order = append(x.order, k)
	}
	x.staged[k] = v
}

// tables lists the keys the transaction can see in schema db.
func (x *schemaTxn) tables(db string) []schemaKey {
	var keys []schemaKey
	for k := range x.s.tables {
		if _, ok := x.staged[k]; !ok && k.schema == db {
			keys = append(keys, k)
		}
	}
	for _, k := range x.order {
		if k.schema == db {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].name < keys[j].name })
	return keys
}

func (x *schemaTxn) apply(st ddlStmt) error {
	switch n := st.node.(type) {
	case *ast.CreateTableStmt:
		return x.createTable(n, st)
	case *ast.AlterTableStmt:
		return x.alterTable(n)
	case *ast.DropTableStmt:
		if n.IsView || n.TemporaryKeyword != ast.TemporaryNone {
			return nil
		}
		for _, tn := range n.Tables {
			if k := ddlName(x.db, tn); x.status(k) != schemaPending {
				x.put(k, schemaVersion{})
			}
		}
	case *ast.DropDatabaseStmt:
		for _, k := range x.tables(n.Name.O) {
			if x.status(k) != schemaPending {
				x.put(k, schemaVersion{})
			}
		}
		x.setDBCharset(n.Name.O, nil)
	case *ast.CreateDatabaseStmt:
		if x.dbExists(n.Name.O) && n.IfNotExists {
			return nil
		}
		cs, named := databaseCharset(n.Options)
		if !named {
			cs = x.s.serverCharset
		}
		x.setDBCharset(n.Name.O, &cs)
	case *ast.AlterDatabaseStmt:
		name := n.Name.O
		if name == "" || n.AlterDefaultDatabase {
			name = x.db
		}
		if cs, named := databaseCharset(n.Options); named {
			x.setDBCharset(name, &cs)
		}
	case *ast.RenameTableStmt:
		for _, tt := range n.TableToTables {
			x.rename(ddlName(x.db, tt.OldTable), ddlName(x.db, tt.NewTable), nil)
		}
	case *ast.CreateIndexStmt:
		if n.KeyType != ast.IndexKeyTypeUnique {
			return nil
		}
		c := &ast.Constraint{Tp: ast.ConstraintUniq, Name: n.IndexName, Keys: n.IndexPartSpecifications, IfNotExists: n.IfNotExists}
		return x.alter(ddlName(x.db, n.Table), func(st *schemaState) error {
			ix, _ := ddlIndex(c)
			st.addIndex(ix, c.IfNotExists)
			return nil
		})
	case *ast.DropIndexStmt:
		return x.alter(ddlName(x.db, n.Table), func(st *schemaState) error {
			st.dropIndex(n.IndexName)
			return nil
		})
	}
	return nil
}

func (x *schemaTxn) status(k schemaKey) schemaStatus {
	_, s := x.get(k)
	return s
}

// alter applies f to a copy of a known table; other tables are left as
// they are.
func (x *schemaTxn) alter(k schemaKey, f func(*schemaState) error) error {
	cur, status := x.get(k)
	if status != schemaPresent {
		return nil
	}
	st := cur.clone()
	if err := f(st); err != nil {
		return fmt.Errorf("%w %s: table %s: %v", ErrDDLMismatch, x.where, k, err)
	}
	st.deriveKeys()
	x.put(k, schemaVersion{state: st})
	return nil
}

// rename moves from to to; st, if set, is from's new state (ALTER TABLE
// ... RENAME).
func (x *schemaTxn) rename(from, to schemaKey, st *schemaState) {
	cur, status := x.get(from)
	if st != nil {
		cur = st
	}
	switch status {
	case schemaPending:
		return
	case schemaAbsent:
		// A table braid does not know takes the name: if the name was
		// known, its columns no longer are.
		if x.status(to) != schemaAbsent && x.status(to) != schemaPending {
			x.put(to, schemaVersion{unknown: true})
		}
		return
	}
	x.put(from, schemaVersion{})
	if status == schemaUnknown {
		x.put(to, schemaVersion{unknown: true})
		return
	}
	moved := cur.clone()
	moved.table.Schema, moved.table.Name = to.schema, to.name
	x.put(to, schemaVersion{state: moved})
}

func (x *schemaTxn) createTable(n *ast.CreateTableStmt, stmt ddlStmt) error {
	if n.TemporaryKeyword != ast.TemporaryNone {
		return nil
	}
	k := ddlName(x.db, n.Table)
	status := x.status(k)
	if status == schemaPending || n.IfNotExists && !stmt.orReplace && status != schemaAbsent {
		return nil
	}
	if n.ReferTable != nil {
		ref, refStatus := x.get(ddlName(x.db, n.ReferTable))
		if refStatus != schemaPresent {
			x.put(k, schemaVersion{unknown: true})
			return nil
		}
		st := ref.clone()
		st.table.Schema, st.table.Name = k.schema, k.name
		x.put(k, schemaVersion{state: st})
		return nil
	}
	if len(n.Cols) == 0 || n.Select != nil {
		// CREATE TABLE ... SELECT in statement format: the selected
		// columns are not in the text. (Row format logs the full columns.)
		x.put(k, schemaVersion{unknown: true})
		return nil
	}
	st, err := schemaFromCreate(k, n, stmt.tableCharset, x.dbCharset(k.schema))
	if err != nil {
		return fmt.Errorf("%w %s: table %s: %v", ErrDDLParse, x.where, k, err)
	}
	x.put(k, schemaVersion{state: st})
	return nil
}

// schemaFromCreate builds a table from CREATE TABLE's columns and
// constraints.
func schemaFromCreate(k schemaKey, n *ast.CreateTableStmt, tableCharset, dbCharset string) (*schemaState, error) {
	for _, opt := range n.Options {
		if cs := ddlOptionCharset(opt); cs != "" {
			tableCharset = cs
		}
	}
	if tableCharset == "" {
		tableCharset = dbCharset
	}
	st := &schemaState{table: &change.Table{Schema: k.schema, Name: k.name, Charset: ddlKeptCharset(tableCharset)}}
	for _, def := range n.Cols {
		if err := st.addColumn(def, nil, false); err != nil {
			return nil, err
		}
	}
	for _, c := range n.Constraints {
		if ix, ok := ddlIndex(c); ok {
			st.addIndex(ix, false)
		}
	}
	st.deriveKeys()
	return st, nil
}

func (x *schemaTxn) alterTable(n *ast.AlterTableStmt) error {
	k := ddlName(x.db, n.Table)
	var to *schemaKey
	for _, spec := range n.Specs {
		if spec.Tp == ast.AlterTableRenameTable {
			nk := ddlName(x.db, spec.NewTable)
			to = &nk
		}
	}
	cur, status := x.get(k)
	if status != schemaPresent {
		if to != nil {
			x.rename(k, *to, nil)
		}
		return nil
	}
	st := cur.clone()
	for _, spec := range n.Specs {
		if err := st.alterSpec(spec); err != nil {
			return fmt.Errorf("%w %s: table %s: %v", ErrDDLMismatch, x.where, k, err)
		}
	}
	st.deriveKeys()
	if to != nil && *to != k {
		x.rename(k, *to, st)
		return nil
	}
	x.put(k, schemaVersion{state: st})
	return nil
}

// TablesAt lists "schema.table" of every table that exists at pos, sorted.
func (s *Tracker) TablesAt(pos change.Position) []string {
	var out []string
	for k := range s.tables {
		if _, ok := s.TableAt(k.schema, k.name, pos); ok {
			out = append(out, k.String())
		}
	}
	slices.Sort(out)
	return out
}

// SnapshotAt is snap as it was at pos, a transaction boundary at or after
// the start of its history: the versions of DDL after pos are dropped
// and nothing counts as applied after pos, so a reader restored from it
// reads from pos on as one that had stopped there (and applies those DDL
// again). Databases' charsets are kept as of snap (they are not
// versioned); pending unknowns are kept.
func SnapshotAt(snap change.SchemaSnapshot, pos change.Position) change.SchemaSnapshot {
	out := snap
	out.Online = migrationsAt(snap.Online, pos)
	out.Tables = make([]change.SchemaTableHistory, 0, len(snap.Tables))
	for _, th := range snap.Tables {
		n := sort.Search(len(th.Versions), func(i int) bool { return th.Versions[i].Pos.Compare(pos) >= 0 })
		if n == 0 && th.Pending == nil {
			continue // created after pos
		}
		if n == 0 {
			n = min(1, len(th.Versions))
		}
		th.Versions = th.Versions[:n:n]
		out.Tables = append(out.Tables, th)
	}
	if out.Applied.Compare(pos) >= 0 {
		out.Applied = change.Position{}
		for _, th := range out.Tables {
			if last := th.Versions[len(th.Versions)-1].Pos; last.Compare(out.Applied) > 0 && last.Compare(pos) < 0 {
				out.Applied = last
			}
		}
	}
	return out
}
