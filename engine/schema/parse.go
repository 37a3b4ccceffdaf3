package schema

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	// The test driver gives the parser its literal values (DEFAULT 'x').
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// This file turns the SQL text of a query event into parsed table DDL:
//
//  1. a cheap keyword check on the first statement (ddlLead, at most four
//     words) drops every event that is not DDL on tables (BEGIN, COMMIT, XA,
//     GRANT, DML in statement format, CREATE VIEW/PROCEDURE/USER...);
//  2. a small MySQL lexer (schema_lex.go) splits the rest into statements,
//     blanks comments and opens executable comments (/*!50100 ... */,
//     /*M!100100 ... */);
//  3. rewrites make MariaDB and MySQL syntax the TiDB parser rejects
//     acceptable (see ddlRewrite in schema_rewrite.go);
//  4. the TiDB parser parses each statement on its own.
//
// schema_ddl.go turns parsed statements, column definitions and constraints
// into the model (DDLTouch, Column, SchemaIndex); schema_state.go edits a
// table's state; the tracker (schema_tracker.go) applies whole statements
// and keeps the versions.

// ErrDDLParse is wrapped by every error about DDL text braid cannot parse.
var ErrDDLParse = errors.New("schema: cannot parse DDL")

// ddlParsers holds TiDB parsers, which are not safe for concurrent use and
// costly to build.
var ddlParsers = sync.Pool{New: func() any { return parser.New() }}

// ddlStmt is one statement of a query event, parsed.
type ddlStmt struct {
	node         ast.StmtNode
	orReplace    bool   // CREATE OR REPLACE TABLE
	tableCharset string // CREATE TABLE's default charset, when its options were cut
	text         string // the statement as written, for errors
}

// ddlParseError is what ddlParse fails with; callers add position and db.
type ddlParseError struct {
	stmt string
	err  error
}

func (e *ddlParseError) wrap(where string) error {
	return fmt.Errorf("%w %s: %s; statement: %q", ErrDDLParse, where, ddlClip(strings.TrimSpace(e.err.Error())), ddlClip(e.stmt))
}

// ddlClip keeps error messages short: the first 200 bytes.
func ddlClip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// ddlParse parses the table DDL statements in sql and skips the others.
func ddlParse(sql string, mode SQLMode) ([]ddlStmt, *ddlParseError) {
	if !ddlLead(sql) {
		return nil, nil
	}
	l := ddlLexer{src: sql, mode: mode}
	var all []ddlToken
	for {
		tok, ok := l.next()
		if !ok {
			break
		}
		all = append(all, tok)
	}
	var out []ddlStmt
	for len(all) > 0 {
		n := 0
		for n < len(all) && !(all[n].kind == ddlPunct && sql[all[n].start] == ';') {
			n++
		}
		st := ddlToks{src: sql, toks: all[:n]}
		if n < len(all) {
			n++
		}
		all = all[n:]
		kind := st.classify()
		if kind == ddlSkip {
			continue // also CREATE/DROP TEMPORARY TABLE: no rows in row format
		}
		stmt, err := ddlParseOne(st, kind, l.edits, mode)
		if err != nil {
			return nil, err
		}
		if stmt.node != nil {
			out = append(out, stmt)
		}
	}
	return out, nil
}

func ddlParseOne(st ddlToks, kind ddlKind, lexEdits []ddlEdit, mode SQLMode) (ddlStmt, *ddlParseError) {
	start, end := st.toks[0].start, st.toks[len(st.toks)-1].end
	out := ddlStmt{text: st.src[start:end]}
	edits, orReplace := ddlRewrite(st, kind)
	out.orReplace = orReplace
	for _, e := range lexEdits {
		if e.start >= start && e.end <= end {
			edits = append(edits, e)
		}
	}
	node, err := ddlParseText(ddlSplice(st.src, start, end, edits), mode)
	if err != nil && kind == ddlCreateTable {
		// Table options and partitioning do not matter to the model; MariaDB
		// prints some the TiDB parser rejects (`encrypted`=yes, PARTITION BY
		// SYSTEM_TIME). Cut them and try again.
		if cut, cs, ok := ddlCutTableOptions(st); ok {
			node, err = ddlParseText(ddlSplice(st.src, start, cut, edits), mode)
			out.tableCharset = cs
		}
	}
	if err != nil {
		return out, &ddlParseError{stmt: out.text, err: err}
	}
	out.node = node
	return out, nil
}

// TruncatedTable returns the table ("schema.table") a TRUNCATE [TABLE]
// statement run with default database db, under mode, empties; ok is false for any
// other statement. The schema model has nothing to change for it, but the
// stream carries it, as canal's does: a consumer must empty its copy.
func TruncatedTable(db, sql string, mode SQLMode) (table string, ok bool) {
	if !truncateLead(sql) {
		return "", false
	}
	node, err := ddlParseText(sql, mode)
	if err != nil {
		return "", false
	}
	st, isTruncate := node.(*ast.TruncateTableStmt)
	if !isTruncate || st.Table == nil {
		return "", false
	}
	schema := st.Table.Schema.O
	if schema == "" {
		schema = db
	}
	return schema + "." + st.Table.Name.O, schema != ""
}

func ddlParseText(sql string, mode SQLMode) (ast.StmtNode, error) {
	p := ddlParsers.Get().(*parser.Parser)
	defer ddlParsers.Put(p)
	p.SetSQLMode(mode.parserMode())
	nodes, _, err := p.Parse(sql, "", "")
	if err != nil {
		return nil, err
	}
	if len(nodes) != 1 {
		return nil, fmt.Errorf("want one statement, parsed %d", len(nodes))
	}
	return nodes[0], nil
}

// ddlSplice returns src[start:end] with the edits applied.
func ddlSplice(src string, start, end int, edits []ddlEdit) string {
	var b strings.Builder
	at := start
	for len(edits) > 0 {
		// Edits are few; pick the leftmost each time.
		m := 0
		for i := range edits {
			if edits[i].start < edits[m].start {
				m = i
			}
		}
		e := edits[m]
		edits = append(edits[:m:m], edits[m+1:]...)
		if e.start < at || e.end > end {
			continue
		}
		b.WriteString(src[at:e.start])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(src[at:end])
	return b.String()
}
