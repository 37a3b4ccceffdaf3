package client

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/braid-cdc/braid/internal/jsontext"
)

// This file is lineDecoder's JSON grammar: white space, literals, numbers
// and strings, and skipping any value, checked as strictly as json's
// scanner checks them, so that what lineDecoder accepts json accepts.

// maxDepth bounds the nesting of unknown values lineDecoder skips; deeper
// ones go to encoding/json, which has a limit of its own.
const maxDepth = 1000

// ws skips JSON white space.
func (d *lineDecoder) ws() {
	for d.pos < len(d.s) {
		if d.s[d.pos] > ' ' {
			return // the usual case: braid writes no white space
		}
		switch d.s[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// eat consumes c if it comes next.
func (d *lineDecoder) eat(c byte) bool {
	if d.pos < len(d.s) && d.s[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// lit consumes the literal word (null, true, false) if it comes next. What
// follows is checked by the caller, which wants a delimiter.
func (d *lineDecoder) lit(word string) bool {
	if strings.HasPrefix(d.s[d.pos:], word) {
		d.pos += len(word)
		return true
	}
	return false
}

func (d *lineDecoder) peek() byte {
	if d.pos < len(d.s) {
		return d.s[d.pos]
	}
	return 0
}

// digits reads a JSON number that is a uint64 as json takes it: digits
// only (a fraction or exponent is an error to json), in range.
func (d *lineDecoder) digits() (uint64, bool) {
	s, i := d.s, d.pos
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		return 0, false
	}
	var n uint64
	if s[i] == '0' {
		i++
	} else {
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			c := uint64(s[i] - '0')
			if n > (1<<64-1-c)/10 {
				return 0, false
			}
			n = n*10 + c
		}
	}
	if i < len(s) {
		switch s[i] {
		case '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return 0, false
		}
	}
	d.pos = i
	return n, true
}

// signed reads a JSON number that is an int64 as json takes it.
func (d *lineDecoder) signed() (int64, bool) {
	neg := d.eat('-')
	n, ok := d.digits()
	switch {
	case !ok:
		return 0, false
	case neg && n <= 1<<63:
		return int64(-n), true // -(1<<63) wraps to itself
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}

// str reads a JSON string. Its value is a view, of the line or of
// unescaped (see value), to be copied if it is kept.
func (d *lineDecoder) str() (string, bool) {
	v, ok := d.value()
	return unsafe.String(unsafe.SliceData(v), len(v)), ok
}

// strSpecial marks the bytes that end a string's fast scan: the quote, the
// backslash, control characters (not allowed unescaped), and non-ASCII
// bytes (json turns invalid UTF-8 into U+FFFD).
var strSpecial = func() (t [256]bool) {
	for c := range t {
		t[c] = c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf
	}
	return t
}()

// scanStr finds the end of the string that starts at d.pos: the index of
// its closing quote (-1 if there is no string there, or an unescaped
// control character in it), and whether its text is its value (no escapes,
// valid UTF-8). It does not move d.pos.
func (d *lineDecoder) scanStr() (end int, plain bool) {
	s := d.s
	i := d.pos
	if i >= len(s) || s[i] != '"' {
		return -1, false
	}
	i = jsontext.PlainRun(s, i+1)
	for i < len(s) && !strSpecial[s[i]] {
		i++
	}
	if i < len(s) && s[i] == '"' {
		return i, true // the common case: plain ASCII
	}
	start := i
	escaped, ascii := false, true
	for i < len(s) {
		switch c := s[i]; {
		case c == '"':
			return i, !escaped && (ascii || utf8.ValidString(s[start:i]))
		case c == '\\':
			escaped = true
			i += 2
		case c < 0x20:
			return -1, false
		default:
			ascii = ascii && c < utf8.RuneSelf
			i++
		}
	}
	return -1, false
}

// unquote decodes a JSON string's text (without its quotes) as json does:
// escapes, UTF-16 surrogate pairs, and U+FFFD for invalid UTF-8 and lone
// surrogates. It fails where the JSON grammar does: an unknown escape, a
// \u without four hex digits, a control character.
// The value is appended to b.
func unquote(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return b, false
			}
			switch e := s[i+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(s[i+2:])
				if r < 0 {
					return b, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r2 := u4(s[i:]); r2 >= 0 {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return b, false
			}
			i += 2
		case c < 0x20 || c == '"':
			return b, false
		case c < utf8.RuneSelf:
			// A run of plain ASCII is the value's own text.
			j := i + 1
			for j < len(s) && !strSpecial[s[j]] {
				j++
			}
			b = append(b, s[i:j]...)
			i = j
		case c >= 0xc2 && c <= 0xdf && i+1 < len(s) && s[i+1]&0xc0 == 0x80:
			b = append(b, c, s[i+1]) // a valid two-byte character (all of latin1's)
			i += 2
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	return b, true
}

// u4 reads a \uXXXX escape at the start of s, -1 if there is none.
func u4(s string) rune {
	if len(s) < 2 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	return hex4(s[2:])
}

// hex4 reads four hex digits at the start of s, -1 if there are not.
func hex4(s string) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// skip skips any JSON value, checking its grammar as json does.
func (d *lineDecoder) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch d.peek() {
	case '"':
		_, ok := d.str()
		return ok
	case '{':
		d.pos++
		d.ws()
		if d.eat('}') {
			return true
		}
		for {
			d.ws()
			if _, ok := d.str(); !ok {
				return false
			}
			d.ws()
			if !d.eat(':') {
				return false
			}
			d.ws()
			if !d.skip(depth + 1) {
				return false
			}
			d.ws()
			if d.eat(',') {
				continue
			}
			return d.eat('}')
		}
	case '[':
		return d.array(func() bool { return d.skip(depth + 1) })
	case 't':
		return d.lit("true")
	case 'f':
		return d.lit("false")
	case 'n':
		return d.lit("null")
	}
	return d.number()
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *lineDecoder) number() bool {
	d.eat('-')
	switch c := d.peek(); {
	case c == '0':
		d.pos++
	case '1' <= c && c <= '9':
		d.run()
	default:
		return false
	}
	if d.eat('.') && !d.run() {
		return false
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.pos++
		if c := d.peek(); c == '+' || c == '-' {
			d.pos++
		}
		return d.run()
	}
	return true
}

// run skips digits and reports whether there was one.
func (d *lineDecoder) run() bool {
	start := d.pos
	for d.pos < len(d.s) && d.s[d.pos] >= '0' && d.s[d.pos] <= '9' {
		d.pos++
	}
	return d.pos > start
}
