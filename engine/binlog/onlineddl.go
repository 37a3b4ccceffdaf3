package binlog

import (
	"strings"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/spec"
)

// Online schema changes (gh-ost, pt-online-schema-change; spec
// online_ddl) as the reader emits them. The helper tables (the shadow
// copy, the old table swapped out, gh-ost's changelog) are left out of
// the selection (withoutHelpers): their rows are never decoded, their
// CREATE, ALTER and DROP never emitted, and no announcement counts them
// as shard tables. They stay in the schema model (modelled), so that the
// table a copy becomes at the swap has the copy's columns, and the
// tracker keeps each migration's DDL in the snapshot saved with the
// cursor. At the swap, the RENAME goes out as the ALTER the tool ran on
// the copy, rewritten to the real table's name (onlineDDL): from there
// on it is a DDL like any other, merged across shards by package group.

// withoutHelpers is the table selection without the helper tables r
// recognises.
func withoutHelpers(f *spec.TableFilter, r *schema.OnlineRules) *spec.TableFilter {
	if r == nil {
		return f
	}
	return f.Without(func(_, table string) bool { return r.Helper(table) })
}

// modelled reports whether the schema model loads schema.table at the
// start: a selected table, or a helper table of one (reading may start in
// the middle of a migration: the copy's columns are the table's after the
// swap).
func (p *Reader) modelled(schemaName, table string) bool {
	if p.filter.Match(schemaName, table) {
		return true
	}
	for _, real := range p.cfg.OnlineDDL.HelperCandidates(table) {
		if p.filter.Match(schemaName, real) {
			return true
		}
	}
	return false
}

// onlineDDL returns the DDL to emit for ddl, the DDL event at pos whose
// selected tables are ddl.Tables: ddl itself, or, when the event swapped
// migrations in, the ALTER each ran on its copy, as the real table's.
// A swap whose DDL braid did not see (reading started after the copy was
// altered) emits, with a warning, the ALTER derived from the table's
// columns before and after it (schema.DiffALTER), if they differ; when
// none can be derived, nothing goes out for its table: its rows carry
// its new columns from there on.
func (p *Reader) onlineDDL(pos change.Position, ddl *change.DDL) *change.DDL {
	swaps := p.schema.OnlineSwaps(pos)
	if len(swaps) == 0 {
		return ddl
	}
	var tables, texts []string
	out := &change.DDL{}
	for _, w := range swaps {
		name := w.Schema + "." + w.Table
		if !p.filter.Match(w.Schema, w.Table) {
			continue
		}
		db, sql, mode, ok := w.ALTER()
		if !ok {
			before, _ := p.schema.TableBefore(w.Schema, w.Table, pos)
			after, _ := p.schema.Table(w.Schema, w.Table)
			if sql, ok = schema.DiffALTER(w.Schema, w.Table, before, after); !ok {
				p.log.Warn("online schema change swapped in without its DDL (reading started after the copy was altered): no ALTER goes out for the table; its rows carry the new columns",
					"pos", pos.String(), "table", name, "shadow", w.Shadow)
				continue
			}
			db, mode = w.Schema, 0
			p.log.Warn("online schema change swapped in without its DDL (reading started after the copy was altered): the ALTER that goes out is derived from the table's columns before and after, without defaults, comments or indexes",
				"pos", pos.String(), "table", name, "shadow", w.Shadow, "sql", sql)
		}
		if len(texts) == 0 {
			out.Schema, out.SQLMode = db, uint64(mode)
		}
		tables = append(tables, name)
		texts = append(texts, sql)
		p.log.Info("online schema change swapped in: its DDL goes out as the table's", "pos", pos.String(), "table", name, "shadow", w.Shadow,
			"since", w.Since.String(), "sql", strings.Join(strings.Fields(sql), " "))
	}
	// The swap is the tool's step, not a rename of the table: with no
	// DDL to stand for it, nothing goes out.
	if len(tables) == 0 {
		return &change.DDL{Schema: ddl.Schema, SQL: ddl.SQL, SQLMode: ddl.SQLMode}
	}
	out.SQL, out.Tables = strings.Join(texts, "; "), tables
	return out
}
