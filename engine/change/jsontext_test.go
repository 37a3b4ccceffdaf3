package change

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestJSONTextMatchesEncodingJSON checks appendJSONString and
// appendJSONLatin1 against encoding/json on random strings mixing long
// plain runs, escapes, multi-byte and invalid UTF-8: the same text once
// decoded.
func TestJSONTextMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"plain text that runs long", "\"", "\\", "\n", "\x01", "\x7f", "é", "📦", "\xff", "\xc3", "abcdefgh", "<>&"}
	for range 20000 {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := sb.String()
		var got string
		if err := json.Unmarshal(AppendJSONString(nil, s), &got); err != nil {
			t.Fatalf("appendJSONString(%q) is not JSON: %v", s, err)
		}
		if want := string([]rune(s)); got != want { // each invalid byte becomes U+FFFD
			t.Fatalf("appendJSONString(%q) reads back as %q", s, got)
		}
		var latin string
		if err := json.Unmarshal(appendJSONLatin1(nil, []byte(s)), &latin); err != nil {
			t.Fatalf("appendJSONLatin1(%q) is not JSON: %v", s, err)
		}
		runes := make([]rune, len(s))
		for i := range len(s) {
			runes[i] = rune(s[i])
		}
		if latin != string(runes) {
			t.Fatalf("appendJSONLatin1(%q) reads back as %q", s, latin)
		}
		if u := appendLatin1Text(nil, []byte(s), false); string(u) != string(runes) {
			t.Fatalf("appendLatin1Text(%q) = %q", s, u)
		}
	}
}
