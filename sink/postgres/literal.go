package postgres

import "strings"

// pgEscaper escapes what a PostgreSQL escape string (E'...') must not
// hold as it is: the quote and the backslash.
var pgEscaper = strings.NewReplacer(`\`, `\\`, `'`, `''`)

// quoteLiteral returns s as a PostgreSQL string literal: the one
// function braid writes every literal into PostgreSQL text with
// (defaults, names compared as values). A string with a backslash is an
// escape string (E'...'), which reads the same whatever
// standard_conforming_strings is; PostgreSQL text cannot hold NUL, so a
// literal with one is an error at the server, never another statement.
func quoteLiteral(s string) string {
	if strings.ContainsRune(s, '\\') {
		return "E'" + pgEscaper.Replace(s) + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
