package change

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/internal/jsontext"
)

// rawEqual compares two go-mysql values of one column.
func rawEqual(a, b any) bool {
	ab, aok := a.([]byte)
	bb, bok := b.([]byte)
	if aok || bok {
		return aok && bok && bytes.Equal(ab, bb)
	}
	return a == b
}

// rawKind is how appendRawText formats a column's raw value, decided once
// per table version (rawKindOf).
type rawKind uint8

const (
	rawDecode    rawKind = iota // decode it, then format the value (appendText)
	rawSigned                   // a little-endian integer, sign-extended
	rawUnsigned                 // a little-endian integer
	rawYear                     // a year since 1900, 0 for 0000
	rawFloat                    // FLOAT
	rawDouble                   // DOUBLE
	rawDecimal                  // DECIMAL's binary digits
	rawDate                     // DATE
	rawDatetime                 // DATETIME(n)
	rawTimestamp                // TIMESTAMP(n), shown in the source's zone
	rawTime                     // TIME(n), with its n fraction digits
	rawText                     // length-prefixed text, valid UTF-8 or made so
	rawBinary                   // length-prefixed bytes, shown as ISO-8859-1
	rawConverted                // length-prefixed text of Column.Charset, converted to UTF-8
	rawEnum                     // an ENUM's member number
	rawSet                      // a SET's member bits
	rawJSON                     // MySQL's binary JSON, shown as SELECT prints it
	rawVector                   // MySQL 9's VECTOR, shown as VECTOR_TO_STRING prints it
)

// rawKindOf decides how column c, of binlog type tp, is formatted raw: the
// way appendText formats the value go-mysql decodes (converts: whether that
// value needs converting, see Codec.converts).
func rawKindOf(c *Column, tp byte, meta uint16, converts bool) rawKind {
	real, _ := stringColumn(tp, meta)
	switch real {
	case mysql.MYSQL_TYPE_JSON:
		return rawJSON
	case mysql.MYSQL_TYPE_VECTOR:
		return rawVector
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
		switch {
		case c.Type == "enum" || c.Type == "set" || c.Type == "bit":
		case c.Unsigned:
			return rawUnsigned
		default:
			return rawSigned
		}
	case mysql.MYSQL_TYPE_YEAR:
		return rawYear
	case mysql.MYSQL_TYPE_ENUM:
		if c.Type == "enum" {
			return rawEnum
		}
	case mysql.MYSQL_TYPE_SET:
		if c.Type == "set" {
			return rawSet
		}
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY:
		switch {
		case c.Binary:
			return rawBinary
		case c.Charset != "":
			return rawConverted
		}
		return rawText
	}
	if real == mysql.MYSQL_TYPE_TIME2 {
		return rawTime // (converted only for the zero fraction it writes out)
	}
	if converts {
		return rawDecode
	}
	switch real {
	case mysql.MYSQL_TYPE_FLOAT:
		return rawFloat
	case mysql.MYSQL_TYPE_DOUBLE:
		return rawDouble
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		return rawDecimal
	case mysql.MYSQL_TYPE_DATE:
		return rawDate
	case mysql.MYSQL_TYPE_DATETIME2:
		return rawDatetime
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		return rawTimestamp
	}
	return rawDecode
}

// appendRawText writes column i's value, read from the row image bytes v
// (starting at the value), exactly as appendText writes the value go-mysql
// decodes from them. The common cases format straight from the bytes; the
// rest decode the value first.
func (t *Codec) appendRawText(b []byte, i int, v []byte, quoted bool) []byte {
	meta := t.metas[i]
	switch t.kinds[i] {
	case rawSigned:
		n := t.Shapes[i].fixed
		shift := 64 - 8*n
		return appendIntText(b, int64(readUint(v, n)<<shift)>>shift, quoted)
	case rawUnsigned:
		return appendUintText(b, readUint(v, t.Shapes[i].fixed), quoted)
	case rawYear:
		year := int64(0)
		if v[0] != 0 {
			year = int64(v[0]) + 1900
		}
		return appendIntText(b, year, quoted)
	case rawText:
		return appendStringText(b, bytesString(t.Shapes[i].bytes(v)), quoted)
	case rawConverted:
		return appendConvertedText(b, t.Columns[i].Charset, t.Shapes[i].bytes(v), quoted)
	case rawEnum:
		// MySQL stores an invalid ENUM value as 0, shown as ''.
		elems, name := t.Columns[i].Elems, ""
		if k := readUint(v, t.Shapes[i].fixed); k >= 1 && k <= uint64(len(elems)) {
			name = elems[k-1]
		}
		return appendStringText(b, name, quoted)
	case rawSet:
		var names [128]byte // the members joined by commas, on the stack when short
		return appendStringText(b, bytesString(appendSetNames(names[:0], t.Columns[i].Elems, readUint(v, t.Shapes[i].fixed))), quoted)
	case rawJSON:
		var short [256]byte // the text, on the stack when short
		text, err := AppendMySQLJSON(short[:0], t.Shapes[i].bytes(v))
		if err != nil {
			return b // not reached: SplitRows checked the document
		}
		return appendStringText(b, bytesString(text), quoted)
	case rawVector:
		if quoted { // the text never needs escaping
			b = append(b, '"')
			return append(appendVector(b, t.Shapes[i].bytes(v)), '"')
		}
		return appendVector(b, t.Shapes[i].bytes(v))
	case rawBinary:
		if x := t.Shapes[i].bytes(v); t.binWidth == nil || t.binWidth[i] <= len(x) {
			return appendLatin1Text(b, x, quoted)
		}
	case rawFloat, rawDouble, rawDecimal, rawDate, rawDatetime, rawTimestamp, rawTime:
		// Their text never needs escaping.
		if quoted {
			b = append(b, '"')
		}
		switch t.kinds[i] {
		case rawFloat:
			b = appendFloat(b, float64(math.Float32frombits(binary.LittleEndian.Uint32(v))), 32)
		case rawDouble:
			b = appendFloat(b, math.Float64frombits(binary.LittleEndian.Uint64(v)), 64)
		case rawDecimal:
			b, _ = appendDecimal(b, v, int(meta>>8), int(meta&0xff))
		case rawDate:
			b = appendDate(b, v)
		case rawDatetime:
			b, _ = appendDatetime2(b, v, int(meta))
		case rawTime:
			b = appendTime2(b, v, int(meta), true)
		default:
			b, _ = appendTimestamp2(b, v, int(meta), t.tz)
		}
		if quoted {
			b = append(b, '"')
		}
		return b
	}
	val, _, err := decodeValue(v, t.types[i], meta, t.tz)
	if err != nil || val == nil {
		return b // not reached: the image was split with the same types
	}
	return t.appendText(b, i, val, quoted)
}

// readUint reads an n-byte little-endian unsigned integer.
func readUint(v []byte, n int) uint64 {
	switch n {
	case 1:
		return uint64(v[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(v))
	case 4:
		return uint64(binary.LittleEndian.Uint32(v))
	case 8:
		return binary.LittleEndian.Uint64(v)
	}
	return littleEndian(v[:n])
}

// rawEqual reports whether column i has the same value at offsets a and b
// of a raw rows event's data (-1: NULL): the same bytes, or for FLOAT and
// DOUBLE the same number, as go-mysql's values compare.
func (t *Codec) rawEqual(i int, data []byte, a, b int32) bool {
	if a < 0 || b < 0 {
		return a == b
	}
	x, y := data[a:], data[b:]
	switch t.types[i] {
	case mysql.MYSQL_TYPE_FLOAT:
		return math.Float32frombits(binary.LittleEndian.Uint32(x)) == math.Float32frombits(binary.LittleEndian.Uint32(y))
	case mysql.MYSQL_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(x)) == math.Float64frombits(binary.LittleEndian.Uint64(y))
	}
	sh := t.Shapes[i]
	return bytes.Equal(x[:sh.len(x)], y[:sh.len(y)])
}

// decodeRaw decodes a raw image, at holding each column's offset in data,
// to go-mysql's values.
func (t *Codec) decodeRaw(data []byte, at []int32) []any {
	vals := make([]any, len(at))
	for i, off := range at {
		if off >= 0 {
			vals[i], _, _ = decodeValue(data[off:], t.types[i], t.metas[i], t.tz)
		}
	}
	return vals
}

// appendText writes column i's go-mysql value v (not nil) in canal's
// string form: as a JSON string when quoted is set, else as plain UTF-8
// text (for canal's protobuf entries). The common cases format straight
// from v; the rest go through the one conversion, Codec.value.
func (t *Codec) appendText(b []byte, i int, v any, quoted bool) []byte {
	c := &t.Columns[i]
	if !t.converts[i] {
		return appendValueText(b, v, quoted)
	}
	plainInt := c.Type != "enum" && c.Type != "set" && c.Type != "bit"
	switch x := v.(type) {
	case int8:
		if plainInt && c.Unsigned {
			return appendUintText(b, uint64(uint8(x)), quoted)
		} else if plainInt {
			return appendIntText(b, int64(x), quoted)
		}
	case int16:
		if plainInt && c.Unsigned {
			return appendUintText(b, uint64(uint16(x)), quoted)
		} else if plainInt {
			return appendIntText(b, int64(x), quoted)
		}
	case int32:
		if plainInt && !c.Unsigned {
			return appendIntText(b, int64(x), quoted)
		}
	case []byte:
		if c.Charset != "" && !c.Binary {
			return appendConvertedText(b, c.Charset, x, quoted)
		}
		if !c.Binary {
			// Read in place: the bytes are only read during this call.
			return appendStringText(b, unsafe.String(unsafe.SliceData(x), len(x)), quoted)
		}
		if t.binWidth == nil || t.binWidth[i] <= len(x) {
			return appendLatin1Text(b, x, quoted)
		}
	}
	return appendValueText(b, t.value(i, v), quoted)
}

// appendConvertedText writes text x of charset cs (a Column.Charset),
// converted to UTF-8, as appendStringText writes text.
func appendConvertedText(b []byte, cs string, x []byte, quoted bool) []byte {
	if !quoted && cs == charsetLatin1 {
		return appendLatin1UTF8(b, x) // valid UTF-8 as it is
	}
	var short [256]byte // the converted text, on the stack when short
	return appendStringText(b, bytesString(appendConverted(short[:0], cs, x)), quoted)
}

func appendIntText(b []byte, v int64, quoted bool) []byte {
	if !quoted {
		return strconv.AppendInt(b, v, 10)
	}
	b = append(b, '"')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '"')
}

func appendUintText(b []byte, v uint64, quoted bool) []byte {
	if !quoted {
		return strconv.AppendUint(b, v, 10)
	}
	b = append(b, '"')
	b = strconv.AppendUint(b, v, 10)
	return append(b, '"')
}

func appendStringText(b []byte, s string, quoted bool) []byte {
	if quoted {
		return AppendJSONString(b, s)
	}
	return appendValidUTF8(b, s)
}

func appendLatin1Text(b []byte, x []byte, quoted bool) []byte {
	if quoted {
		return appendJSONLatin1(b, x)
	}
	return appendEightBit(b, x, false)
}

// appendValidUTF8 appends s with each invalid UTF-8 byte replaced by
// U+FFFD, as appendJSONString does: protobuf strings must be valid UTF-8.
func appendValidUTF8(b []byte, s string) []byte {
	if utf8.ValidString(s) {
		return append(b, s...)
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// appendValueText writes Value v's canal string form; see appendText.
func appendValueText(b []byte, v Value, quoted bool) []byte {
	switch x := v.(type) {
	case string:
		return appendStringText(b, x, quoted)
	case int64:
		return appendIntText(b, x, quoted)
	case uint64:
		return appendUintText(b, x, quoted)
	case []byte:
		return appendLatin1Text(b, x, quoted)
	}
	return appendStringText(b, FormatValue(v), quoted)
}

// FormatValue is a Value's canal string form (see flat.Writer); NULL is "".
func FormatValue(v Value) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float32:
		return formatFloat(float64(x), 32)
	case float64:
		return formatFloat(x, 64)
	case []byte:
		r := make([]rune, len(x))
		for i, c := range x {
			r[i] = rune(c)
		}
		return string(r)
	}
	return ""
}

// formatFloat writes a FLOAT (bits 32) or DOUBLE as canal does, with
// Java's Float.toString and Double.toString: the shortest digits that read
// back as the same value, in plain notation with at least one fraction
// digit from 10^-3 up to 10^7 ("3.0", "0.001"), else in Java's scientific
// notation ("1.0E7", "1.5E-7").
func formatFloat(f float64, bits int) string {
	return string(appendFloat(nil, f, bits))
}

// appendFloat appends formatFloat's text.
func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		switch {
		case math.IsNaN(f):
			return append(b, "NaN"...)
		case f > 0:
			return append(b, "Infinity"...)
		}
		return append(b, "-Infinity"...)
	}
	if a := math.Abs(f); a == 0 || a >= 1e-3 && a < 1e7 {
		b = strconv.AppendFloat(b, f, 'f', -1, bits)
		if f == math.Trunc(f) {
			// Go wrote no fraction: below 10^7 the shortest digits of a
			// float are an integer exactly when its value is one (the
			// gap between floats there is at most 0.5 for FLOAT).
			b = append(b, '.', '0')
		}
		return b
	}
	// Go writes 1.5e-07 and 1e+07; Java 1.5E-7 and 1.0E7.
	var digits [32]byte
	sci := strconv.AppendFloat(digits[:0], f, 'e', -1, bits)
	mantissa, exp, _ := bytes.Cut(sci, []byte{'e'})
	b = append(b, mantissa...)
	if !bytes.ContainsRune(mantissa, '.') {
		b = append(b, '.', '0')
	}
	b = append(b, 'E')
	if exp[0] == '-' {
		b = append(b, '-')
	}
	exp = bytes.TrimLeft(exp[1:], "0")
	if len(exp) == 0 {
		exp = []byte{'0'}
	}
	return append(b, exp...)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString writes s as a JSON string; invalid UTF-8 becomes
// U+FFFD. It writes by index into room reserved up front (s's length and
// a little), growing it only when escapes take more: eight bytes are
// loaded and stored at once and the output moves on by as many of them as
// are plain (jsontext.PlainPrefix8), so a short run between two escapes
// costs one load, one store and a count, not a copy of its own. (JSON
// documents, quotes every few bytes, took a third of `braid capture`'s
// CPU with a copy a run.)
func AppendJSONString(b []byte, s string) []byte {
	n := len(b)
	out := slices.Grow(b, len(s)+jsonSlack)
	out = out[:cap(out)]
	out[n] = '"'
	j := n + 1
	for i := 0; i < len(s); {
		if len(out)-j < jsonSlack {
			out = slices.Grow(out[:j], len(s)-i+jsonSlack)
			out = out[:cap(out)]
		}
		if i+8 <= len(s) {
			x := jsontext.Load(s, i)
			binary.LittleEndian.PutUint64(out[j:], x)
			k, left := jsontext.PlainPrefix8(x), 8
			// Quotes and backslashes are escaped without leaving the
			// word: the backslash goes where the quote was stored, and
			// the rest of the word is stored again one byte on. (A JSON
			// document has a quote every few bytes; going round the loop
			// for each took 13% of capture's CPU on the orders shape.)
			for k < left {
				c := byte(x >> (8 * k))
				if c != '"' && c != '\\' {
					break
				}
				x >>= 8 * k
				out[j+k] = '\\'
				binary.LittleEndian.PutUint64(out[j+k+1:], x)
				i += k + 1
				j += k + 2
				left -= k + 1
				x >>= 8
				// The bytes shifted in are zeros, never plain: k stops at
				// left when the rest of the word is plain.
				k = jsontext.PlainPrefix8(x)
			}
			if k >= left {
				i += left
				j += left
				continue
			}
			i += k
			j += k
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				j += copy(out[j:], `\ufffd`)
			} else {
				j += copy(out[j:], s[i:i+size])
			}
			i += size
			continue
		}
		switch e := jsonEscapes[c]; e {
		case 0:
			out[j] = c
			j++
		case 'u':
			out[j], out[j+1], out[j+2], out[j+3], out[j+4], out[j+5] = '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf]
			j += 6
		default:
			out[j], out[j+1] = '\\', e
			j += 2
		}
		i++
	}
	out[j] = '"'
	return out[:j+1]
}

// jsonSlack is the room AppendJSONString keeps beyond what it has still
// to write as it is: a word of eight quotes escaped in place (16 bytes,
// the last of its stores reaching 24 bytes on) or a word stored whole
// after which the longest escape (6) follows, and the closing quote.
const jsonSlack = 32

// jsonEscapes holds, for each ASCII byte, 0 when a JSON string holds it as
// it is, else the letter of its escape after the backslash: the byte
// itself for '"' and '\\', n, r and t for those controls, and u for the
// other controls (\u00XX).
var jsonEscapes = func() (t [utf8.RuneSelf]byte) {
	for c := range utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\':
			t[c] = byte(c)
		case c == '\n':
			t[c] = 'n'
		case c == '\r':
			t[c] = 'r'
		case c == '\t':
			t[c] = 't'
		case c < 0x20:
			t[c] = 'u'
		}
	}
	return t
}()

// appendJSONLatin1 writes bytes as a JSON string of ISO-8859-1 characters.
func appendJSONLatin1(b []byte, x []byte) []byte {
	b = slices.Grow(b, len(x)+len(x)/2+2)
	b = append(b, '"')
	for i := 0; i < len(x); i++ {
		c := x[i]
		switch {
		case jsontext.Plain(c):
			// A run: 8 bytes at a time, then byte by byte to its end.
			j := jsontext.PlainRun(bytesString(x), i+1)
			for j < len(x) && jsontext.Plain(x[j]) {
				j++
			}
			b = append(b, x[i:j]...)
			i = j - 1
		case c >= utf8.RuneSelf:
			b = append(b, 0xc0|c>>6, 0x80|c&0x3f) // U+0080..U+00FF in UTF-8
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(b, '"')
}
