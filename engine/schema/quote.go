package schema

import "strings"

// mysqlEscaper escapes what a MySQL or MariaDB string literal must not
// hold as it is: the quote and the backslash, and (as
// mysql_real_escape_string does) NUL, newlines and Ctrl-Z, so the text
// stays one line.
var mysqlEscaper = strings.NewReplacer(`\`, `\\`, `'`, `''`, "\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)

// QuoteString returns s as a MySQL or MariaDB string literal: the one
// function braid writes every literal into MySQL text with (defaults,
// ENUM and SET members, comments). The literal reads back as s, byte for
// byte, under any sql_mode without NO_BACKSLASH_ESCAPES, on a connection
// whose charset is utf8mb4 (or any other in which no character's bytes
// hold a \ or a ': not big5, gbk, sjis, cp932).
func QuoteString(s string) string {
	return "'" + mysqlEscaper.Replace(s) + "'"
}

// QuoteStrings returns ss as a comma-separated list of QuoteString
// literals, as ENUM and SET declare their members.
func QuoteStrings(ss []string) string {
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(QuoteString(s))
	}
	return b.String()
}
