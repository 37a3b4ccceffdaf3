package schema

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
)

// A shard table's DDL as its logical table's: the first piece of merging
// shard DDL (issue 20). ShardDDL rewrites the names a statement gives its
// tables to the logical ones a route maps them to, keeping the statement's
// own text (its MariaDB or MySQL syntax) otherwise, and gives it a Key: a
// canonical form in which two shards' statements that do the same to the
// logical table are equal, whatever their names, spacing, letter case of
// keywords and identifiers, or quoting.

// LogicalDDL is one table DDL statement of a shard, as its logical
// table's.
type LogicalDDL struct {
	// Text is the statement with each table name the rename maps
	// replaced by its logical, schema-qualified name.
	Text string
	// Key is the statement's canonical form after the rename: equal for
	// equivalent statements of different shard tables.
	Key string
}

// Rename maps a shard table (schema, table) to its logical one.
type Rename func(schema, table string) (logicalSchema, logicalTable string)

// ShardDDL rewrites the table DDL statements of sql, run with default
// database db, to logical names (see LogicalDDL); statements that are not
// table DDL are left out. SQL it cannot parse returns an error wrapping
// ErrDDLParse.
func ShardDDL(db, sql string, rename Rename) ([]LogicalDDL, error) {
	stmts, perr := ddlParse(sql)
	if perr != nil {
		return nil, perr.wrap(fmt.Sprintf("(db %q)", db))
	}
	out := make([]LogicalDDL, 0, len(stmts))
	for _, st := range stmts {
		names := map[schemaKey]schemaKey{}
		st.node.Accept(&tableRenamer{db: db, rename: rename, renamed: names})
		var key strings.Builder
		flags := format.DefaultRestoreFlags | format.RestoreNameLowercase | format.RestoreKeyWordUppercase
		if err := st.node.Restore(format.NewRestoreCtx(flags, &key)); err != nil {
			return nil, fmt.Errorf("%w (db %q): cannot restore %q: %v", ErrDDLParse, db, ddlClip(st.text), err)
		}
		out = append(out, LogicalDDL{Text: renameTokens(db, st.text, names), Key: key.String()})
	}
	return out, nil
}

// tableRenamer sets each table name of a statement to its logical name,
// recording the renames it made (shard name → logical name).
type tableRenamer struct {
	db      string
	rename  Rename
	renamed map[schemaKey]schemaKey
}

func (r *tableRenamer) Enter(n ast.Node) (ast.Node, bool) {
	tn, ok := n.(*ast.TableName)
	if !ok {
		return n, false
	}
	from := ddlName(r.db, tn)
	s, t := r.rename(from.schema, from.name)
	to := schemaKey{s, t}
	r.renamed[from] = to
	tn.Schema, tn.Name = ast.NewCIStr(s), ast.NewCIStr(t)
	return n, true
}

func (r *tableRenamer) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// renameTokens replaces, in one statement's text, the table names that
// renamed maps: a qualified name `schema`.`table` wherever it stands, a
// bare one where a table name goes (after TABLE, TABLES, INDEX … ON, TO,
// LIKE, REFERENCES, or a comma in a list of them), each by the logical
// name, qualified and quoted.
func renameTokens(db, text string, renamed map[schemaKey]schemaKey) string {
	l := ddlLexer{src: text, quiet: true}
	var t ddlToks
	t.src = text
	for {
		tok, ok := l.next()
		if !ok {
			break
		}
		t.toks = append(t.toks, tok)
	}
	ident := func(i int) (string, bool) {
		switch t.kind(i) {
		case ddlWord:
			return t.text(i), true
		case ddlQuoted:
			return strings.ReplaceAll(ddlUnquote(t.text(i)), "``", "`"), true
		}
		return "", false
	}
	quote := func(k schemaKey) string {
		q := func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
		return q(k.schema) + "." + q(k.name)
	}
	var edits []ddlEdit
	listed := false // after TABLE(S): a comma at depth 0 starts another name
	depth := 0
	for i := 0; i < len(t.toks); i++ {
		switch {
		case t.is(i, "TABLE"), t.is(i, "TABLES"):
			listed = true
		case t.is(i, "("):
			depth++
		case t.is(i, ")"):
			depth--
		}
		name, ok := ident(i)
		if !ok {
			continue
		}
		if t.is(i+1, ".") {
			if tbl, ok := ident(i + 2); ok {
				if to, ok := renamed[schemaKey{name, tbl}]; ok {
					edits = append(edits, ddlEdit{t.toks[i].start, t.toks[i+2].end, quote(to)})
				}
				i += 2
				continue
			}
		}
		prev := i - 1
		for t.is(prev, "EXISTS") || t.is(prev, "NOT") || t.is(prev, "IF") {
			prev--
		}
		atName := t.is(prev, "TABLE") || t.is(prev, "TABLES") || t.is(prev, "ON") || t.is(prev, "TO") ||
			t.is(prev, "LIKE") || t.is(prev, "REFERENCES") || (listed && depth == 0 && t.is(prev, ","))
		if !atName {
			continue
		}
		if to, ok := renamed[schemaKey{db, name}]; ok {
			edits = append(edits, ddlEdit{t.toks[i].start, t.toks[i].end, quote(to)})
		}
	}
	return ddlSplice(text, 0, len(text), edits)
}
