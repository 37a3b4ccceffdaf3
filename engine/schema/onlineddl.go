package schema

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/braid-cdc/braid/engine/change"
)

// Online schema changes (gh-ost, pt-online-schema-change) as the tracker
// sees them. A tool creates a shadow copy of table T (_T_gho, _T_new),
// runs the user's DDL on the copy, fills it, and swaps it in with one
// RENAME TABLE T TO _T_del, _T_gho TO T (or two: gh-ost's two-step
// cut-over). The tracker models every helper table like any other, so
// after the swap T has the copy's columns; besides, it keeps, per table,
// the migration under way: the shadow's name and the DDL run on it, in
// the snapshot a cursor saves, so that a restart, a replay or a new owner
// still knows it at the swap. At the swap the DDL is handed out
// (OnlineSwaps) to become T's own ALTER. A shadow dropped without a swap
// is an abandoned migration: it is forgotten. A copy made before reading
// began is a table like any other until it takes T's name in the RENAME
// that renames T away: that is the swap of a migration whose DDL was not
// seen (the reader derives T's ALTER from its columns, DiffALTER).

// OnlineRules recognise helper tables by name: shadow rules name the
// altered copies a tool swaps in, trash rules the tables it swaps out or
// keeps beside (changelogs). Each rule's first group is the name of the
// table the tool changes. A nil *OnlineRules recognises none.
type OnlineRules struct {
	shadow, trash []*regexp.Regexp
}

// NewOnlineRules compiles the rules (spec.Spec.OnlineDDLRules); with none
// it returns nil, which recognises nothing.
func NewOnlineRules(shadow, trash []string) (*OnlineRules, error) {
	if len(shadow) == 0 && len(trash) == 0 {
		return nil, nil
	}
	r := &OnlineRules{}
	for _, list := range []struct {
		rules []string
		out   *[]*regexp.Regexp
	}{{shadow, &r.shadow}, {trash, &r.trash}} {
		for _, p := range list.rules {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, fmt.Errorf("schema: online DDL rule %q: %v", p, err)
			}
			if re.NumSubexp() < 1 {
				return nil, fmt.Errorf("schema: online DDL rule %q has no group naming the changed table", p)
			}
			*list.out = append(*list.out, re)
		}
	}
	return r, nil
}

func firstGroup(res []*regexp.Regexp, table string) (string, bool) {
	for _, re := range res {
		if m := re.FindStringSubmatch(table); m != nil && m[1] != "" {
			return m[1], true
		}
	}
	return "", false
}

// candidates returns the tables a helper table named name may belong to
// by the first rule of res that matches it: the rule's first group and,
// when more underscores stand before the group than the one a helper's
// name begins with, the group with those underscores in front of it,
// longest first. pt-online-schema-change names the copy of T _T_new, or
// __T_new when that name is taken, so __orders_new is the copy of
// _orders, or of orders (whose earlier copy is still there); the rule
// '^_+(.+)_new$' names orders only.
func candidates(res []*regexp.Regexp, name string) []string {
	for _, re := range res {
		m := re.FindStringSubmatchIndex(name)
		if m == nil || m[2] < 0 || m[3] <= m[2] {
			continue
		}
		start := m[2]
		for start > 1 && name[start-1] == '_' {
			start--
		}
		out := make([]string, 0, m[2]-start+1)
		for i := start; i <= m[2]; i++ {
			out = append(out, name[i:m[3]])
		}
		return out
	}
	return nil
}

// ShadowCandidates returns the tables a shadow table may be the copy of
// (see candidates), longest first; none when it is no shadow. The
// tracker takes the first one it has.
func (r *OnlineRules) ShadowCandidates(table string) []string {
	if r == nil {
		return nil
	}
	return candidates(r.shadow, table)
}

// HelperCandidates returns the tables a helper table (shadow or trash)
// may belong to, longest first; none when it is no helper.
func (r *OnlineRules) HelperCandidates(table string) []string {
	if r == nil {
		return nil
	}
	if c := candidates(r.shadow, table); c != nil {
		return c
	}
	return candidates(r.trash, table)
}

// ShadowOf returns the table a shadow table is the copy of.
func (r *OnlineRules) ShadowOf(table string) (string, bool) {
	if r == nil {
		return "", false
	}
	return firstGroup(r.shadow, table)
}

// HelperOf returns the table a helper table (shadow or trash) belongs to.
func (r *OnlineRules) HelperOf(table string) (string, bool) {
	if r == nil {
		return "", false
	}
	if t, ok := firstGroup(r.shadow, table); ok {
		return t, true
	}
	return firstGroup(r.trash, table)
}

// Helper reports whether table is a helper table: its rows and its DDL
// never reach the stream.
func (r *OnlineRules) Helper(table string) bool {
	_, ok := r.HelperOf(table)
	return ok
}

// OnlineSwap is a migration whose shadow took its table's name at a DDL:
// what that DDL does to the table, as the migration's own DDL.
type OnlineSwap struct {
	change.OnlineMigration
}

// ALTER returns the DDL the migration ran on its shadow as its table's:
// the statements with the shadow's name replaced by the table's
// (qualified), in the sql_mode of the first. Several statements become
// one ALTER TABLE with their specifications in order, as DM does, so
// that the swap is one statement the shard-DDL merge can match across
// shard tables (combinedALTER); those that cannot (a CREATE INDEX, a
// specification other than of columns and indexes, two statements
// naming the same column or index, whose order one ALTER would not
// keep, sql_modes that differ) are joined by "; " instead. ok is false
// when none was seen (reading started in the middle of the migration).
func (w OnlineSwap) ALTER() (db, sql string, mode SQLMode, ok bool) {
	if len(w.DDL) == 0 {
		return "", "", 0, false
	}
	rename := func(s, t string) (string, string) {
		if s == w.Schema && t == w.Shadow {
			return w.Schema, w.Table
		}
		return s, t
	}
	var texts []string
	mode = SQLMode(w.DDL[0].SQLMode)
	oneMode := true
	for _, st := range w.DDL {
		lds, err := ShardDDL(st.DB, st.SQL, SQLMode(st.SQLMode), rename)
		if err != nil {
			return "", "", 0, false // it parsed when it was recorded
		}
		for _, ld := range lds {
			texts = append(texts, ld.Text)
		}
		oneMode = oneMode && SQLMode(st.SQLMode) == mode
	}
	if len(texts) == 0 {
		return "", "", 0, false
	}
	if oneMode {
		if one, ok := combinedALTER(texts, mode); ok {
			return w.Schema, one, mode, true
		}
	}
	return w.Schema, strings.Join(texts, "; "), mode, true
}

// combinedALTER is the ALTER TABLE statements texts (each one statement
// of the same table, under mode) as one: the first's text, then the
// specifications of each of the others, after a comma. ok is false when
// they cannot be one: a statement that is no ALTER TABLE of columns and
// indexes, or a column or index named by two of them (ADD COLUMN c, then
// MODIFY COLUMN c, fails as one ALTER: its specifications all see the
// table as it was).
func combinedALTER(texts []string, mode SQLMode) (string, bool) {
	if len(texts) == 1 {
		return texts[0], true
	}
	out := trimStatement(texts[0], mode)
	named := map[string]int{} // column or index name → the statement naming it
	for i, text := range texts {
		stmts, perr := ddlParse(text, mode)
		if perr != nil || len(stmts) != 1 {
			return "", false
		}
		n, ok := stmts[0].node.(*ast.AlterTableStmt)
		if !ok || len(n.Specs) == 0 {
			return "", false
		}
		for _, sp := range n.Specs {
			names, ok := specNames(sp)
			if !ok {
				return "", false
			}
			for _, name := range names {
				if j, seen := named[name]; seen && j != i {
					return "", false
				}
				named[name] = i
			}
		}
		if i == 0 {
			continue
		}
		specs, ok := alterSpecsText(text, mode)
		if !ok {
			return "", false
		}
		out += ", " + specs
	}
	return out, true
}

// specNames names the columns ("c:name") and indexes ("i:name") an ALTER
// TABLE specification adds, drops, changes or refers to; ok is false for
// a specification that is not of columns or indexes.
func specNames(sp *ast.AlterTableSpec) (names []string, ok bool) {
	col := func(c *ast.ColumnName) {
		if c != nil {
			names = append(names, "c:"+c.Name.L)
		}
	}
	index := func(name string) {
		if name != "" {
			names = append(names, "i:"+strings.ToLower(name))
		}
	}
	switch sp.Tp {
	case ast.AlterTableAddColumns, ast.AlterTableModifyColumn, ast.AlterTableChangeColumn, ast.AlterTableAlterColumn,
		ast.AlterTableDropColumn, ast.AlterTableRenameColumn:
		for _, c := range sp.NewColumns {
			col(c.Name)
		}
		col(sp.OldColumnName)
		col(sp.NewColumnName)
		if sp.Position != nil {
			col(sp.Position.RelativeColumn)
		}
	case ast.AlterTableAddConstraint:
		c := sp.Constraint
		if c == nil || c.Tp == ast.ConstraintCheck || c.Tp == ast.ConstraintForeignKey {
			return nil, false
		}
		index(c.Name)
		if c.Tp == ast.ConstraintPrimaryKey {
			index("primary")
		}
		for _, k := range c.Keys {
			col(k.Column)
		}
	case ast.AlterTableDropIndex:
		index(sp.Name)
	case ast.AlterTableDropPrimaryKey:
		index("primary")
	case ast.AlterTableRenameIndex:
		index(sp.FromKey.O)
		index(sp.ToKey.O)
	default:
		return nil, false
	}
	return names, true
}

// alterSpecsText is the text of an ALTER TABLE statement after its
// table's name: its specifications as written, up to its last token.
func alterSpecsText(text string, mode SQLMode) (string, bool) {
	t := lexAll(text, mode)
	i := 0
	for i < len(t.toks) && !t.is(i, "TABLE") {
		i++
	}
	i++
	if t.is(i, "IF") && t.is(i+1, "EXISTS") {
		i += 2
	}
	if t.is(i+1, ".") {
		i += 2 // schema.table
	}
	last := len(t.toks) - 1
	if t.is(last, ";") {
		last--
	}
	if k := t.kind(i); k != ddlWord && k != ddlQuoted || last <= i {
		return "", false
	}
	return strings.TrimSpace(text[t.toks[i].end:t.toks[last].end]), true
}

// trimStatement is text without what follows its last token (a ';',
// spaces, a comment), so that more can be appended to it.
func trimStatement(text string, mode SQLMode) string {
	t := lexAll(text, mode)
	last := len(t.toks) - 1
	if t.is(last, ";") {
		last--
	}
	if last < 0 {
		return text
	}
	return text[:t.toks[last].end]
}

func lexAll(text string, mode SQLMode) ddlToks {
	l := ddlLexer{src: text, quiet: true, mode: mode}
	t := ddlToks{src: text}
	for {
		tok, ok := l.next()
		if !ok {
			return t
		}
		t.toks = append(t.toks, tok)
	}
}

// DiffALTER returns one ALTER TABLE of db.table that takes its columns
// from before's to after's: what a swap whose own DDL was not seen
// (reading started after the copy was altered) did, as far as the
// schema model tells. Columns added (ADD COLUMN, at their place),
// dropped (DROP COLUMN) or whose type or nullability changed (MODIFY
// COLUMN) are in it, each with the type as declared; defaults, comments,
// charsets and indexes are not, for the model does not keep them. ok is
// false when the columns are the same (or only their order differs), or
// when some are dropped and others added: that may be a column renamed,
// which a DROP and an ADD would turn into the loss of its values.
func DiffALTER(db, table string, before, after *change.Table) (string, bool) {
	if before == nil || after == nil {
		return "", false
	}
	q := func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
	def := func(c change.Column) string {
		null := " NULL"
		if !c.Nullable {
			null = " NOT NULL"
		}
		return q(c.Name) + " " + c.RawType + null
	}
	find := func(t *change.Table, name string) int {
		return slices.IndexFunc(t.Columns, func(c change.Column) bool { return strings.EqualFold(c.Name, name) })
	}
	var drops, adds, modifies []string
	for _, c := range before.Columns {
		if find(after, c.Name) < 0 {
			drops = append(drops, "DROP COLUMN "+q(c.Name))
		}
	}
	for i, c := range after.Columns {
		j := find(before, c.Name)
		switch {
		case j < 0 && i == 0:
			adds = append(adds, "ADD COLUMN "+def(c)+" FIRST")
		case j < 0:
			adds = append(adds, "ADD COLUMN "+def(c)+" AFTER "+q(after.Columns[i-1].Name))
		case before.Columns[j].RawType != c.RawType || before.Columns[j].Nullable != c.Nullable:
			modifies = append(modifies, "MODIFY COLUMN "+def(c))
		}
	}
	if len(drops) > 0 && len(adds) > 0 {
		return "", false
	}
	specs := slices.Concat(drops, modifies, adds)
	if len(specs) == 0 {
		return "", false
	}
	return "ALTER TABLE " + q(db) + "." + q(table) + " " + strings.Join(specs, ", "), true
}

// keptSwapped is how many ended migrations a tracker keeps, for a reader
// restored from before their swap.
const keptSwapped = 8

// SetOnlineRules sets the rules that recognise helper tables; nil stops
// recognising them (migrations already known are kept).
func (s *Tracker) SetOnlineRules(r *OnlineRules) { s.online = r }

// OnlineSwaps returns the migrations the DDL ApplyDDL applied at pos
// swapped in.
func (s *Tracker) OnlineSwaps(pos change.Position) []OnlineSwap {
	if pos.IsZero() || s.onlineAt != pos {
		return nil
	}
	return s.swaps
}

// OnlineChanged reports whether the DDL ApplyDDL applied at pos started,
// extended, swapped or abandoned a migration: the history to save has
// changed even when no table has.
func (s *Tracker) OnlineChanged(pos change.Position) bool {
	return !pos.IsZero() && s.onlineAt == pos
}

// Migrations returns the migrations under way (not the ended ones).
func (s *Tracker) Migrations() []change.OnlineMigration {
	var out []change.OnlineMigration
	for _, m := range s.migrations {
		if m.Swapped.IsZero() {
			out = append(out, cloneMigration(m))
		}
	}
	return out
}

func cloneMigration(m change.OnlineMigration) change.OnlineMigration {
	m.DDL = slices.Clone(m.DDL)
	return m
}

func cloneMigrations(ms []change.OnlineMigration) []change.OnlineMigration {
	if len(ms) == 0 {
		return nil
	}
	out := make([]change.OnlineMigration, len(ms))
	for i, m := range ms {
		out[i] = cloneMigration(m)
	}
	return out
}

// onlineTxn stages one query event's effect on the migrations.
type onlineTxn struct {
	migs    []change.OnlineMigration
	swaps   []OnlineSwap
	changed bool
}

// active returns the index of the migration under way whose shadow (or,
// with byTable, whose table) is k, or -1.
func (o *onlineTxn) active(k schemaKey, byTable bool) int {
	return slices.IndexFunc(o.migs, func(m change.OnlineMigration) bool {
		name := m.Shadow
		if byTable {
			name = m.Table
		}
		return m.Swapped.IsZero() && m.Schema == k.schema && name == k.name
	})
}

func (o *onlineTxn) drop(i int) {
	o.migs = slices.Delete(o.migs, i, i+1)
	o.changed = true
}

// onlineStmt records what statement st, at pos, does to the migrations.
func (x *schemaTxn) onlineStmt(st ddlStmt, pos change.Position, mode SQLMode) {
	r := x.s.online
	if r == nil && len(x.s.migrations) == 0 {
		return
	}
	if x.on == nil {
		x.on = &onlineTxn{migs: cloneMigrations(x.s.migrations)}
	}
	o := x.on
	record := func(k schemaKey) {
		if i := o.active(k, false); i >= 0 {
			o.migs[i].DDL = append(o.migs[i].DDL, change.OnlineStatement{Pos: pos, DB: x.db, SQL: st.text, SQLMode: uint64(mode)})
			o.changed = true
		}
	}
	switch n := st.node.(type) {
	case *ast.CreateTableStmt:
		k := ddlName(x.db, n.Table)
		cands := r.ShadowCandidates(k.name)
		if len(cands) == 0 || n.TemporaryKeyword != ast.TemporaryNone {
			return
		}
		// The copy of the table the model has, if one of the names it
		// may be the copy of is one (the longest, when several are).
		table := cands[len(cands)-1]
		for _, c := range cands {
			if _, ok := x.s.Table(k.schema, c); ok {
				table = c
				break
			}
		}
		if i := o.active(schemaKey{k.schema, table}, true); i >= 0 {
			o.drop(i) // a new copy: the tool started over
		}
		o.migs = append(o.migs, change.OnlineMigration{Schema: k.schema, Table: table, Shadow: k.name, Since: pos})
		o.changed = true
	case *ast.AlterTableStmt:
		k := ddlName(x.db, n.Table)
		for _, sp := range n.Specs {
			if sp.Tp == ast.AlterTableRenameTable {
				o.rename(r, k, ddlName(x.db, sp.NewTable), pos, x.s)
				return
			}
		}
		record(k)
	case *ast.CreateIndexStmt:
		record(ddlName(x.db, n.Table))
	case *ast.DropIndexStmt:
		record(ddlName(x.db, n.Table))
	case *ast.RenameTableStmt:
		for _, tt := range n.TableToTables {
			o.rename(r, ddlName(x.db, tt.OldTable), ddlName(x.db, tt.NewTable), pos, x.s)
		}
	case *ast.DropTableStmt:
		if n.IsView || n.TemporaryKeyword != ast.TemporaryNone {
			return
		}
		for _, tn := range n.Tables {
			if i := o.active(ddlName(x.db, tn), false); i >= 0 {
				o.drop(i) // abandoned: the copy is gone without a swap
			}
		}
	case *ast.DropDatabaseStmt:
		for i := len(o.migs) - 1; i >= 0; i-- {
			if o.migs[i].Schema == n.Name.O {
				o.drop(i)
			}
		}
	}
}

// rename is one RENAME of from to to: a shadow taking its table's name is
// the swap; a shadow renamed elsewhere abandons its migration. A table
// the rules name a shadow of to, taking to's name in the statement that
// renames to away (the table s had before it), is the swap of a
// migration begun before reading did: one without its DDL.
func (o *onlineTxn) rename(r *OnlineRules, from, to schemaKey, pos change.Position, s *Tracker) {
	i := o.active(from, false)
	if i < 0 {
		if _, existed := s.Table(to.schema, to.name); existed && from.schema == to.schema && slices.Contains(r.ShadowCandidates(from.name), to.name) {
			o.swaps = append(o.swaps, OnlineSwap{change.OnlineMigration{Schema: to.schema, Table: to.name, Shadow: from.name, Swapped: pos}})
			o.changed = true
		}
		return
	}
	m := &o.migs[i]
	if to.schema != m.Schema || to.name != m.Table {
		o.drop(i)
		return
	}
	m.Swapped = pos
	o.swaps = append(o.swaps, OnlineSwap{cloneMigration(*m)})
	o.changed = true
}

// commitOnline applies a query event's staged migrations at pos.
func (s *Tracker) commitOnline(x *schemaTxn, pos change.Position) {
	o := x.on
	if o == nil || !o.changed {
		return
	}
	// Keep the last keptSwapped ended migrations, by where they ended.
	var ended []int
	for i, m := range o.migs {
		if !m.Swapped.IsZero() {
			ended = append(ended, i)
		}
	}
	if len(ended) > keptSwapped {
		slices.SortFunc(ended, func(a, b int) int { return o.migs[a].Swapped.Compare(o.migs[b].Swapped) })
		drop := map[int]bool{}
		for _, i := range ended[:len(ended)-keptSwapped] {
			drop[i] = true
		}
		kept := o.migs[:0]
		for i, m := range o.migs {
			if !drop[i] {
				kept = append(kept, m)
			}
		}
		o.migs = kept
	}
	slices.SortStableFunc(o.migs, func(a, b change.OnlineMigration) int {
		return strings.Compare(a.Schema+"\x00"+a.Table, b.Schema+"\x00"+b.Table)
	})
	s.migrations = o.migs
	s.onlineAt = pos
	s.swaps = o.swaps
}

// migrationsAt is migrations as they were at pos (see SnapshotAt):
// those begun later are gone, the DDL run from pos on is left out, and a
// swap at or after pos is undone.
func migrationsAt(ms []change.OnlineMigration, pos change.Position) []change.OnlineMigration {
	var out []change.OnlineMigration
	for _, m := range ms {
		if m.Since.Compare(pos) >= 0 {
			continue
		}
		m = cloneMigration(m)
		m.DDL = slices.DeleteFunc(m.DDL, func(st change.OnlineStatement) bool { return st.Pos.Compare(pos) >= 0 })
		if !m.Swapped.IsZero() && m.Swapped.Compare(pos) >= 0 {
			m.Swapped = change.Position{}
		}
		out = append(out, m)
	}
	return out
}

// TableRename is one table a statement renames, each name "schema.table".
type TableRename struct{ From, To string }

// RenamedTables returns the tables a DDL statement run with default
// database db under mode renames (RENAME TABLE, ALTER TABLE … RENAME
// TO), in order; none for any other statement or text it cannot parse.
func RenamedTables(db, sql string, mode SQLMode) []TableRename {
	stmts, perr := ddlParse(sql, mode)
	if perr != nil {
		return nil
	}
	var out []TableRename
	for _, st := range stmts {
		switch n := st.node.(type) {
		case *ast.RenameTableStmt:
			for _, tt := range n.TableToTables {
				out = append(out, TableRename{ddlName(db, tt.OldTable).String(), ddlName(db, tt.NewTable).String()})
			}
		case *ast.AlterTableStmt:
			for _, sp := range n.Specs {
				if sp.Tp == ast.AlterTableRenameTable {
					out = append(out, TableRename{ddlName(db, n.Table).String(), ddlName(db, sp.NewTable).String()})
				}
			}
		}
	}
	return out
}
