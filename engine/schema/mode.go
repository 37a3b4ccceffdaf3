package schema

import "github.com/pingcap/tidb/pkg/parser/mysql"

// SQLMode is the sql_mode of the session that ran a statement, as the
// statement's query event carries it (status variable Q_SQL_MODE_CODE),
// with the bits MySQL and MariaDB give it (the TiDB parser's
// mysql.SQLMode numbers them the same). Text means what it says only
// under its mode: under NO_BACKSLASH_ESCAPES `'x\'` is the whole string
// x\, under the default mode it is an unterminated string; under
// ANSI_QUOTES "x" is a name, not a string. Every parse of DDL text takes
// the mode it ran under; 0 is the default mode.
type SQLMode uint64

// The bits of SQLMode that change how text parses.
const (
	ModePipesAsConcat      SQLMode = 1 << 1
	ModeANSIQuotes         SQLMode = 1 << 2
	ModeIgnoreSpace        SQLMode = 1 << 3
	ModeNoBackslashEscapes SQLMode = 1 << 20
	ModeHighNotPrecedence  SQLMode = 1 << 29
)

// parserMode is the part of m the TiDB parser takes: only what changes
// how text parses, so that no other bit can change a parse.
func (m SQLMode) parserMode() mysql.SQLMode {
	m &= ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace | ModeNoBackslashEscapes | ModeHighNotPrecedence
	return mysql.SQLMode(m)
}
