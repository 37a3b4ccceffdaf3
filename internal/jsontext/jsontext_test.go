package jsontext

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestPlain8 checks the eight-bytes-at-once test against the byte-wise
// rule, on every byte value in every position and on random words.
func TestPlain8(t *testing.T) {
	check := func(x uint64) {
		want := true
		for k := range 8 {
			c := byte(x >> (8 * k))
			want = want && c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' // the rule, spelled out
		}
		if got := Plain8(x); got != want {
			t.Fatalf("Plain8(%#016x) = %v, want %v", x, got, want)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []uint64{0x4141414141414141, 0x2020202020202020, 0x7e7e7e7e7e7e7e7e, 0x2121212121212121, 0x5d5d5d5d5d5d5d5d} {
				check(fill&^(0xff<<(8*pos)) | uint64(c)<<(8*pos))
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		x := rng.Uint64() & 0x7f7f7f7f7f7f7f7f // mostly ASCII: the hard cases
		if rng.IntN(4) == 0 {
			x = rng.Uint64()
		}
		check(x)
	}
}

// TestPlainRun checks that a run stops at or before the first byte that is
// not plain, and reaches within 8 bytes of it.
func TestPlainRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := "abcdefgh \x1f\"\\\x7f\x80é"
	for range 100_000 {
		b := make([]byte, rng.IntN(40))
		for k := range b {
			if rng.IntN(10) == 0 {
				b[k] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[k] = 'a' + byte(rng.IntN(26))
			}
		}
		s, from := string(b), rng.IntN(len(b)+1)
		first := from
		for first < len(s) && Plain(s[first]) {
			first++
		}
		if got := PlainRun(s, from); got > first || first >= got+8 {
			t.Fatalf("PlainRun(%q, %d) = %d; the first byte needing care is at %d", s, from, got, first)
		}
	}
}

// TestPlainPrefix8 checks the count of leading plain bytes against the
// byte-wise rule: every byte value in every position, behind every other
// byte value in the positions before it, and random words.
func TestPlainPrefix8(t *testing.T) {
	check := func(x uint64) {
		want := 0
		for want < 8 && Plain(byte(x>>(8*want))) {
			want++
		}
		if got := PlainPrefix8(x); got != want {
			t.Fatalf("PlainPrefix8(%#016x) = %d, want %d", x, got, want)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			for d := range 256 { // a second odd byte above it: borrows must not reach down
				for _, fill := range []uint64{0x4141414141414141, 0x2020202020202020, 0x7e7e7e7e7e7e7e7e, 0x2121212121212121} {
					x := fill&^(0xff<<(8*pos)) | uint64(c)<<(8*pos)
					if pos < 7 {
						x = x&^(0xff<<(8*(pos+1))) | uint64(d)<<(8*(pos+1))
					}
					check(x)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1_000_000 {
		x := rng.Uint64() & 0x7f7f7f7f7f7f7f7f
		if rng.IntN(4) == 0 {
			x = rng.Uint64()
		}
		check(x)
	}
}
