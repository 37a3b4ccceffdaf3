package change

import (
	"crypto/md5"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLatin1Text: latin1 bytes become their UTF-8 characters, as plain
// text and as a JSON string with the characters JSON needs escaped.
func TestLatin1Text(t *testing.T) {
	in := []byte("plain \"q\" \\ \n\x01 caf\xe9 \xff end")
	const want = "plain \"q\" \\ \n\x01 café ÿ end"
	if got := string(appendLatin1Text([]byte("<"), in, false)); got != "<"+want {
		t.Errorf("text %q, want %q", got, "<"+want)
	}
	quoted := appendLatin1Text(nil, in, true)
	var back string
	if err := json.Unmarshal(quoted, &back); err != nil || back != want {
		t.Errorf("JSON %s decodes to %q (%v), want %q", quoted, back, err, want)
	}
	if got := string(appendLatin1Text(nil, []byte("ascii"), true)); got != `"ascii"` {
		t.Errorf("JSON %s, want \"ascii\"", got)
	}
}

// TestEightBit checks the conversion against the byte-by-byte rule on
// random bytes, from all non-ASCII to ASCII runs of every length around the
// 8-byte steps.
func TestEightBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20_000 {
		x := make([]byte, rng.IntN(40))
		high := 1 + rng.IntN(12) // one byte in high is non-ASCII: from all to few
		for i := range x {
			x[i] = byte('a' + rng.IntN(26))
			if rng.IntN(high) == 0 {
				x[i] = byte(0x80 + rng.IntN(0x80))
			}
		}
		for _, cp1252 := range []bool{false, true} {
			var want []rune
			for _, c := range x {
				r := rune(c)
				if cp1252 && c >= 0x80 && c < 0xa0 {
					r = cp1252High[c-0x80]
				}
				want = append(want, r)
			}
			if got := appendEightBit([]byte("<"), x, cp1252); string(got) != "<"+string(want) {
				t.Fatalf("appendEightBit(%q, %v) = %q, want %q", x, cp1252, got, "<"+string(want))
			}
		}
	}
}

// TestConvertedInvalid: bytes a charset does not map come out as U+FFFD,
// and the text is valid UTF-8 whatever the input.
func TestConvertedInvalid(t *testing.T) {
	for _, c := range []struct {
		cs   string
		in   []byte
		want string
	}{
		{"gbk", []byte{0xd6, 0xd0, 0x81}, "中\uFFFD"},
		{"sjis", []byte{0x93, 0xfa, 0xff}, "日\uFFFD"},
		{"utf16", []byte{0x00, 0x41, 0xd8, 0x3d}, "A\uFFFD"}, // a lone surrogate
		{"utf16", []byte{0x00, 0x41, 0x00}, "A\uFFFD"},       // an odd byte
		{"cp1251", []byte{0xcf, 0x98}, "П\uFFFD"},            // 0x98 is unassigned in Windows-1251
	} {
		got := string(appendConverted(nil, c.cs, c.in))
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("%s %x: %q, want %q", c.cs, c.in, got, c.want)
		}
	}
}

// BenchmarkEightBit converts binary values as canal shows them: 16-byte
// MD5 digests, 4,096 different ones in turn (the same one each time lets
// the CPU learn its branches), and ASCII text of 16 and 116 bytes.
func BenchmarkEightBit(b *testing.B) {
	digests := make([][]byte, 4096)
	for i := range digests {
		d := md5.Sum([]byte{byte(i), byte(i >> 8)})
		digests[i] = d[:]
	}
	buf := make([]byte, 0, 1024)
	b.Run("md5", func(b *testing.B) {
		i := 0
		for b.Loop() {
			buf = appendEightBit(buf[:0], digests[i%len(digests)], false)
			i++
		}
	})
	for _, n := range []int{16, 116} {
		x := []byte(strings.Repeat("Q", n))
		b.Run(fmt.Sprintf("ascii%d", n), func(b *testing.B) {
			for b.Loop() {
				buf = appendEightBit(buf[:0], x, false)
			}
		})
	}
}
