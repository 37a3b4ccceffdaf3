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
	// SQLMode is the sql_mode Text means what it says under: the mode
	// the shard ran it with.
	SQLMode SQLMode
	// Key is the statement's canonical form after the rename: equal for
	// equivalent statements of different shard tables. Integer display
	// widths are left out (INT and INT(11) are one type).
	Key string
	// Kind is what the statement does to its table.
	Kind DDLKind
	// AddsColumns is set when the statement is an ALTER TABLE that only
	// adds columns, each nullable and without a default (so rows written
	// without them read them as NULL); DropsColumns when it only drops
	// columns.
	AddsColumns, DropsColumns bool
	// Columns names, in lower case, the columns an ALTER TABLE adds,
	// drops, changes or renames (by their old and new names).
	Columns []string
}

// DDLKind sorts table DDL by what it does to its table.
type DDLKind uint8

// The kinds.
const (
	DDLAlter  DDLKind = iota // ALTER TABLE, CREATE/DROP INDEX, anything else
	DDLCreate                // CREATE TABLE
	DDLDrop                  // DROP TABLE
	DDLRename                // RENAME TABLE
)

// Rename maps a shard table (schema, table) to its logical one.
type Rename func(schema, table string) (logicalSchema, logicalTable string)

// ShardDDL rewrites the table DDL statements of sql, run with default
// database db under mode, to logical names (see LogicalDDL); statements
// that are not table DDL are left out. Text keeps the statement's own
// text, so it means what it says under mode only. SQL it cannot parse
// returns an error wrapping ErrDDLParse.
func ShardDDL(db, sql string, mode SQLMode, rename Rename) ([]LogicalDDL, error) {
	stmts, perr := ddlParse(sql, mode)
	if perr != nil {
		return nil, perr.wrap(fmt.Sprintf("(db %q)", db))
	}
	out := make([]LogicalDDL, 0, len(stmts))
	for _, st := range stmts {
		names := map[schemaKey]schemaKey{}
		st.node.Accept(&tableRenamer{db: db, rename: rename, renamed: names})
		st.node.Accept(spellingEraser{})
		var key strings.Builder
		flags := format.DefaultRestoreFlags | format.RestoreNameLowercase | format.RestoreKeyWordUppercase
		if err := st.node.Restore(format.NewRestoreCtx(flags, &key)); err != nil {
			return nil, fmt.Errorf("%w (db %q): cannot restore %q: %v", ErrDDLParse, db, ddlClip(st.text), err)
		}
		d := LogicalDDL{Text: renameTokens(db, st.text, names, mode), SQLMode: mode, Key: key.String()}
		classify(&d, st.node)
		out = append(out, d)
	}
	return out, nil
}

// classify sets d's Kind and column flags from its statement.
func classify(d *LogicalDDL, n ast.Node) {
	switch n := n.(type) {
	case *ast.CreateTableStmt:
		d.Kind = DDLCreate
	case *ast.DropTableStmt:
		d.Kind = DDLDrop
	case *ast.RenameTableStmt:
		d.Kind = DDLRename
	case *ast.AlterTableStmt:
		adds, drops := len(n.Specs) > 0, len(n.Specs) > 0
		for _, sp := range n.Specs {
			adds = adds && sp.Tp == ast.AlterTableAddColumns && addsReadable(sp.NewColumns)
			drops = drops && sp.Tp == ast.AlterTableDropColumn
			for _, c := range sp.NewColumns {
				d.Columns = append(d.Columns, c.Name.Name.L)
			}
			if sp.OldColumnName != nil {
				d.Columns = append(d.Columns, sp.OldColumnName.Name.L)
			}
			if sp.NewColumnName != nil {
				d.Columns = append(d.Columns, sp.NewColumnName.Name.L)
			}
		}
		d.AddsColumns, d.DropsColumns = adds, drops
	}
}

// addsReadable reports whether every column added reads as NULL in rows
// written before it: nullable, without a default (a default fills the
// rows already there, a value the merge does not have).
func addsReadable(cols []*ast.ColumnDef) bool {
	for _, c := range cols {
		for _, o := range c.Options {
			switch o.Tp {
			case ast.ColumnOptionNotNull, ast.ColumnOptionPrimaryKey, ast.ColumnOptionAutoIncrement, ast.ColumnOptionDefaultValue,
				ast.ColumnOptionGenerated:
				return false
			}
		}
	}
	return true
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
func renameTokens(db, text string, renamed map[schemaKey]schemaKey, mode SQLMode) string {
	l := ddlLexer{src: text, quiet: true, mode: mode}
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
			q := t.text(i)[:1] // ` or, under ANSI_QUOTES, "
			return strings.ReplaceAll(ddlUnquote(t.text(i)), q+q, q), true
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
