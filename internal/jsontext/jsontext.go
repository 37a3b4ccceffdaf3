// Package jsontext holds the word-at-a-time test both ends of the native
// stream use to move over JSON string text: the server's flat writer when
// escaping values, the Go client when scanning them.
package jsontext

import "math/bits"

// Plain8 reports whether the 8 bytes of x are all ASCII that a JSON string
// holds as it is: no control character, '"' or '\\'. (Per byte, v-0x01
// borrows into the top bit only where v is 0, and v-0x20 only where
// v < 0x20, once bytes of 0x80 and up are ruled out; a borrow can only
// spread past a byte that already fails.)
func Plain8(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^('"'*ones), x^('\\'*ones)
	control := (x - 0x20*ones) &^ x
	return (x|control|((quote-ones)&^quote)|((backslash-ones)&^backslash))&tops == 0
}

// Plain reports whether a JSON string holds byte c as it is: ASCII, not a
// control character, '"' or '\\'. Plain8 asks it of eight bytes at once.
func Plain(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

// Load reads s[i:i+8] as a little-endian number, in one load.
func Load(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// PlainRun returns the end of the run of plain bytes (see Plain8) of s
// that starts at i, found 8 bytes at a time: it stops at or before the
// first byte that is not plain.
func PlainRun(s string, i int) int {
	for i+8 <= len(s) && Plain8(Load(s, i)) {
		i += 8
	}
	return i
}

// PlainPrefix8 is how many of the 8 bytes of x (read little-endian, as
// Load reads them) are plain (see Plain) before the first that is not: 8
// when all are. Plain8's borrows only spread past a byte that already
// fails, so the lowest byte it flags is the first one needing care.
func PlainPrefix8(x uint64) int {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^('"'*ones), x^('\\'*ones)
	control := (x - 0x20*ones) &^ x
	m := (x | control | ((quote - ones) &^ quote) | ((backslash - ones) &^ backslash)) & tops
	return bits.TrailingZeros64(m) >> 3
}
