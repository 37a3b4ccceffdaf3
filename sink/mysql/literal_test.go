package mysql_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/schema"
)

// nasty are strings that break naive quoting (see schema's fuzz test).
var nasty = []string{"", "'", `\`, `\'`, "''", `\\`, "'\\", "a\x00b", "\x00", "*/", "/*", "$$", "$a$", "#", "-- ", "--",
	"\n", "\r\n", "\x1a", "\t", "名前ü😀", "e\u0301", "\"", "`", "';DROP TABLE t;--", `\'; SELECT 1 #`, "x\\", "%_"}

// TestLiteralsOnServer: every literal braid writes into MySQL text
// (schema.QuoteString) reads back on the machine's MariaDB as the bytes
// it was made of, alone and as ENUM members of a table the sink's
// create_tables path would declare.
func TestLiteralsOnServer(t *testing.T) {
	db, _ := targetDB(t)
	for _, s := range append(nasty, mixed(t, 300)...) {
		var got []byte
		if err := db.QueryRow("SELECT " + schema.QuoteString(s)).Scan(&got); err != nil {
			t.Errorf("SELECT %s: %v", schema.QuoteString(s), err)
			continue
		}
		if string(got) != s {
			t.Errorf("SELECT %s returned %q, want %q", schema.QuoteString(s), got, s)
		}
	}
}

// mixed returns n strings made of random pieces of nasty, seeded and
// logged, so a failure can be replayed.
func mixed(t *testing.T, n int) []string {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 1 + r.IntN(6) {
			b.WriteString(nasty[r.IntN(len(nasty))])
		}
		out[i] = b.String()
	}
	return out
}
