package sinktest

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Nasty are strings that break naive quoting of a SQL literal (see
// schema's fuzz test): quotes and backslashes in every order, comment
// and dollar-quote openers, control bytes, NUL, Unicode beyond the BMP
// and combining marks, an injection or two.
var Nasty = []string{"", "'", `\`, `\'`, "''", `\\`, "'\\", "a\x00b", "\x00", "*/", "/*", "$$", "$a$", "#", "-- ", "--",
	"\n", "\r\n", "\x1a", "\t", "名前ü😀", "e\u0301", "\"", "`", "';DROP TABLE t;--", `\'; SELECT 1 #`, "x\\", "%_", "E'x'"}

// NoNUL is pieces without those holding a NUL byte, which PostgreSQL
// text cannot hold.
func NoNUL(pieces []string) []string {
	var out []string
	for _, p := range pieces {
		if !strings.Contains(p, "\x00") {
			out = append(out, p)
		}
	}
	return out
}

// Mixed returns n strings each made of one to six random pieces, seeded
// and the seed logged, so that a failure can be replayed.
func Mixed(t testing.TB, pieces []string, n int) []string {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 1 + r.IntN(6) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		out[i] = b.String()
	}
	return out
}
