package mysqlsource

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// query runs one statement and returns its result set, or nil columns for
// an OK.
func (c *session) query(q string) ([]string, [][]any, error) {
	stmt := trimStatement(q)
	c.now = time.Now() // NOW() and its kin are the statement's start
	word, _, _ := strings.Cut(stmt, " ")
	word = strings.ToUpper(strings.TrimRight(word, "\t\r\n("))
	var (
		cols []string
		rows [][]any
		err  error
	)
	switch word {
	case "SELECT":
		var n ast.StmtNode
		if n, err = c.parse(stmt); err == nil {
			if sel, ok := n.(*ast.SelectStmt); ok {
				cols, rows, err = c.selectStmt(sel)
			} else {
				err = errUnsupported
			}
		}
	case "SET":
		err = c.set(stmt)
	case "SHOW":
		cols, rows, err = c.show(stmt)
	case "KILL":
		err = c.killStmt(stmt)
	case "USE":
		err = c.UseDB(unquoteIdent(strings.TrimSpace(stmt[3:])))
	case "BEGIN", "COMMIT", "ROLLBACK", "START", "DO":
	case "FLUSH":
		if strings.EqualFold(strings.Join(strings.Fields(stmt), " "), "FLUSH PRIVILEGES") {
			c.s.FlushAuthCache()
		} else {
			err = errUnsupported
		}
	case "PURGE":
		err = c.purge(stmt)
	default:
		err = errUnsupported
	}
	if err == errUnsupported {
		return nil, nil, c.unknownStatement(q)
	}
	return cols, rows, err
}

// unknownStatement records a statement the server does not know and
// answers it with MySQL's error for an unsupported feature.
func (c *session) unknownStatement(q string) error {
	c.s.mu.Lock()
	c.s.unknown = append(c.s.unknown, q)
	c.s.mu.Unlock()
	c.s.log.Warn("unknown statement", "query", q)
	short := q
	if len(short) > 64 {
		short = short[:64]
	}
	return mysql.NewDefaultError(mysql.ER_NOT_SUPPORTED_YET, "this statement in the MySQL test source: "+short)
}

// trimStatement drops surrounding space, a trailing semicolon and leading
// comments (not /*! ... */ version comments).
func trimStatement(q string) string {
	s := strings.TrimSpace(q)
	for {
		switch {
		case strings.HasPrefix(s, "/*") && !strings.HasPrefix(s, "/*!"):
			end := strings.Index(s, "*/")
			if end < 0 {
				return s
			}
			s = strings.TrimSpace(s[end+2:])
			continue
		case strings.HasPrefix(s, "-- ") || strings.HasPrefix(s, "#"):
			_, rest, _ := strings.Cut(s, "\n")
			s = strings.TrimSpace(rest)
			continue
		}
		break
	}
	return strings.TrimSpace(strings.TrimRight(s, "; \t\r\n"))
}

// parseError is MySQL's error 1064 for a statement whose text from near
// on it cannot parse.
func parseError(near string) error {
	return mysql.NewError(mysql.ER_PARSE_ERROR, fmt.Sprintf("You have an error in your SQL syntax; check the manual that corresponds to your MySQL "+
		"server version for the right syntax to use near '%s' at line 1", near))
}

// sysvar is @@name (@@global.name when global): the session's value
// when it has one, else the global one; NULL-free, typed as SELECT
// prints it.
func (c *session) sysvar(name string, global, explicit bool) (any, error) {
	name = strings.ToLower(name)
	s := c.s
	s.mu.Lock()
	def, ok := s.vars[name]
	var v string
	if ok {
		v, _ = s.globalLocked(name)
	}
	s.mu.Unlock()
	if !ok {
		return nil, mysql.NewDefaultError(mysql.ER_UNKNOWN_SYSTEM_VARIABLE, name)
	}
	if global && def.scope&scopeGlobal == 0 {
		return nil, mysql.NewError(mysql.ER_INCORRECT_GLOBAL_LOCAL_VAR, fmt.Sprintf("Variable '%s' is a SESSION variable", name))
	}
	if !global {
		if sv, ok := c.vars[name]; ok {
			v = sv
		} else if explicit && def.scope&scopeSession == 0 {
			return nil, mysql.NewError(mysql.ER_INCORRECT_GLOBAL_LOCAL_VAR, fmt.Sprintf("Variable '%s' is a GLOBAL variable", name))
		}
	}
	switch def.kind {
	case kindBool:
		return boolInt(v == "ON"), nil
	case kindInt:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, nil
		}
	}
	return v, nil
}

// set runs a SET statement: system variables (GLOBAL or SESSION), user
// variables, SET NAMES.
func (c *session) set(stmt string) error {
	n, err := c.parse(stmt)
	if err != nil {
		return err
	}
	set, ok := n.(*ast.SetStmt)
	if !ok {
		return errUnsupported
	}
	for _, a := range set.Variables {
		if a.Name == ast.SetNames || a.Name == ast.SetCharset {
			cs := "utf8mb4"
			if a.Value != nil {
				v, err := c.setValue(a.Value)
				if err != nil {
					return err
				}
				cs = strings.ToLower(text(v))
			}
			coll := defaultCollation(cs)
			if a.ExtendValue != nil {
				coll = strings.ToLower(text(a.ExtendValue.GetValue()))
			}
			for _, name := range []string{"character_set_client", "character_set_connection", "character_set_results"} {
				c.vars[name] = cs
			}
			c.vars["collation_connection"] = coll
			continue
		}
		v, err := c.setValue(a.Value)
		if err != nil {
			return err
		}
		if !a.IsSystem {
			c.user[strings.ToLower(a.Name)] = v
			continue
		}
		if err := c.setSystem(strings.ToLower(a.Name), a.IsGlobal, v); err != nil {
			return err
		}
	}
	return nil
}

// setValue evaluates the value of a SET: an identifier (ON, OFF, ROW)
// stands for its name, DEFAULT for nil.
func (c *session) setValue(e ast.ExprNode) (any, error) {
	switch x := e.(type) {
	case *ast.ColumnNameExpr:
		return x.Name.Name.O, nil
	case *ast.DefaultExpr:
		return nil, nil
	}
	return c.eval(e, &relation{}, nil, "field list")
}

// setSystem sets a system variable as MySQL checks it: known, writable,
// in the scope asked.
func (c *session) setSystem(name string, global bool, v any) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	def, ok := s.vars[name]
	if !ok {
		return mysql.NewDefaultError(mysql.ER_UNKNOWN_SYSTEM_VARIABLE, name)
	}
	if def.readOnly {
		return mysql.NewError(mysql.ER_INCORRECT_GLOBAL_LOCAL_VAR, fmt.Sprintf("Variable '%s' is a read only variable", name))
	}
	if global && def.scope&scopeGlobal == 0 {
		return mysql.NewError(mysql.ER_LOCAL_VARIABLE, fmt.Sprintf("Variable '%s' is a SESSION variable and can't be used with SET GLOBAL", name))
	}
	if !global && def.scope&scopeSession == 0 {
		return mysql.NewError(mysql.ER_GLOBAL_VARIABLE, fmt.Sprintf("Variable '%s' is a GLOBAL variable and should be set with SET GLOBAL", name))
	}
	val := text(v)
	if v == nil {
		val = def.def
	}
	if def.kind == kindBool {
		w, ok := boolWord(val)
		if !ok {
			return mysql.NewDefaultError(mysql.ER_WRONG_VALUE_FOR_VAR, name, val)
		}
		val = w
	}
	if global {
		s.globals[name] = val
	} else {
		c.vars[name] = val
	}
	return nil
}

// killStmt runs KILL [CONNECTION | QUERY] id.
func (c *session) killStmt(stmt string) error {
	f := strings.Fields(stmt)
	if len(f) == 3 && (strings.EqualFold(f[1], "CONNECTION") || strings.EqualFold(f[1], "QUERY")) {
		f = []string{f[0], f[2]}
	}
	if len(f) != 2 {
		return errUnsupported
	}
	id, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return parseError(f[1])
	}
	c.s.mu.Lock()
	target, ok := c.s.sessions[uint32(id)]
	c.s.mu.Unlock()
	if !ok {
		return mysql.NewDefaultError(mysql.ER_NO_SUCH_THREAD, id)
	}
	target.kill()
	return nil
}

// purge runs PURGE BINARY LOGS TO 'name'.
func (c *session) purge(stmt string) error {
	toks := tokens(stmt)
	if len(toks) != 5 || !toks[1].is("BINARY", "MASTER") || !toks[2].is("LOGS") || !toks[3].is("TO") || toks[4].kind != tokString {
		return errUnsupported
	}
	if err := c.s.PurgeTo(toks[4].text); err != nil {
		return mysql.NewError(mysql.ER_UNKNOWN_ERROR, "Target log not found in binlog index")
	}
	return nil
}

// unquoteIdent strips backquotes.
func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// A token of a SHOW or PURGE statement.
type token struct {
	kind tokKind
	text string // a word as written; a string or identifier unquoted
}

type tokKind int

const (
	tokWord tokKind = iota
	tokString
	tokIdent // `quoted`
	tokPunct
)

// is tells whether t is one of the words (case-insensitive).
func (t token) is(words ...string) bool {
	return t.kind == tokWord && slices.ContainsFunc(words, func(w string) bool { return strings.EqualFold(t.text, w) })
}

// tokens splits a statement into words, strings, quoted identifiers and
// punctuation.
func tokens(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			i++
		case ch == '\'' || ch == '"' || ch == '`':
			var b strings.Builder
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == '\\' && ch != '`' && j+1 < len(s) {
					j++
					b.WriteByte(s[j])
					continue
				}
				if s[j] == ch {
					if j+1 < len(s) && s[j+1] == ch {
						b.WriteByte(ch)
						j++
						continue
					}
					break
				}
				b.WriteByte(s[j])
			}
			kind := tokString
			if ch == '`' {
				kind = tokIdent
			}
			out = append(out, token{kind: kind, text: b.String()})
			i = j + 1
		case isWordByte(ch):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			out = append(out, token{kind: tokWord, text: s[i:j]})
			i = j
		default:
			out = append(out, token{kind: tokPunct, text: s[i : i+1]})
			i++
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c == '@' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
