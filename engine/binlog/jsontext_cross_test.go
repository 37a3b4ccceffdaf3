package binlog_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
)

// TestJSONTextAgainstEncoder cross-checks braid's reading of binary JSON
// against the MySQL 8 encoder (mysqlbinlog.EncodeJSON, itself checked
// against real servers' bytes): random documents written as MySQL prints
// them (keys by length then bytes, ", " and ": ") are encoded, and braid
// must print them back byte for byte, in small and large containers,
// every integer width, doubles, escapes and nesting. The seed is logged.
func TestJSONTextAgainstEncoder(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 300 {
		text := randomJSON(r, 0)
		doc, err := mysqlbinlog.EncodeJSON(text)
		if err != nil {
			t.Fatalf("document %d: encode %.80q: %v", i, text, err)
		}
		got, err := change.AppendMySQLJSON(nil, doc)
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if string(got) != text {
			t.Fatalf("document %d (seed %d):\n got %.300s\nwant %.300s", i, seed, got, text)
		}
	}
}

// randomJSON writes a random JSON value as MySQL prints it.
func randomJSON(r *rand.Rand, depth int) string {
	kind := r.IntN(10)
	if depth > 3 {
		kind = r.IntN(7)
	}
	switch kind {
	case 0:
		return []string{"null", "true", "false"}[r.IntN(3)]
	case 1: // int16, int32, int64 and uint64 ranges
		return strconv.FormatInt(r.Int64N(1<<uint(r.IntN(62)+1))-r.Int64N(1<<uint(r.IntN(62)+1)), 10)
	case 2:
		return strconv.FormatUint(1<<63+r.Uint64N(1<<63), 10)
	case 3: // doubles whose MySQL text is known
		return []string{"2.5", "-0.125", "1e100", "0.00000015", "100.0", "-1.5e-300", "123456.789"}[r.IntN(7)]
	case 4, 5:
		return quoteJSON(randomString(r))
	case 6:
		if r.IntN(20) == 0 { // past 64 KiB: a large container around it
			return quoteJSON(strings.Repeat("x", 70000))
		}
		return quoteJSON("")
	case 7, 8:
		n := r.IntN(6)
		keys := map[string]bool{}
		for range n {
			keys[randomString(r)] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.SortFunc(sorted, func(a, b string) int {
			if len(a) != len(b) {
				return len(a) - len(b)
			}
			return strings.Compare(a, b)
		})
		var b strings.Builder
		b.WriteByte('{')
		for i, k := range sorted {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteJSON(k) + ": " + randomJSON(r, depth+1))
		}
		return b.String() + "}"
	default:
		n := r.IntN(6)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = randomJSON(r, depth+1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
}

func randomString(r *rand.Rand) string {
	pieces := []string{"a", "b", "key", "é", "🦆", `"`, `\`, "\t", "\n", "\x01", "/", " "}
	var b strings.Builder
	for range r.IntN(5) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// quoteJSON quotes s as MySQL prints a JSON string.
func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range []byte(s) {
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case 1:
			b.WriteString(`\u0001`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String() + `"`
}
