package schema_test

import (
	"testing"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/braid-cdc/braid/engine/schema"
)

// Nasty are strings that break naive quoting: quotes, backslashes and
// their mixes, NUL, comment starts, dollar quotes, newlines, Unicode.
var Nasty = []string{"", "'", `\`, `\'`, "''", `\\`, "'\\", "a\x00b", "\x00", "*/", "/*", "$$", "$a$", "#", "-- ", "--",
	"\n", "\r\n", "\x1a", "\t", "名前ü😀", "e\u0301", "\"", "`", "';DROP TABLE t;--", `\'; SELECT 1 #`, "x\\", "%_"}

// FuzzQuoteString: QuoteString's literal is one string token to braid's
// lexer and reads back as the input under the TiDB parser, whatever the
// bytes.
func FuzzQuoteString(f *testing.F) {
	for _, s := range Nasty {
		f.Add(s)
	}
	p := parser.New()
	f.Fuzz(func(t *testing.T, s string) {
		lit := schema.QuoteString(s)
		if !schema.OneStringToken(lit) {
			t.Fatalf("%q: literal %q lexes as more than one string", s, lit)
		}
		if !utf8.ValidString(s) {
			return // the parser reads text
		}
		nodes, _, err := p.Parse("SELECT "+lit+", 1", "", "")
		if err != nil {
			t.Fatalf("%q: SELECT %s: %v", s, lit, err)
		}
		fields := nodes[0].(*ast.SelectStmt).Fields.Fields
		if len(fields) != 2 {
			t.Fatalf("%q: SELECT %s, 1 has %d fields", s, lit, len(fields))
		}
		if got := fields[0].Expr.(ast.ValueExpr).GetValue(); got != s {
			t.Fatalf("%q: literal %q reads back as %q", s, lit, got)
		}
	})
}
