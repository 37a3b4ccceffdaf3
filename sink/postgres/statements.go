package postgres

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// stmtKey names the statements of one table version into one target
// table.
type stmtKey struct {
	tv    *change.Table
	table string
}

// tableStmts are the statements of one table version into one target
// table, and how its values are converted.
type tableStmts struct {
	table   string   // quoted
	cols    []string // quoted, the origin column last when there is one
	key     []int    // the key columns' indexes in the table version
	keyless bool     // no primary key: rows are matched by every column
	// unique holds the columns' indexes of each unique key of tv other
	// than the primary key (change.Table.Unique).
	unique  [][]int
	origin  bool
	set     string // the upsert's ON CONFLICT clause
	columns []change.Column
	sqls    sync.Map // sqlKey → string

	// stageTable is the staging table's name (copy.go), merge the
	// statement that upserts its rows into the target.
	stageTable, merge string

	typesMu sync.Mutex
	bytea   []bool   // by column of cols: the target's is bytea (loadTypes)
	oids    []uint32 // by column of cols: the target's type (loadTypes)
	binary  bool     // every column's type has a binary COPY encoding (copybin.go)

	rowBytes atomic.Int64 // a row's bytes in the last binary COPY data, plus one
}

type sqlKey struct {
	kind   byte
	rows   int
	unique int // the unique key of kind 'x'
}

// statements returns the statements of tv into the target of logical.
func (t *Target) statements(tv *change.Table, logical string) *tableStmts {
	table := t.target(logical)
	k := stmtKey{tv, table}
	if s, ok := t.stmts.Load(k); ok {
		return s.(*tableStmts)
	}
	ts := &tableStmts{table: table, key: sink.KeyColumns(tv), keyless: keyless(tv), origin: t.spec.OriginColumn != "", columns: tv.Columns}
	for _, c := range tv.Columns {
		ts.cols = append(ts.cols, columnName(c.Name))
	}
	for _, u := range tv.Unique {
		var idx []int
		for _, name := range u {
			i := slices.IndexFunc(tv.Columns, func(c change.Column) bool { return strings.EqualFold(c.Name, name) })
			if i < 0 {
				idx = nil
				break
			}
			idx = append(idx, i)
		}
		if idx != nil {
			ts.unique = append(ts.unique, idx)
		}
	}
	var conflict, set []string
	if ts.origin {
		oc := columnName(t.spec.OriginColumn)
		ts.cols = append(ts.cols, oc)
		conflict = append(conflict, oc)
	}
	for _, i := range ts.key {
		conflict = append(conflict, ts.cols[i])
	}
	for i, c := range tv.Columns {
		if !c.Key {
			set = append(set, ts.cols[i]+" = EXCLUDED."+ts.cols[i])
		}
	}
	if len(set) == 0 {
		ts.set = " ON CONFLICT (" + strings.Join(conflict, ", ") + ") DO NOTHING"
	} else {
		ts.set = " ON CONFLICT (" + strings.Join(conflict, ", ") + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	ts.stageTable = stageName(ts)
	ts.merge = mergeSQL(ts)
	s, _ := t.stmts.LoadOrStore(k, ts)
	return s.(*tableStmts)
}

// keyless reports whether tv has no primary key (nor a unique key the
// schema model took for one).
func keyless(tv *change.Table) bool {
	for _, c := range tv.Columns {
		if c.Key {
			return false
		}
	}
	return true
}

// sql is the statement of kind for rows rows:
//
//	'i' INSERT of rows rows
//	'u' upsert of rows rows, answering how many it inserted
//	'd' DELETE of rows keys
//	'k' DELETE of one row equal to every value given (a keyless table)
func (ts *tableStmts) sql(kind byte, rows int) string {
	k := sqlKey{kind: kind, rows: rows}
	if s, ok := ts.sqls.Load(k); ok {
		return s.(string)
	}
	var b strings.Builder
	n := 0
	param := func() string { n++; return fmt.Sprintf("$%d", n) }
	tuple := func(width int) {
		b.WriteByte('(')
		for i := range width {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(param())
		}
		b.WriteByte(')')
	}
	switch kind {
	case 'i', 'u':
		if kind == 'u' {
			b.WriteString("WITH r AS (")
		}
		fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", ts.table, strings.Join(ts.cols, ", "))
		for r := range rows {
			if r > 0 {
				b.WriteString(", ")
			}
			tuple(len(ts.cols))
		}
		if kind == 'u' {
			b.WriteString(ts.set)
			b.WriteString(" RETURNING xmax = 0 AS inserted) SELECT count(*) FILTER (WHERE inserted) FROM r")
		}
	case 'd':
		var key []string
		for _, i := range ts.key {
			key = append(key, ts.cols[i])
		}
		if ts.origin {
			key = append(key, ts.cols[len(ts.cols)-1])
		}
		fmt.Fprintf(&b, "DELETE FROM %s WHERE (%s) IN (", ts.table, strings.Join(key, ", "))
		for r := range rows {
			if r > 0 {
				b.WriteString(", ")
			}
			tuple(len(key))
		}
		b.WriteByte(')')
	case 'k':
		var where []string
		for _, c := range ts.cols {
			where = append(where, c+" IS NOT DISTINCT FROM "+param())
		}
		fmt.Fprintf(&b, "DELETE FROM %s WHERE ctid = (SELECT ctid FROM %s WHERE %s LIMIT 1)", ts.table, ts.table, strings.Join(where, " AND "))
	}
	s := b.String()
	ts.sqls.Store(k, s)
	return s
}

// uniqueDelete is the DELETE, before an upsert of cs at least once, of
// the rows that hold one of their values of unique key u (with the
// origin column, of their shard table) under another primary key: a
// change applied again may find its value there, where the source had it
// later (a value moved between rows, a row whose key changed), and ON
// CONFLICT (key) DO UPDATE would fail on it. The rows deleted come back
// with the later changes that gave them the value, which are applied
// after it. A change whose value has a NULL conflicts with nothing;
// false when no change of cs has one without.
//
// cs's values of u are distinct (sink.Plan does not run two changes that
// touch one unique value into one run, unless the first moved it away
// first, which sink/postgres's pieces split), so the statement is
//
//	DELETE FROM t WHERE (u) IN ((u1), ...) AND (u, key) NOT IN ((u1, key1), ...)
func (ts *tableStmts) uniqueDelete(u int, cs []sink.Change) (string, []any, bool) {
	cols := ts.unique[u]
	var vals, keys []any
	n := 0
	for _, c := range cs {
		v := make([]any, 0, len(cols)+1)
		for _, i := range cols {
			v = append(v, pgValue(&ts.columns[i], c.After[i]))
		}
		if slices.Contains(v, nil) {
			continue
		}
		if ts.origin {
			v = append(v, c.Source+"/"+c.Origin)
		}
		vals = append(vals, v...)
		keys = append(keys, v...)
		for _, i := range ts.key {
			keys = append(keys, pgValue(&ts.columns[i], c.After[i]))
		}
		n++
	}
	if n == 0 {
		return "", nil, false
	}
	k := sqlKey{'x', n, u}
	if q, ok := ts.sqls.Load(k); ok {
		return q.(string), append(vals, keys...), true
	}
	var ucols, kcols []string
	for _, i := range cols {
		ucols = append(ucols, ts.cols[i])
	}
	if ts.origin {
		ucols = append(ucols, ts.cols[len(ts.cols)-1])
	}
	for _, i := range ts.key {
		kcols = append(kcols, ts.cols[i])
	}
	var b strings.Builder
	p := 0
	tuples := func(width int) {
		for r := range n {
			if r > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for i := range width {
				if i > 0 {
					b.WriteString(", ")
				}
				p++
				fmt.Fprintf(&b, "$%d", p)
			}
			b.WriteByte(')')
		}
	}
	fmt.Fprintf(&b, "DELETE FROM %s WHERE (%s) IN (", ts.table, strings.Join(ucols, ", "))
	tuples(len(ucols))
	fmt.Fprintf(&b, ") AND (%s, %s) NOT IN (", strings.Join(ucols, ", "), strings.Join(kcols, ", "))
	tuples(len(ucols) + len(kcols))
	b.WriteByte(')')
	q := b.String()
	ts.sqls.Store(k, q)
	return q, append(vals, keys...), true
}

// rowArgs are the after-images of cs, converted, each followed by its
// origin when the target has the column.
func (ts *tableStmts) rowArgs(cs []sink.Change) []any {
	args := make([]any, 0, len(cs)*len(ts.cols))
	for _, c := range cs {
		for i, v := range c.After {
			args = append(args, pgValue(&ts.columns[i], v))
		}
		if ts.origin {
			args = append(args, c.Source+"/"+c.Origin)
		}
	}
	return args
}

// keyArgs are the keys of cs (every column of a keyless table's), from
// the before-images when before is set, converted, each followed by its
// origin when the target has the column.
func (ts *tableStmts) keyArgs(cs []sink.Change, before bool) []any {
	var args []any
	for _, c := range cs {
		img := c.After
		if before {
			img = c.Before
		}
		if ts.keyless {
			for i, v := range img {
				args = append(args, pgValue(&ts.columns[i], v))
			}
		} else {
			for _, i := range ts.key {
				args = append(args, pgValue(&ts.columns[i], img[i]))
			}
		}
		if ts.origin {
			args = append(args, c.Source+"/"+c.Origin)
		}
	}
	return args
}
