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

// SetCopyMin makes n the fewest changes of a run that t sends through
// COPY (1: every run; more than a transaction holds: none), before its
// sink runs.
func SetCopyMin(t *Target, n int) { t.copyMin = n }

// CopiedRows are the rows t's committed transactions sent through COPY
// into the target and into the staging table.
func CopiedRows(t *Target) (direct, staged uint64) { return t.copied.Load(), t.staged.Load() }

// SetCopyText makes t send every COPY in the text format, before its
// sink runs.
func SetCopyText(t *Target) { t.copyBinary = false }

// CopiedBinary are the rows t's committed transactions sent through COPY
// in the binary format.
func CopiedBinary(t *Target) uint64 { return t.copiedBinary.Load() }
