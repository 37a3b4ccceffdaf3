package schema

import (
	"strings"
)

// The MySQL lexer under the DDL parser (schema_parse.go): tokens, statement
// classification by leading keywords, and ddlLead, the cheap check every
// query event goes through.

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
	ddlDatabase                    // CREATE / ALTER DATABASE (SCHEMA): a default charset
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
	mode   SQLMode
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
		// Under ANSI_QUOTES "..." is a name; under NO_BACKSLASH_ESCAPES a
		// backslash in a string is a plain byte, as the server lexes them.
		ident := c == '`' || c == '"' && l.mode&ModeANSIQuotes != 0
		escapes := !ident && l.mode&ModeNoBackslashEscapes == 0
		i := start + 1
		for i < len(src) {
			switch {
			case src[i] == '\\' && escapes:
				i += 2
				continue
			case src[i] == c && i+1 < len(src) && src[i+1] == c:
				i += 2
				continue
			case src[i] == c:
				i++
				l.pos = i
				if ident {
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
		case i == 1 && (t.is(1, "DATABASE") || t.is(1, "SCHEMA")):
			return ddlDatabase
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
		if t.is(1, "DATABASE") || t.is(1, "SCHEMA") {
			return ddlDatabase
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

// truncateLead reports whether sql starts with TRUNCATE, lexing one token.
func truncateLead(sql string) bool {
	l := ddlLexer{src: sql, quiet: true}
	tok, ok := l.next()
	return ok && ddlToks{src: sql, toks: []ddlToken{tok}}.is(0, "TRUNCATE")
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
