package mysql

import (
	"fmt"
	"slices"
	"strings"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

type statementKey struct {
	t    *change.Table
	kind byte // 'i' insert, 'u' upsert, 'r' replace, 'd' delete
}

// valuesStatement is INSERT INTO table of cs's after-images, one VALUES
// row each, then tail.
func (t *Target) valuesStatement(tv *change.Table, table string, cs []sink.Change, tail string) (string, []any) {
	one := t.statement(tv, 'u', table)
	head := one[:strings.Index(one, " ON DUPLICATE KEY UPDATE ")]
	values := head[strings.LastIndex(head, " VALUES ")+len(" VALUES "):]
	var b strings.Builder
	b.Grow(len(head) + (len(values)+2)*len(cs) + len(tail))
	b.WriteString(head)
	args := make([]any, 0, len(cs)*(len(tv.Columns)+1))
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
			b.WriteString(values)
		}
		args = append(args, c.After...)
		if t.spec.OriginColumn != "" {
			args = append(args, c.Source+"/"+c.Origin)
		}
	}
	b.WriteString(tail)
	return b.String(), args
}

// replaceStatement is REPLACE INTO table of cs's after-images, one
// VALUES row each: at least once, a change applied again may find a
// unique value of its after-image on another row, where the source had
// it later (a value moved between rows, a row whose key changed); REPLACE
// deletes every row it conflicts with, on any unique key, and inserts,
// which ON DUPLICATE KEY UPDATE, changing one row, fails on (1062). The
// rows deleted so come back with the later changes that gave them the
// value, which the replay applies after it.
func (t *Target) replaceStatement(tv *change.Table, table string, cs []sink.Change) (string, []any) {
	q, args := t.valuesStatement(tv, table, cs, "")
	return "REPLACE" + strings.TrimPrefix(q, "INSERT"), args
}

// updateList is the ON DUPLICATE KEY UPDATE list of tv's columns.
func (t *Target) updateList(tv *change.Table, table string) string {
	one := t.statement(tv, 'u', table)
	return one[strings.Index(one, " ON DUPLICATE KEY UPDATE ")+len(" ON DUPLICATE KEY UPDATE "):]
}

// deleteStatement deletes cs's rows by key (with the origin column, each
// row's shard table's): one IN list for a one-column key, else ORs.
func (t *Target) deleteStatement(tv *change.Table, table string, cs []sink.Change) (string, []any) {
	idx := sink.KeyColumns(tv)
	oc := t.spec.OriginColumn
	var b strings.Builder
	b.WriteString("DELETE FROM ")
	b.WriteString(table)
	b.WriteString(" WHERE ")
	args := make([]any, 0, len(cs)*(len(idx)+1))
	if len(idx) == 1 && oc == "" {
		b.WriteString(quote(tv.Columns[idx[0]].Name))
		b.WriteString(" IN (")
		for i, c := range cs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			args = append(args, c.Before[idx[0]])
		}
		b.WriteByte(')')
		return b.String(), args
	}
	for i, c := range cs {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('(')
		for k, j := range idx {
			if k > 0 {
				b.WriteString(" AND ")
			}
			b.WriteString(quote(tv.Columns[j].Name))
			b.WriteString(" = ?")
			args = append(args, c.Before[j])
		}
		if oc != "" {
			b.WriteString(" AND ")
			b.WriteString(quote(oc))
			b.WriteString(" = ?")
			args = append(args, c.Source+"/"+c.Origin)
		}
		b.WriteByte(')')
	}
	return b.String(), args
}

// hasKey reports whether tv has a primary key.
func hasKey(tv *change.Table) bool {
	return slices.ContainsFunc(tv.Columns, func(c change.Column) bool { return c.Key })
}

// statement is the upsert or delete of rows of table version tv into table.
func (t *Target) statement(tv *change.Table, kind byte, table string) string {
	k := statementKey{tv, kind}
	if s, ok := t.stmts.Load(k); ok {
		return s.(string)
	}
	var b strings.Builder
	switch kind {
	case 'i', 'u', 'r':
		cols := make([]string, len(tv.Columns))
		set := make([]string, len(tv.Columns))
		for i, c := range tv.Columns {
			cols[i] = quote(c.Name)
			set[i] = cols[i] + " = VALUES(" + cols[i] + ")"
		}
		if oc := t.spec.OriginColumn; oc != "" {
			cols = append(cols, quote(oc))
		}
		verb := "INSERT"
		if kind == 'r' {
			verb = "REPLACE"
		}
		fmt.Fprintf(&b, "%s INTO %s (%s) VALUES (%s)", verb, table, strings.Join(cols, ", "), strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
		if kind == 'u' {
			b.WriteString(" ON DUPLICATE KEY UPDATE " + strings.Join(set, ", "))
		}
	case 'd':
		var where []string
		for _, i := range sink.KeyColumns(tv) {
			where = append(where, quote(tv.Columns[i].Name)+" <=> ?")
		}
		if oc := t.spec.OriginColumn; oc != "" {
			where = append(where, quote(oc)+" = ?")
		}
		fmt.Fprintf(&b, "DELETE FROM %s WHERE %s LIMIT 1", table, strings.Join(where, " AND "))
	}
	s := b.String()
	t.stmts.Store(k, s)
	return s
}
