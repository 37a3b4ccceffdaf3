package postgres

import (
	"fmt"
	"strings"
	"sync"

	"github.com/braid-cdc/braid/change"
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
	origin  bool
	set     string // the upsert's ON CONFLICT clause
	columns []change.Column
	sqls    sync.Map // sqlKey → string
}

type sqlKey struct {
	kind byte
	rows int
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
	k := sqlKey{kind, rows}
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
