package change

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// values converts one image of go-mysql values to a new slice of Values.
func (t *Codec) values(raw []any) []Value {
	out := make([]Value, len(raw))
	copy(out, raw)
	for i, conv := range t.converts {
		if conv {
			out[i] = t.value(i, raw[i])
		}
	}
	return out
}

// value converts go-mysql's value of column i. Columns not in t.converts
// need no conversion; value is only called for the others.
func (t *Codec) value(i int, v any) Value {
	switch {
	case v == nil:
		return nil
	case t.enums != nil && t.enums[i] != nil:
		if x, ok := v.(int64); ok && x >= 0 && int(x) < len(t.enums[i]) {
			return t.enums[i][x]
		}
		return ""
	}
	out := convertValue(&t.Columns[i], v)
	if s, ok := out.(string); ok && t.types[i] == mysql.MYSQL_TYPE_TIME2 && t.metas[i] > 0 && !strings.Contains(s, ".") {
		// go-mysql leaves out a TIME(n)'s fraction when it is zero; MySQL
		// and canal print its n digits.
		return s + "." + strings.Repeat("0", int(min(t.metas[i], 6)))
	}
	if t.binWidth != nil && t.binWidth[i] > 0 {
		if b := out.([]byte); len(b) < t.binWidth[i] {
			padded := make([]byte, t.binWidth[i])
			copy(padded, b)
			return padded
		}
	}
	return out
}

// convertValue maps go-mysql's decoded value to braid's Value for column c.
// go-mysql decodes by binlog type alone, so signedness, ENUM/SET names and
// text-vs-binary come from the schema.
func convertValue(c *Column, v any) Value {
	switch x := v.(type) {
	case nil:
		return nil
	case int8:
		if c.Unsigned {
			return uint64(uint8(x))
		}
		return int64(x)
	case int16:
		if c.Unsigned {
			return uint64(uint16(x))
		}
		return int64(x)
	case int32:
		if c.Unsigned {
			if c.Type == "mediumint" {
				return uint64(uint32(x) & 0xffffff)
			}
			return uint64(uint32(x))
		}
		return int64(x)
	case int64:
		switch c.Type {
		case "enum":
			if x >= 1 && int(x) <= len(c.Elems) {
				return c.Elems[x-1]
			}
			return "" // MySQL stores an invalid ENUM value as index 0, shown as ''
		case "set":
			return setNames(c.Elems, uint64(x))
		case "bit":
			return uint64(x)
		}
		if c.Unsigned {
			return uint64(x)
		}
		return v
	case int:
		return int64(x)
	case string:
		if c.Binary {
			return []byte(x) // a copy: Values never alias the event's buffer
		}
		if c.Charset != "" {
			return string(appendConverted(nil, c.Charset, []byte(x)))
		}
	case []byte:
		if c.Charset != "" && !c.Binary {
			return string(appendConverted(nil, c.Charset, x))
		}
		if !c.Binary {
			return string(x)
		}
		return bytes.Clone(x)
	}
	return v
}

// charsetLatin1 is Column.Charset for MySQL's latin1.
const charsetLatin1 = "latin1"

// cp1252High holds the characters of bytes 0x80..0x9F in MySQL's latin1,
// which is Windows-1252; the five bytes Windows leaves undefined stay the
// C1 controls of the same value, as in MySQL.
var cp1252High = [32]rune{
	0x20AC, 0x81, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D, 0x017D, 0x8F,
	0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D, 0x017E, 0x0178,
}

// appendLatin1UTF8 appends latin1 (Windows-1252) text x as UTF-8.
func appendLatin1UTF8(b []byte, x []byte) []byte { return appendEightBit(b, x, true) }

// appendEightBit appends x as UTF-8 text whose characters are x's bytes:
// MySQL's latin1 (Windows-1252) when cp1252 is set, else ISO-8859-1 (each
// byte the character of its number, how canal shows binary values). ASCII
// runs are found 8 bytes at a time and copied whole; the 8 bytes after a
// run are converted one by one without a branch on their values, since
// binary values (digests, packed ids) are random bytes whose branches a
// CPU cannot predict: a 16-byte MD5 digest took 91-101 ns with a branch a
// byte, 43 ns without.
func appendEightBit(b []byte, x []byte, cp1252 bool) []byte {
	ascii := asciiRun(x, 0)
	if ascii == len(x) {
		return append(b, x...) // all ASCII, as text mostly is
	}
	n := len(b)
	room := 2*len(x) + 1 // a byte takes two at most; the +1 is putEightBit's spare write
	if cp1252 {
		room = 3*len(x) + 1 // U+20AC and others
	}
	b = slices.Grow(b, room)
	out := b[n : n+room]
	k := copy(out, x[:ascii])
	for i := ascii; i < len(x); {
		end := min(i+8, len(x))
		for _, c := range x[i:end] {
			if cp1252 && c >= 0x80 && c < 0xa0 {
				k += utf8.EncodeRune(out[k:], cp1252High[c-0x80])
				continue
			}
			k = putEightBit(out, k, c)
		}
		j := asciiRun(x, end)
		k += copy(out[k:], x[end:j])
		i = j
	}
	return b[:n+k]
}

// asciiRun returns where the run of ASCII bytes of x from i ends, reading
// 8 bytes at a time.
func asciiRun(x []byte, i int) int {
	for i+8 <= len(x) && binary.LittleEndian.Uint64(x[i:])&0x8080808080808080 == 0 {
		i += 8
	}
	for i < len(x) && x[i] < utf8.RuneSelf {
		i++
	}
	return i
}

// putEightBit writes character c (U+0000..U+00FF) as UTF-8 at out[k] and
// returns where it ends. It always writes two bytes: out must have room
// for them.
func putEightBit(out []byte, k int, c byte) int {
	high := c >> 7           // 1 for two bytes, 0 for one
	mask := -high            // 0xff or 0
	out[k+1] = 0x80 | c&0x3f // the second byte, or a spare write the next character overwrites
	out[k] = c&^mask | (0xc0|c>>6)&mask
	return k + 1 + int(high)
}

// setNames renders a SET bitmask as its members joined by commas.
func setNames(elems []string, bits uint64) string {
	return string(appendSetNames(nil, elems, bits))
}

// appendSetNames appends setNames's text.
func appendSetNames(b []byte, elems []string, bits uint64) []byte {
	n := 0
	for i, e := range elems {
		if bits&(1<<uint(i)) != 0 {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, e...)
		}
	}
	return b
}

// stringWidth is the byte width of a MYSQL_TYPE_STRING column from its
// table-map metadata (the same encoding go-mysql decodes).
func stringWidth(meta uint16) int {
	if meta < 256 {
		return int(meta)
	}
	b0, b1 := uint8(meta>>8), uint8(meta&0xff)
	if b0&0x30 != 0x30 {
		return int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
	}
	return int(b1)
}

// Codec converts the rows of one table version from the values go-mysql
// decoded ("raw" values) to braid's Values.
type Codec struct {
	*Table
	// converts[i] is set for the columns whose go-mysql value is not
	// already braid's Value (see convertValue); the others pass untouched.
	converts []bool
	// enums holds each ENUM column's members boxed once, so a row's ENUM
	// value costs no allocation.
	enums [][]Value
	// binWidth is the declared byte width of BINARY(n) columns (0 for the
	// others): the binlog drops a BINARY value's trailing zero bytes, which
	// MySQL pads back when the value is read.
	binWidth []int
	// types and metas are the columns' binlog types and metadata, from the
	// table map, and tz the zone TIMESTAMP values are shown in. For a table
	// braid reads raw, shapes and kinds are where each column's value ends
	// and how it is formatted (nil for the others).
	types  []byte
	metas  []uint16
	tz     *ZoneClock
	Shapes []Shape
	kinds  []rawKind
}

// passThrough are the column types go-mysql already decodes to braid's
// Value: int64 for signed BIGINT, float32/float64, and strings for DECIMAL,
// temporal types and non-binary CHAR/VARCHAR.
var passThrough = map[string]bool{
	"float": true, "double": true, "decimal": true,
	"date": true, "time": true, "datetime": true, "timestamp": true,
	"char": true, "varchar": true,
}

func NewCodec(t *Table, tm *replication.TableMapEvent, tz *ZoneClock) *Codec {
	tc := &Codec{Table: t, converts: make([]bool, len(t.Columns)),
		types: tm.ColumnType, metas: tm.ColumnMeta, tz: tz}
	for i := range t.Columns {
		c := &t.Columns[i]
		switch {
		case tm.ColumnType[i] == mysql.MYSQL_TYPE_JSON, tm.ColumnType[i] == mysql.MYSQL_TYPE_VECTOR:
			continue // their text, a string, whatever the schema says of the column
		case c.Charset != "":
			// converted to UTF-8 (convertValue)
		case tm.ColumnType[i] == mysql.MYSQL_TYPE_TIME2 && tm.ColumnMeta[i] > 0:
			// a zero fraction written out (value)
		case c.Type == "bigint" && !c.Unsigned, passThrough[c.Type] && !c.Binary:
			continue
		case c.Type == "enum":
			if tc.enums == nil {
				tc.enums = make([][]Value, len(t.Columns))
			}
			tc.enums[i] = make([]Value, len(c.Elems)+1)
			tc.enums[i][0] = "" // MySQL stores an invalid ENUM value as index 0, shown as ''
			for j, e := range c.Elems {
				tc.enums[i][j+1] = e
			}
		case c.Type == "binary":
			if tc.binWidth == nil {
				tc.binWidth = make([]int, len(t.Columns))
			}
			tc.binWidth[i] = stringWidth(tm.ColumnMeta[i])
		}
		tc.converts[i] = true
	}
	if tc.Shapes = TableShapes(tm); tc.Shapes != nil {
		tc.kinds = make([]rawKind, len(t.Columns))
		for i := range t.Columns {
			tc.kinds[i] = rawKindOf(&t.Columns[i], tm.ColumnType[i], tm.ColumnMeta[i], tc.converts[i])
		}
	}
	return tc
}

// serverLocation is the zone the server shows TIMESTAMP values in to a
// session that does not set time_zone: the global time_zone, or the system
// zone when that is SYSTEM. Go cannot know the rules of a zone it cannot
// load, so the last resort is the server's current UTC offset.
func ServerLocation(global, system, offsetSeconds string) *time.Location {
	name := global
	if strings.EqualFold(global, "SYSTEM") {
		name = system
	}
	if len(name) == 6 && (name[0] == '+' || name[0] == '-') && name[3] == ':' {
		h, _ := strconv.Atoi(name[1:3])
		m, _ := strconv.Atoi(name[4:6])
		off := h*3600 + m*60
		if name[0] == '-' {
			off = -off
		}
		return time.FixedZone(name, off)
	}
	if loc, err := time.LoadLocation(name); err == nil && name != "" {
		return loc
	}
	off, _ := strconv.Atoi(offsetSeconds)
	return time.FixedZone(name, off)
}
