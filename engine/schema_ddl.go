package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	// The test driver gives the parser its literal values (DEFAULT 'x').
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// This file turns the SQL text of a query event into parsed table DDL:
//
//  1. a cheap keyword check on the first statement (ddlLead, at most four
//     words) drops every event that is not DDL on tables (BEGIN, COMMIT, XA,
//     GRANT, DML in statement format, CREATE VIEW/PROCEDURE/USER...);
//  2. a small MySQL lexer splits the rest into statements, blanks comments
//     and opens executable comments (/*!50100 ... */, /*M!100100 ... */);
//  3. rewrites make MariaDB and MySQL syntax the TiDB parser rejects
//     acceptable (see ddlRewrite);
//  4. the TiDB parser parses each statement on its own.
//
// The end of the file turns parsed column definitions and constraints into
// the model (Column, SchemaIndex) and edits a table's state; the tracker
// (schema_tracker.go) applies whole statements and keeps the versions.

// ErrDDLParse is wrapped by every error about DDL text braid cannot parse.
var ErrDDLParse = errors.New("engine: cannot parse DDL")

// ddlParsers holds TiDB parsers, which are not safe for concurrent use and
// costly to build.
var ddlParsers = sync.Pool{New: func() any { return parser.New() }}

// ddlKind says what a statement does to the schema model.
type ddlKind uint8

const (
	ddlSkip         ddlKind = iota // not DDL on tables: ignored
	ddlCreateTable                 // CREATE [OR REPLACE] TABLE
	ddlCreateIndex                 // CREATE [OR REPLACE] UNIQUE INDEX
	ddlAlterTable                  // ALTER [ONLINE] [IGNORE] TABLE
	ddlDropTable                   // DROP TABLE(S), not TEMPORARY
	ddlDropDatabase                // DROP DATABASE / SCHEMA
	ddlDropIndex                   // DROP INDEX ... ON t
	ddlRenameTable                 // RENAME TABLE(S)
)

type ddlTokKind uint8

const (
	ddlWord   ddlTokKind = iota + 1 // keyword or bare identifier
	ddlQuoted                       // `identifier`
	ddlString                       // '...' or "..."
	ddlNumber                       // digits only
	ddlPunct                        // any other single byte
)

type ddlToken struct {
	kind       ddlTokKind
	start, end int
}

// ddlEdit replaces src[start:end] with text.
type ddlEdit struct {
	start, end int
	text       string
}

// ddlLexer splits MySQL text into tokens. Comments are skipped and recorded
// as edits that blank them; the markers of executable comments are blanked
// too, so their content reads as plain SQL (MySQL runs it; so does TiDB).
type ddlLexer struct {
	src    string
	pos    int
	inExec bool
	quiet  bool // do not record edits
	edits  []ddlEdit
}

func (l *ddlLexer) blank(start, end int) {
	if !l.quiet {
		l.edits = append(l.edits, ddlEdit{start, end, " "})
	}
}

func (l *ddlLexer) next() (ddlToken, bool) {
	src := l.src
	for l.pos < len(src) {
		c := src[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '#' || c == '-' && strings.HasPrefix(src[l.pos:], "--") && (l.pos+2 == len(src) || src[l.pos+2] <= ' '):
			end := strings.IndexByte(src[l.pos:], '\n')
			if end < 0 {
				end = len(src) - l.pos
			}
			l.blank(l.pos, l.pos+end)
			l.pos += end
		case c == '/' && strings.HasPrefix(src[l.pos:], "/*"):
			start := l.pos
			if rest := src[l.pos+2:]; strings.HasPrefix(rest, "!") || strings.HasPrefix(rest, "M!") {
				l.pos += 3 + strings.IndexByte(rest, '!')
				for l.pos < len(src) && src[l.pos] >= '0' && src[l.pos] <= '9' {
					l.pos++
				}
				l.blank(start, l.pos)
				l.inExec = true
				continue
			}
			end := strings.Index(src[l.pos+2:], "*/")
			if end < 0 {
				l.pos = len(src)
			} else {
				l.pos += end + 4
			}
			l.blank(start, l.pos)
		case c == '*' && l.inExec && strings.HasPrefix(src[l.pos:], "*/"):
			l.blank(l.pos, l.pos+2)
			l.pos += 2
			l.inExec = false
		default:
			return l.token(), true
		}
	}
	return ddlToken{}, false
}

func ddlIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

func (l *ddlLexer) token() ddlToken {
	src, start := l.src, l.pos
	c := src[start]
	switch {
	case c == '\'' || c == '"' || c == '`':
		i := start + 1
		for i < len(src) {
			switch {
			case src[i] == '\\' && c != '`':
				i += 2
				continue
			case src[i] == c && i+1 < len(src) && src[i+1] == c:
				i += 2
				continue
			case src[i] == c:
				i++
				l.pos = i
				if c == '`' {
					return ddlToken{ddlQuoted, start, i}
				}
				return ddlToken{ddlString, start, i}
			}
			i++
		}
		l.pos = len(src)
		return ddlToken{ddlString, start, len(src)}
	case ddlIdentByte(c):
		i, digits := start, true
		for i < len(src) && ddlIdentByte(src[i]) {
			digits = digits && src[i] >= '0' && src[i] <= '9'
			i++
		}
		l.pos = i
		if digits {
			return ddlToken{ddlNumber, start, i}
		}
		return ddlToken{ddlWord, start, i}
	}
	l.pos++
	return ddlToken{ddlPunct, start, start + 1}
}

// ddlToks is one statement's tokens over its source text.
type ddlToks struct {
	src  string
	toks []ddlToken
}

func (t ddlToks) text(i int) string {
	if i < 0 || i >= len(t.toks) {
		return ""
	}
	return t.src[t.toks[i].start:t.toks[i].end]
}

// is reports whether token i is the keyword kw (upper case) or the
// punctuation kw.
func (t ddlToks) is(i int, kw string) bool {
	if i < 0 || i >= len(t.toks) {
		return false
	}
	if k := t.toks[i].kind; k != ddlWord && k != ddlPunct {
		return false
	}
	return strings.EqualFold(t.text(i), kw)
}

func (t ddlToks) kind(i int) ddlTokKind {
	if i < 0 || i >= len(t.toks) {
		return 0
	}
	return t.toks[i].kind
}

// classify looks at the leading keywords only.
func (t ddlToks) classify() ddlKind {
	switch {
	case t.is(0, "CREATE"):
		i := 1
		if t.is(1, "OR") && t.is(2, "REPLACE") {
			i = 3
		}
		switch {
		case t.is(i, "TABLE"):
			return ddlCreateTable
		case t.is(i, "UNIQUE"):
			return ddlCreateIndex
		}
	case t.is(0, "ALTER"):
		i := 1
		if t.is(i, "ONLINE") {
			i++
		}
		if t.is(i, "IGNORE") {
			i++
		}
		if t.is(i, "TABLE") {
			return ddlAlterTable
		}
	case t.is(0, "DROP"):
		switch {
		case t.is(1, "TABLE"), t.is(1, "TABLES"):
			return ddlDropTable
		case t.is(1, "DATABASE"), t.is(1, "SCHEMA"):
			return ddlDropDatabase
		case t.is(1, "INDEX"):
			return ddlDropIndex
		}
	case t.is(0, "RENAME"):
		if t.is(1, "TABLE") || t.is(1, "TABLES") {
			return ddlRenameTable
		}
	}
	return ddlSkip
}

// ddlLead is the cheap check every query event goes through: it lexes at
// most four tokens and allocates nothing.
func ddlLead(sql string) bool {
	var buf [4]ddlToken
	l := ddlLexer{src: sql, quiet: true}
	n := 0
	for n < len(buf) {
		tok, ok := l.next()
		if !ok {
			break
		}
		buf[n] = tok
		n++
	}
	return ddlToks{src: sql, toks: buf[:n]}.classify() != ddlSkip
}

// ddlStmt is one statement of a query event, parsed.
type ddlStmt struct {
	node        ast.StmtNode
	orReplace   bool   // CREATE OR REPLACE TABLE
	tableBinary bool   // CREATE TABLE whose default charset is binary, when its options were cut
	text        string // the statement as written, for errors
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
func ddlParse(sql string) ([]ddlStmt, *ddlParseError) {
	if !ddlLead(sql) {
		return nil, nil
	}
	l := ddlLexer{src: sql}
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
		stmt, err := ddlParseOne(st, kind, l.edits)
		if err != nil {
			return nil, err
		}
		if stmt.node != nil {
			out = append(out, stmt)
		}
	}
	return out, nil
}

func ddlParseOne(st ddlToks, kind ddlKind, lexEdits []ddlEdit) (ddlStmt, *ddlParseError) {
	start, end := st.toks[0].start, st.toks[len(st.toks)-1].end
	out := ddlStmt{text: st.src[start:end]}
	edits, orReplace := ddlRewrite(st, kind)
	out.orReplace = orReplace
	for _, e := range lexEdits {
		if e.start >= start && e.end <= end {
			edits = append(edits, e)
		}
	}
	node, err := ddlParseText(ddlSplice(st.src, start, end, edits))
	if err != nil && kind == ddlCreateTable {
		// Table options and partitioning do not matter to the model; MariaDB
		// prints some the TiDB parser rejects (`encrypted`=yes, PARTITION BY
		// SYSTEM_TIME). Cut them and try again.
		if cut, binary, ok := ddlCutTableOptions(st); ok {
			node, err = ddlParseText(ddlSplice(st.src, start, cut, edits))
			out.tableBinary = binary
		}
	}
	if err != nil {
		return out, &ddlParseError{stmt: out.text, err: err}
	}
	out.node = node
	return out, nil
}

func ddlParseText(sql string) (ast.StmtNode, error) {
	p := ddlParsers.Get().(*parser.Parser)
	defer ddlParsers.Put(p)
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

// ddlCutTableOptions finds the end of a CREATE TABLE's column list, and
// whether the options after it make binary the default charset.
func ddlCutTableOptions(st ddlToks) (cut int, binary, ok bool) {
	i := 2
	for i < len(st.toks) && !st.is(i, "(") {
		i++
	}
	depth := 0
	for ; i < len(st.toks); i++ {
		switch {
		case st.is(i, "("):
			depth++
		case st.is(i, ")"):
			depth--
			if depth == 0 {
				for j := i + 1; j < len(st.toks); j++ {
					if st.is(j, "VERSIONING") {
						// WITH SYSTEM VERSIONING adds hidden columns that
						// binlog rows carry: never cut it away.
						return 0, false, false
					}
					if st.is(j, "CHARSET") || st.is(j, "SET") && st.is(j-1, "CHARACTER") {
						k := j + 1
						if st.is(k, "=") {
							k++
						}
						binary = strings.EqualFold(ddlUnquote(st.text(k)), "binary")
					}
				}
				return st.toks[i].end, binary, true
			}
		}
	}
	return 0, false, false
}

func ddlUnquote(s string) string {
	if len(s) >= 2 && (s[0] == '`' || s[0] == '\'' || s[0] == '"') {
		return s[1 : len(s)-1]
	}
	return s
}

// ddlExtMarker stands in for column types the TiDB parser lacks: the
// rewrite declares such a column ENUM('<marker><type>') and ddlColumn turns
// it back.
const ddlExtMarker = "braid\x1etype:"

// ddlExtTypes are the column types MySQL or MariaDB have and the TiDB
// parser does not; the value is the base type the model reports.
var ddlExtTypes = map[string]string{
	"geometry": "geometry", "point": "geometry", "linestring": "geometry", "polygon": "geometry",
	"multipoint": "geometry", "multilinestring": "geometry", "multipolygon": "geometry",
	"geometrycollection": "geometry", "geomcollection": "geometry",
	"inet4": "inet4", "inet6": "inet6", "uuid": "uuid",
}

// ddlNameIntro are keywords a name follows; a word after one of them is a
// name, never a type or attribute.
var ddlNameIntro = map[string]bool{
	"TABLE": true, "TABLES": true, "COLUMN": true, "ADD": true, "MODIFY": true, "CHANGE": true,
	"DROP": true, "AFTER": true, "TO": true, "EXISTS": true, "KEY": true, "INDEX": true, "BY": true,
	"AS": true, "RENAME": true, "ON": true, "LIKE": true, "CONSTRAINT": true, "SET": true,
	"ALTER": true, "REFERENCES": true, "FIRST": true, "NOT": true, "IF": true, "REPLACE": true,
}

// ddlAttrStart are the words that may follow a column's type.
var ddlAttrStart = map[string]bool{
	"NOT": true, "NULL": true, "DEFAULT": true, "COMMENT": true, "SRID": true, "REF_SYSTEM_ID": true,
	"PRIMARY": true, "UNIQUE": true, "KEY": true, "CHECK": true, "INVISIBLE": true, "VISIBLE": true,
	"AFTER": true, "FIRST": true, "COLLATE": true, "CHARACTER": true, "CHARSET": true, "GENERATED": true,
	"AS": true, "REFERENCES": true, "CONSTRAINT": true, "AUTO_INCREMENT": true, "COLUMN_FORMAT": true,
	"STORAGE": true, "COMPRESSED": true, "WITH": true, "WITHOUT": true, "ON": true,
}

// ddlWordIn reports whether token i is a bare word in set (keys upper case).
func (t ddlToks) wordIn(i int, set map[string]bool) bool {
	return t.kind(i) == ddlWord && set[strings.ToUpper(t.text(i))]
}

// columnName reports whether token i can be a column name just declared.
func (t ddlToks) columnName(i int) bool {
	return t.kind(i) == ddlQuoted || t.kind(i) == ddlWord && !t.wordIn(i, ddlNameIntro)
}

// attrPos reports whether token i follows a column type: it is not a
// name-introducing keyword or the punctuation a name follows.
func (t ddlToks) attrPos(i int) bool {
	if i < 0 || t.is(i, "(") || t.is(i, ",") || t.is(i, ".") || t.is(i, "=") {
		return false
	}
	return !t.wordIn(i, ddlNameIntro)
}

// attrEnd reports whether token i may follow a complete column type.
func (t ddlToks) attrEnd(i int) bool {
	return i >= len(t.toks) || t.is(i, ",") || t.is(i, ")") || t.wordIn(i, ddlAttrStart)
}

// ddlRewrite makes MariaDB and MySQL syntax the TiDB parser rejects
// acceptable to it, where the meaning for the model is plain:
//
//   - CREATE OR REPLACE TABLE (reported as orReplace), ALTER ONLINE TABLE,
//     ALTER TABLE IF EXISTS, RENAME TABLE IF EXISTS, WAIT n / NOWAIT;
//   - character sets and collations the parser does not know (utf16, cp1251,
//     utf8mb4_uca1400_ai_ci...) become utf8mb4 / utf8mb4_bin: only the binary
//     charset matters to the model and it is known;
//   - spatial types, INET4, INET6 and UUID become a marked ENUM;
//   - SPATIAL KEY, SRID n, REF_SYSTEM_ID=n, INVISIBLE columns and COMPRESSED
//     columns lose the word; PERSISTENT becomes STORED; ALTER COLUMN c SET
//     [IN]VISIBLE becomes DROP DEFAULT (both leave the model as it is).
func ddlRewrite(st ddlToks, kind ddlKind) (edits []ddlEdit, orReplace bool) {
	del := func(i int) { edits = append(edits, ddlEdit{st.toks[i].start, st.toks[i].end, " "}) }
	set := func(i int, s string) { edits = append(edits, ddlEdit{st.toks[i].start, st.toks[i].end, s}) }
	switch kind {
	case ddlCreateTable, ddlCreateIndex:
		if st.is(1, "OR") && st.is(2, "REPLACE") {
			del(1)
			del(2)
			orReplace = true
		}
	case ddlAlterTable:
		i := 1
		if st.is(i, "ONLINE") {
			del(i)
			i++
		}
		if st.is(i, "IGNORE") {
			i++
		}
		i++ // TABLE
		if st.is(i, "IF") && st.is(i+1, "EXISTS") {
			del(i)
			del(i + 1)
			i += 2
		}
		i = st.skipName(i)
		st.dropWait(i, del)
	case ddlRenameTable:
		if st.is(2, "IF") && st.is(3, "EXISTS") {
			del(2)
			del(3)
		}
		for i := 2; i < len(st.toks); i++ {
			switch {
			case !st.is(i, "TO"):
			case st.is(i-1, "NOWAIT") && st.columnName(i-2):
				del(i - 1)
			case st.is(i-2, "WAIT") && st.kind(i-1) == ddlNumber && st.columnName(i-3):
				del(i - 2)
				del(i - 1)
			}
		}
	case ddlDropTable:
		for i := 3; i < len(st.toks); i++ {
			if st.columnName(i-1) && (i+1 == len(st.toks) || st.is(i+1, "RESTRICT") || st.is(i+1, "CASCADE") || st.kind(i+1) == ddlNumber) {
				st.dropWait(i, del)
			}
		}
	}
	columns := kind == ddlCreateTable || kind == ddlAlterTable
	for i := range st.toks {
		if st.kind(i) != ddlWord {
			continue
		}
		w := strings.ToUpper(st.text(i))
		switch {
		case w == "CHARSET" && !st.is(i+1, "("), (w == "CHARACTER" || w == "CHAR") && st.is(i+1, "SET"):
			j := i + 1
			if w != "CHARSET" {
				j++
			}
			if st.is(j, "=") {
				j++
			}
			if name := ddlUnquote(st.text(j)); name != "" && !strings.EqualFold(name, "DEFAULT") {
				if _, err := charset.GetCharsetInfo(name); err != nil {
					set(j, "utf8mb4")
				}
			}
		case w == "COLLATE":
			j := i + 1
			if st.is(j, "=") {
				j++
			}
			if name := ddlUnquote(st.text(j)); name != "" && !strings.EqualFold(name, "DEFAULT") {
				if _, err := charset.GetCollationByName(name); err != nil {
					set(j, "utf8mb4_bin")
				}
			}
		case !columns:
		case ddlExtTypes[strings.ToLower(w)] != "" && st.columnName(i-1) && st.attrEnd(i+1):
			set(i, "ENUM('"+ddlExtMarker+strings.ToLower(w)+"')")
		case w == "SPATIAL" && (st.is(i+1, "KEY") || st.is(i+1, "INDEX")):
			del(i)
		case w == "SRID" && st.attrPos(i-1) && st.kind(i+1) == ddlNumber:
			del(i)
			del(i + 1)
		case w == "REF_SYSTEM_ID" && st.attrPos(i-1) && st.is(i+1, "=") && st.kind(i+2) == ddlNumber:
			del(i)
			del(i + 1)
			del(i + 2)
		case w == "INVISIBLE" && st.attrPos(i-1) && !st.is(i-2, "INDEX") && !st.is(i-2, "KEY") && st.attrEnd(i+1):
			del(i)
		case w == "COMPRESSED" && st.attrPos(i-1) && st.is(i+1, "=") && st.kind(i+2) == ddlWord:
			del(i)
			del(i + 1)
			del(i + 2)
		case w == "COMPRESSED" && st.attrPos(i-1) && st.attrEnd(i+1):
			del(i)
		case w == "PERSISTENT" && st.is(i-1, ")"):
			set(i, "STORED")
		case w == "SET" && (st.is(i+1, "VISIBLE") || st.is(i+1, "INVISIBLE")) && (st.is(i-2, "ALTER") || st.is(i-2, "COLUMN")):
			// ALTER COLUMN c SET [IN]VISIBLE (MySQL 8): as much a no-op
			// for the model as the DROP DEFAULT it becomes.
			set(i, "DROP")
			set(i+1, "DEFAULT")
		}
	}
	return edits, orReplace
}

// skipName returns the index after a possibly qualified name at i.
func (t ddlToks) skipName(i int) int {
	i++
	if t.is(i, ".") {
		i += 2
	}
	return i
}

// dropWait deletes MariaDB's WAIT n or NOWAIT at i.
func (t ddlToks) dropWait(i int, del func(int)) {
	switch {
	case t.is(i, "NOWAIT"):
		del(i)
	case t.is(i, "WAIT") && t.kind(i+1) == ddlNumber:
		del(i)
		del(i + 1)
	}
}

// DDLTouch is one table a DDL statement touches.
type DDLTouch struct {
	// Table is "schema.table", names as written in the DDL (unqualified
	// names take the default database), the form Table.FullName gives.
	// For DROP DATABASE it is "schema.*" and Database is set.
	Table string `json:"table"`
	// Creates is set when the statement brings the table into existence:
	// CREATE TABLE (also LIKE, IF NOT EXISTS, OR REPLACE) and the new name
	// of a RENAME.
	Creates bool `json:"creates,omitempty"`
	// Drops is set when the table ceases to exist under this name: DROP
	// TABLE, the old name of a RENAME, DROP DATABASE.
	Drops bool `json:"drops,omitempty"`
	// Database is set for DROP DATABASE, which drops every table of the schema.
	Database bool `json:"database,omitempty"`
}

// DDLTables parses the SQL of one query event run with default database db
// and returns the tables its statements touch, in statement order, each
// table once per statement. Statements SchemaTracker ignores touch nothing.
// SQL it cannot parse returns an error wrapping ErrDDLParse.
func DDLTables(db, sql string) ([]DDLTouch, error) {
	stmts, perr := ddlParse(sql)
	if perr != nil {
		return nil, perr.wrap(fmt.Sprintf("(db %q)", db))
	}
	var out []DDLTouch
	add := func(tn *ast.TableName, creates, drops bool) {
		out = append(out, DDLTouch{Table: ddlName(db, tn).String(), Creates: creates, Drops: drops})
	}
	for _, st := range stmts {
		switch n := st.node.(type) {
		case *ast.CreateTableStmt:
			add(n.Table, true, st.orReplace)
		case *ast.DropTableStmt:
			for _, tn := range n.Tables {
				add(tn, false, true)
			}
		case *ast.RenameTableStmt:
			for _, tt := range n.TableToTables {
				add(tt.OldTable, false, true)
				add(tt.NewTable, true, false)
			}
		case *ast.AlterTableStmt:
			var to *ast.TableName
			for _, spec := range n.Specs {
				if spec.Tp == ast.AlterTableRenameTable {
					to = spec.NewTable
				}
			}
			add(n.Table, false, to != nil)
			if to != nil {
				add(to, true, false)
			}
		case *ast.CreateIndexStmt:
			add(n.Table, false, false)
		case *ast.DropIndexStmt:
			add(n.Table, false, false)
		case *ast.DropDatabaseStmt:
			out = append(out, DDLTouch{Table: n.Name.O + ".*", Drops: true, Database: true})
		}
	}
	return out, nil
}

// schemaKey names a table: schema and table compare case-sensitively, as
// MySQL on Linux does (lower_case_table_names=0).
type schemaKey struct{ schema, name string }

func (k schemaKey) String() string { return k.schema + "." + k.name }

func ddlName(db string, tn *ast.TableName) schemaKey {
	if tn.Schema.O != "" {
		db = tn.Schema.O
	}
	return schemaKey{db, tn.Name.O}
}

// ddlColumn converts a parsed column definition. tableBinary is set when
// the table's default charset is binary.
func ddlColumn(def *ast.ColumnDef, tableBinary bool) (col Column, primary, unique bool, err error) {
	col = Column{Name: def.Name.Name.O, Nullable: true}
	ft := def.Tp
	if ft == nil {
		return col, false, false, fmt.Errorf("column %q has no type", col.Name)
	}
	tp, cs := ft.GetType(), ft.GetCharset()
	if cs == "" && tableBinary {
		cs = charset.CharsetBin
	}
	bin := cs == charset.CharsetBin
	flen, dec := ft.GetFlen(), ft.GetDecimal()
	numeric := false
	switch tp {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		numeric = true
		col.Type = types.TypeStr(tp)
		col.Unsigned = mysql.HasUnsignedFlag(ft.GetFlag()) || mysql.HasZerofillFlag(ft.GetFlag())
		if flen <= 0 {
			flen = ddlIntWidth(tp, col.Unsigned)
		}
		col.RawType = fmt.Sprintf("%s(%d)", col.Type, flen)
	case mysql.TypeNewDecimal:
		numeric = true
		if flen <= 0 {
			flen = 10
		}
		col.Type, col.RawType = "decimal", fmt.Sprintf("decimal(%d,%d)", flen, max(dec, 0))
	case mysql.TypeFloat, mysql.TypeDouble:
		numeric = true
		col.Type = types.TypeStr(tp)
		col.RawType = col.Type
		if flen > 0 && dec >= 0 {
			col.RawType = fmt.Sprintf("%s(%d,%d)", col.Type, flen, dec)
		}
	case mysql.TypeBit:
		col.Type, col.RawType = "bit", fmt.Sprintf("bit(%d)", max(flen, 1))
	case mysql.TypeYear:
		if flen <= 0 {
			flen = 4
		}
		col.Type, col.RawType = "year", fmt.Sprintf("year(%d)", flen)
	case mysql.TypeDate, mysql.TypeDuration, mysql.TypeDatetime, mysql.TypeTimestamp:
		col.Type = types.TypeStr(tp)
		col.RawType = col.Type
		if dec > 0 {
			col.RawType = fmt.Sprintf("%s(%d)", col.Type, dec)
		}
	case mysql.TypeString, mysql.TypeVarchar, mysql.TypeVarString:
		base := "char"
		if tp != mysql.TypeString {
			base = "varchar"
		}
		if bin {
			base = strings.Replace(base, "char", "binary", 1)
		}
		if flen < 0 {
			flen = 1
		}
		col.Type, col.RawType, col.Binary = base, fmt.Sprintf("%s(%d)", base, flen), bin
	case mysql.TypeTinyBlob, mysql.TypeBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		if flen > 0 {
			tp = ddlBlobForLength(flen, cs)
		}
		col.Type = types.TypeToStr(tp, cs)
		col.RawType, col.Binary = col.Type, bin
		if tp == mysql.TypeLongBlob && !bin && ddlJSONCheck(def) {
			col.Type, col.RawType = "json", "json"
		}
	case mysql.TypeEnum, mysql.TypeSet:
		elems := ft.GetElems()
		if tp == mysql.TypeEnum && len(elems) == 1 && strings.HasPrefix(elems[0], ddlExtMarker) {
			name := strings.TrimPrefix(elems[0], ddlExtMarker)
			col.Type, col.RawType, col.Binary = ddlExtTypes[name], name, true
			break
		}
		col.Type = types.TypeStr(tp)
		col.Elems = append([]string(nil), elems...)
		quoted := make([]string, len(elems))
		for i, e := range elems {
			quoted[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(e) + "'"
		}
		col.RawType = col.Type + "(" + strings.Join(quoted, ",") + ")"
	case mysql.TypeJSON:
		col.Type, col.RawType = "json", "json"
	case mysql.TypeTiDBVectorFloat32:
		col.Type, col.RawType = "vector", "vector"
		if flen > 0 {
			col.RawType = fmt.Sprintf("vector(%d)", flen)
		}
	default:
		return col, false, false, fmt.Errorf("column %q: unsupported type %s", col.Name, ft.String())
	}
	if numeric {
		col.Unsigned = mysql.HasUnsignedFlag(ft.GetFlag()) || mysql.HasZerofillFlag(ft.GetFlag())
		if col.Unsigned {
			col.RawType += " unsigned"
		}
		if mysql.HasZerofillFlag(ft.GetFlag()) {
			col.RawType += " zerofill"
		}
	}
	for _, opt := range def.Options {
		switch opt.Tp {
		case ast.ColumnOptionNotNull:
			col.Nullable = false
		case ast.ColumnOptionNull:
			col.Nullable = true
		case ast.ColumnOptionPrimaryKey:
			primary = true
		case ast.ColumnOptionUniqKey:
			unique = true
		}
	}
	if primary {
		col.Nullable = false
	}
	return col, primary, unique, nil
}

// ddlIntWidth is the display width MariaDB and MySQL 5.7 print for an
// integer type declared without one.
func ddlIntWidth(tp byte, unsigned bool) int {
	w := map[byte]int{mysql.TypeTiny: 4, mysql.TypeShort: 6, mysql.TypeInt24: 9, mysql.TypeLong: 11, mysql.TypeLonglong: 20}[tp]
	if unsigned && tp != mysql.TypeLonglong {
		w--
	}
	return w
}

// ddlBlobForLength is the smallest TEXT or BLOB type that holds n
// characters (TEXT(n), BLOB(n)), as MySQL picks it.
func ddlBlobForLength(n int, cs string) byte {
	bytes := n
	switch strings.ToLower(cs) {
	case "binary", "latin1", "ascii":
	case "utf8", "utf8mb3":
		bytes *= 3
	default: // utf8mb4 or not declared: assume the widest common charset
		bytes *= 4
	}
	switch {
	case bytes < 1<<8:
		return mysql.TypeTinyBlob
	case bytes < 1<<16:
		return mysql.TypeBlob
	case bytes < 1<<24:
		return mysql.TypeMediumBlob
	}
	return mysql.TypeLongBlob
}

// ddlJSONCheck reports MariaDB's JSON: a LONGTEXT column whose CHECK is
// json_valid(column). MariaDB's SHOW CREATE TABLE prints JSON that way, so
// both the DDL and the loaded table give the model the type "json".
func ddlJSONCheck(def *ast.ColumnDef) bool {
	for _, opt := range def.Options {
		if opt.Tp != ast.ColumnOptionCheck {
			continue
		}
		fn, ok := opt.Expr.(*ast.FuncCallExpr)
		if !ok || fn.FnName.L != "json_valid" || len(fn.Args) != 1 {
			continue
		}
		if c, ok := fn.Args[0].(*ast.ColumnNameExpr); ok && strings.EqualFold(c.Name.Name.O, def.Name.Name.O) {
			return true
		}
	}
	return false
}

// ddlIndex converts a PRIMARY KEY or UNIQUE constraint; ok is false for
// other constraints.
func ddlIndex(c *ast.Constraint) (ix SchemaIndex, ok bool) {
	switch c.Tp {
	case ast.ConstraintPrimaryKey:
		ix = SchemaIndex{Name: "PRIMARY", Primary: true}
	case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
		ix = SchemaIndex{Name: c.Name}
	default:
		return ix, false
	}
	for _, part := range c.Keys {
		if part.Column == nil {
			ix.Partial = true // an expression part
			continue
		}
		if part.Length > 0 {
			ix.Partial = true
		}
		ix.Columns = append(ix.Columns, part.Column.Name.O)
	}
	return ix, true
}

// The methods below edit a table's state for one ALTER TABLE clause (or the
// same change made by CREATE TABLE, CREATE/DROP INDEX). Column names compare
// case-insensitively, as in MySQL.

func (st *schemaState) alterSpec(spec *ast.AlterTableSpec) error {
	switch spec.Tp {
	case ast.AlterTableAddColumns:
		pos := spec.Position
		if len(spec.NewColumns) > 1 {
			pos = nil
		}
		for _, def := range spec.NewColumns {
			if err := st.addColumn(def, pos, spec.IfNotExists, false); err != nil {
				return err
			}
		}
		for _, c := range spec.NewConstraints {
			if ix, ok := ddlIndex(c); ok {
				st.addIndex(ix, c.IfNotExists)
			}
		}
	case ast.AlterTableDropColumn:
		return st.dropColumn(spec.OldColumnName.Name.O, spec.IfExists)
	case ast.AlterTableModifyColumn:
		def := spec.NewColumns[0]
		return st.replaceColumn(def.Name.Name.O, def, spec.Position, spec.IfExists)
	case ast.AlterTableChangeColumn:
		return st.replaceColumn(spec.OldColumnName.Name.O, spec.NewColumns[0], spec.Position, spec.IfExists)
	case ast.AlterTableRenameColumn:
		return st.renameColumn(spec.OldColumnName.Name.O, spec.NewColumnName.Name.O)
	case ast.AlterTableAddConstraint:
		if ix, ok := ddlIndex(spec.Constraint); ok {
			st.addIndex(ix, spec.IfNotExists || spec.Constraint.IfNotExists)
		}
	case ast.AlterTableDropPrimaryKey:
		st.dropIndex("PRIMARY")
	case ast.AlterTableDropIndex:
		st.dropIndex(spec.Name)
	case ast.AlterTableDropCheck:
		// DROP CONSTRAINT name (MySQL 8.0.19) also drops a unique index.
		if spec.Constraint != nil {
			st.dropIndex(spec.Constraint.Name)
		}
	case ast.AlterTableRenameIndex:
		if i := st.indexNamed(spec.FromKey.O); i >= 0 && !st.indexes[i].Primary {
			st.indexes[i].Name = spec.ToKey.O
		}
	case ast.AlterTableOption:
		for _, opt := range spec.Options {
			if opt.Tp == ast.TableOptionCharset && opt.UintValue == ast.TableOptionCharsetWithConvertTo &&
				strings.EqualFold(opt.StrValue, charset.CharsetBin) {
				st.convertToBinary()
			}
		}
	}
	// ALTER COLUMN SET/DROP DEFAULT, table options, partitioning, locks,
	// other indexes and checks do not change the model.
	return nil
}

// addColumn adds a column at pos (nil: last).
func (st *schemaState) addColumn(def *ast.ColumnDef, pos *ast.ColumnPosition, ifNotExists, tableBinary bool) error {
	col, primary, unique, err := ddlColumn(def, tableBinary)
	if err != nil {
		return err
	}
	if st.table.ColumnIndex(col.Name) >= 0 {
		if ifNotExists {
			return nil
		}
		return fmt.Errorf("column %q already exists", col.Name)
	}
	if err := st.insertColumn(col, pos, len(st.table.Columns)); err != nil {
		return err
	}
	st.columnIndexes(col.Name, primary, unique)
	return nil
}

// insertColumn inserts col at FIRST, AFTER x, or else at index at.
func (st *schemaState) insertColumn(col Column, pos *ast.ColumnPosition, at int) error {
	if pos != nil {
		switch pos.Tp {
		case ast.ColumnPositionFirst:
			at = 0
		case ast.ColumnPositionAfter:
			i := st.table.ColumnIndex(pos.RelativeColumn.Name.O)
			if i < 0 {
				return fmt.Errorf("AFTER column %q not found", pos.RelativeColumn.Name.O)
			}
			at = i + 1
		}
	}
	st.table.Columns = slices.Insert(st.table.Columns, at, col)
	return nil
}

// columnIndexes adds the indexes a column definition declares inline.
func (st *schemaState) columnIndexes(name string, primary, unique bool) {
	if primary {
		st.addIndex(SchemaIndex{Name: "PRIMARY", Primary: true, Columns: []string{name}}, false)
	}
	if unique {
		st.addIndex(SchemaIndex{Columns: []string{name}}, false)
	}
}

// replaceColumn is MODIFY (old is the new definition's name) and CHANGE.
func (st *schemaState) replaceColumn(old string, def *ast.ColumnDef, pos *ast.ColumnPosition, ifExists bool) error {
	i := st.table.ColumnIndex(old)
	if i < 0 {
		if ifExists {
			return nil
		}
		return fmt.Errorf("column %q not found", old)
	}
	col, primary, unique, err := ddlColumn(def, false)
	if err != nil {
		return err
	}
	if j := st.table.ColumnIndex(col.Name); j >= 0 && j != i {
		return fmt.Errorf("column %q already exists", col.Name)
	}
	oldName := st.table.Columns[i].Name
	st.table.Columns = slices.Delete(st.table.Columns, i, i+1)
	if err := st.insertColumn(col, pos, i); err != nil {
		return err
	}
	st.renameInIndexes(oldName, col.Name)
	st.columnIndexes(col.Name, primary, unique)
	return nil
}

func (st *schemaState) renameColumn(old, name string) error {
	i := st.table.ColumnIndex(old)
	if i < 0 {
		return fmt.Errorf("column %q not found", old)
	}
	if j := st.table.ColumnIndex(name); j >= 0 && j != i {
		return fmt.Errorf("column %q already exists", name)
	}
	st.renameInIndexes(st.table.Columns[i].Name, name)
	st.table.Columns[i].Name = name
	return nil
}

// dropColumn removes a column and takes it out of the indexes; an index
// left without columns is dropped, as MySQL does.
func (st *schemaState) dropColumn(name string, ifExists bool) error {
	i := st.table.ColumnIndex(name)
	if i < 0 {
		if ifExists {
			return nil
		}
		return fmt.Errorf("column %q not found", name)
	}
	st.table.Columns = slices.Delete(st.table.Columns, i, i+1)
	kept := st.indexes[:0]
	for _, ix := range st.indexes {
		n := len(ix.Columns)
		ix.Columns = slices.DeleteFunc(ix.Columns, func(c string) bool { return strings.EqualFold(c, name) })
		if n == 0 || len(ix.Columns) > 0 {
			kept = append(kept, ix)
		}
	}
	st.indexes = slices.Clip(kept)
	return nil
}

func (st *schemaState) renameInIndexes(old, name string) {
	for _, ix := range st.indexes {
		for j, c := range ix.Columns {
			if strings.EqualFold(c, old) {
				ix.Columns[j] = name
			}
		}
	}
}

func (st *schemaState) indexNamed(name string) int {
	return slices.IndexFunc(st.indexes, func(ix SchemaIndex) bool { return strings.EqualFold(ix.Name, name) })
}

// addIndex adds a primary key (replacing one) or a unique index; an
// unnamed unique index is named after its first column, as MySQL does.
func (st *schemaState) addIndex(ix SchemaIndex, ifNotExists bool) {
	if ix.Primary {
		st.dropIndex("PRIMARY")
		st.indexes = slices.Insert(st.indexes, 0, ix)
		return
	}
	if ix.Name == "" {
		base := "functional_index"
		if len(ix.Columns) > 0 {
			base = ix.Columns[0]
		}
		ix.Name = base
		for n := 2; st.indexNamed(ix.Name) >= 0; n++ {
			ix.Name = fmt.Sprintf("%s_%d", base, n)
		}
	}
	if i := st.indexNamed(ix.Name); i >= 0 {
		if !ifNotExists {
			st.indexes[i] = ix
		}
		return
	}
	st.indexes = append(st.indexes, ix)
}

func (st *schemaState) dropIndex(name string) {
	if strings.EqualFold(name, "PRIMARY") {
		st.indexes = slices.DeleteFunc(st.indexes, func(ix SchemaIndex) bool { return ix.Primary })
		return
	}
	if i := st.indexNamed(name); i >= 0 {
		st.indexes = slices.Delete(st.indexes, i, i+1)
	}
}

// deriveKeys sets Column.Key from the indexes: the primary key, else the
// first unique index on whole NOT NULL columns. Primary key columns are
// NOT NULL.
func (st *schemaState) deriveKeys() {
	cols := st.table.Columns
	for i := range cols {
		cols[i].Key = false
	}
	var key []string
	for _, ix := range st.indexes {
		if ix.Primary {
			key = ix.Columns
			for _, c := range key {
				if j := st.table.ColumnIndex(c); j >= 0 {
					cols[j].Nullable = false
				}
			}
			break
		}
	}
	for _, ix := range st.indexes {
		if key != nil {
			break
		}
		if ix.Partial || len(ix.Columns) == 0 {
			continue
		}
		if !slices.ContainsFunc(ix.Columns, func(c string) bool {
			j := st.table.ColumnIndex(c)
			return j < 0 || cols[j].Nullable
		}) {
			key = ix.Columns
		}
	}
	for _, c := range key {
		if j := st.table.ColumnIndex(c); j >= 0 {
			cols[j].Key = true
		}
	}
}

// convertToBinary is CONVERT TO CHARACTER SET binary: character columns
// become their binary counterparts.
func (st *schemaState) convertToBinary() {
	to := map[string]string{"char": "binary", "varchar": "varbinary", "tinytext": "tinyblob",
		"text": "blob", "mediumtext": "mediumblob", "longtext": "longblob"}
	for i := range st.table.Columns {
		c := &st.table.Columns[i]
		if b, ok := to[c.Type]; ok && !c.Binary {
			c.RawType = b + strings.TrimPrefix(c.RawType, c.Type)
			c.Type, c.Binary = b, true
		}
	}
}
