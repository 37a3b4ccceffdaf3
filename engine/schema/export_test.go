package schema

// OneStringToken reports whether braid's lexer reads s, in the default
// sql_mode, as exactly one string literal.
func OneStringToken(s string) bool {
	l := ddlLexer{src: s, quiet: true}
	tok, ok := l.next()
	if !ok || tok.kind != ddlString || tok.start != 0 || tok.end != len(s) {
		return false
	}
	_, more := l.next()
	return !more
}
