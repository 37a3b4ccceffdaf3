package postgres

import "github.com/braid-cdc/braid/spec"

// TranslateDDL is the PostgreSQL translation of a logical DDL statement
// (its tables named as the target's) for sink s.
func TranslateDDL(s spec.Sink, text string) ([]string, error) {
	t := &Target{spec: s}
	tr, err := t.translate(text)
	return tr.sql, err
}

// QuoteLiteral is the one PostgreSQL string literal function.
func QuoteLiteral(s string) string { return quoteLiteral(s) }
