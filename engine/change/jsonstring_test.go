package change

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/braid-cdc/braid/internal/jsontext"
)

// appendJSONStringRef is AppendJSONString as it was before its word-at-a-
// time writer: a run of plain bytes copied with one append, each escape
// appended on its own. It is the reference the fast one must match byte
// for byte.
func appendJSONStringRef(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsontext.Plain(c) {
			i = jsontext.PlainRun(s, i+1)
			for i < len(s) && jsontext.Plain(s[i]) {
				i++
			}
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// checkJSONString compares AppendJSONString with the reference on s,
// appended after prefix in a buffer of spare capacity room: the same
// bytes, the prefix untouched.
func checkJSONString(t *testing.T, prefix, s string, room int) {
	t.Helper()
	buf := make([]byte, len(prefix), len(prefix)+room)
	copy(buf, prefix)
	got := AppendJSONString(buf, s)
	want := appendJSONStringRef([]byte(prefix), s)
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendJSONString(%q after %q, room %d)\n got %q\nwant %q", s, prefix, room, got, want)
	}
}

// TestAppendJSONStringMatchesRef checks the word-at-a-time writer against
// the run-by-run reference on random strings built to meet its edges:
// escapes at every offset of a word, strings of every length around a
// word, every ASCII byte, multi-byte and invalid UTF-8 across word ends,
// output buffers with no room and with some, long strings of escapes
// only (the output grows past the room reserved).
func TestAppendJSONStringMatchesRef(t *testing.T) {
	for c := range 256 {
		for pad := range 17 {
			s := strings.Repeat("a", pad) + string(rune(c)) + string([]byte{byte(c)}) + strings.Repeat("b", pad)
			checkJSONString(t, "", s, 0)
			checkJSONString(t, "x", s, 3)
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	pieces := []string{"a", "plain", "longer plain run!", "\"", "\\", "\n", "\r", "\t", "\x00", "\x01", "\x1f", " ", "\x7f",
		"é", "ó", "€", "📦", "\xff", "\xc3", "\xe2\x82", "\xf0\x9f\x93", "\xed\xa0\x80", "\xef\xbf\xbd", `{"sku": "SKU-00031", "qty": 3}`}
	for range 200_000 {
		var sb strings.Builder
		for range rng.IntN(24) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		checkJSONString(t, strings.Repeat("p", rng.IntN(20)), sb.String(), rng.IntN(64))
	}
	checkJSONString(t, "", strings.Repeat("\x01", 10_000), 0) // six bytes out for each in
	checkJSONString(t, "", strings.Repeat("\"é\xff", 5_000), 7)
	for pad := range 9 { // words of quotes and backslashes only, escaped in place
		checkJSONString(t, strings.Repeat("p", pad), strings.Repeat("a", pad)+strings.Repeat(`"\`, 5_000), pad)
	}
}

// FuzzAppendJSONString compares the word-at-a-time writer with the
// reference on any bytes.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `{"a": "b\"c"}`, "\x00\x1f\x7f", "Kraków", "\xff\xfe", "📦📦", strings.Repeat("é", 9)} {
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, s string, room int) {
		checkJSONString(t, "ab", s, room&63)
	})
}

// BenchmarkAppendJSONString writes the orders fixture's JSON document
// (bench/orders_workload.go: a quote every few bytes, one é-like
// character) and a plain VARCHAR, with the writer and with the reference.
func BenchmarkAppendJSONString(b *testing.B) {
	doc := `{"sku": "SKU-00031", "qty": 4, "price": 31.99, "tags": ["web", "std"], "ship": {"city": "Kraków", "zip": "00961"}}`
	note := "order note 31 for user 12 with a few plain words"
	for _, fn := range []struct {
		name string
		f    func([]byte, string) []byte
	}{{"fast", AppendJSONString}, {"ref", appendJSONStringRef}} {
		b.Run(fn.name, func(b *testing.B) {
			buf := make([]byte, 0, 4096)
			b.SetBytes(int64(len(doc) + len(note)))
			for b.Loop() {
				buf = fn.f(buf[:0], doc)
				buf = fn.f(buf, note)
			}
		})
	}
}
