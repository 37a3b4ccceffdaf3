package change

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// MySQL stores a JSON column in its binary JSON format (sql-common/
// json_binary.cc): a type byte, then the value. Objects and arrays come in
// a small form (16-bit counts and offsets) and a large one (32-bit); keys
// are sorted by length, then bytes; literals and 16-bit integers (and
// 32-bit ones in the large form) are stored in their entry, the rest at an
// offset from the container's start. braid formats it as the text MySQL's
// SELECT prints (Json_wrapper::to_string): ", " and ": " separators,
// doubles as my_gcvt writes them with ".0" added to whole numbers,
// DECIMAL and temporal values inside JSON as MySQL prints them, other
// opaque values as "base64:typeN:...".

// JSON value types of the binary format.
const (
	jsonSmallObject = 0x00
	jsonLargeObject = 0x01
	jsonSmallArray  = 0x02
	jsonLargeArray  = 0x03
	jsonLiteral     = 0x04
	jsonInt16       = 0x05
	jsonUint16      = 0x06
	jsonInt32       = 0x07
	jsonUint32      = 0x08
	jsonInt64       = 0x09
	jsonUint64      = 0x0a
	jsonDouble      = 0x0b
	jsonString      = 0x0c
	jsonOpaque      = 0x0f

	jsonNull  = 0x00
	jsonTrue  = 0x01
	jsonFalse = 0x02
)

var errJSONTruncated = errors.New("binary JSON value is truncated")

// AppendMySQLJSON appends the text MySQL prints for binary JSON document
// doc (a type byte and its value). An empty document, which MySQL writes
// for a JSON column set to ” without strict mode, is the JSON null.
func AppendMySQLJSON(b []byte, doc []byte) ([]byte, error) {
	if len(doc) == 0 {
		return append(b, "null"...), nil
	}
	return appendJSONValue(b, doc[0], doc[1:], 0)
}

// maxJSONDepth bounds nesting as MySQL does (JSON_DOCUMENT_MAX_DEPTH), so
// damaged bytes cannot recurse without end.
const maxJSONDepth = 100

// appendJSONValue appends the value of type tp stored at data.
func appendJSONValue(b []byte, tp byte, data []byte, depth int) ([]byte, error) {
	switch tp {
	case jsonSmallObject, jsonLargeObject, jsonSmallArray, jsonLargeArray:
		if depth > maxJSONDepth {
			return b, errors.New("binary JSON nested too deep")
		}
		return appendJSONContainer(b, tp, data, depth+1)
	case jsonLiteral:
		if len(data) < 1 {
			return b, errJSONTruncated
		}
		switch data[0] {
		case jsonNull:
			return append(b, "null"...), nil
		case jsonTrue:
			return append(b, "true"...), nil
		case jsonFalse:
			return append(b, "false"...), nil
		}
		return b, fmt.Errorf("binary JSON literal %#x", data[0])
	case jsonInt16, jsonUint16:
		if len(data) < 2 {
			return b, errJSONTruncated
		}
		v := binary.LittleEndian.Uint16(data)
		if tp == jsonInt16 {
			return strconv.AppendInt(b, int64(int16(v)), 10), nil
		}
		return strconv.AppendUint(b, uint64(v), 10), nil
	case jsonInt32, jsonUint32:
		if len(data) < 4 {
			return b, errJSONTruncated
		}
		v := binary.LittleEndian.Uint32(data)
		if tp == jsonInt32 {
			return strconv.AppendInt(b, int64(int32(v)), 10), nil
		}
		return strconv.AppendUint(b, uint64(v), 10), nil
	case jsonInt64, jsonUint64:
		if len(data) < 8 {
			return b, errJSONTruncated
		}
		v := binary.LittleEndian.Uint64(data)
		if tp == jsonInt64 {
			return strconv.AppendInt(b, int64(v), 10), nil
		}
		return strconv.AppendUint(b, v, 10), nil
	case jsonDouble:
		if len(data) < 8 {
			return b, errJSONTruncated
		}
		return appendJSONDouble(b, math.Float64frombits(binary.LittleEndian.Uint64(data))), nil
	case jsonString:
		s, _, err := jsonVarBytes(data)
		if err != nil {
			return b, err
		}
		return appendMySQLJSONString(b, s), nil
	case jsonOpaque:
		if len(data) < 1 {
			return b, errJSONTruncated
		}
		v, _, err := jsonVarBytes(data[1:])
		if err != nil {
			return b, err
		}
		return appendJSONOpaque(b, data[0], v)
	}
	return b, fmt.Errorf("binary JSON value type %#x", tp)
}

// appendJSONContainer appends an object or array.
func appendJSONContainer(b []byte, tp byte, data []byte, depth int) ([]byte, error) {
	large := tp == jsonLargeObject || tp == jsonLargeArray
	object := tp == jsonSmallObject || tp == jsonLargeObject
	os := 2
	if large {
		os = 4
	}
	if len(data) < 2*os {
		return b, errJSONTruncated
	}
	count, size := jsonUint(data, os), jsonUint(data[os:], os)
	if size > len(data) {
		return b, errJSONTruncated
	}
	data = data[:size]
	keyEntries := 2 * os
	valueEntries := keyEntries
	if object {
		valueEntries += count * (os + 2)
	}
	if valueEntries+count*(1+os) > size {
		return b, errJSONTruncated
	}
	open, close := byte('['), byte(']')
	if object {
		open, close = '{', '}'
	}
	b = append(b, open)
	for i := range count {
		if i > 0 {
			b = append(b, ',', ' ')
		}
		if object {
			e := keyEntries + i*(os+2)
			off, n := jsonUint(data[e:], os), int(binary.LittleEndian.Uint16(data[e+os:]))
			if off+n > size {
				return b, errJSONTruncated
			}
			b = appendMySQLJSONString(b, data[off:off+n])
			b = append(b, ':', ' ')
		}
		e := valueEntries + i*(1+os)
		vt := data[e]
		var err error
		if jsonInlined(vt, large) {
			b, err = appendJSONValue(b, vt, data[e+1:e+1+os], depth)
		} else {
			off := jsonUint(data[e+1:], os)
			if off >= size {
				return b, errJSONTruncated
			}
			b, err = appendJSONValue(b, vt, data[off:], depth)
		}
		if err != nil {
			return b, err
		}
	}
	return append(b, close), nil
}

// jsonInlined reports whether a value of type tp is stored in its entry.
func jsonInlined(tp byte, large bool) bool {
	switch tp {
	case jsonLiteral, jsonInt16, jsonUint16:
		return true
	case jsonInt32, jsonUint32:
		return large
	}
	return false
}

// jsonUint reads a 2- or 4-byte little-endian count or offset.
func jsonUint(data []byte, n int) int {
	if n == 2 {
		return int(binary.LittleEndian.Uint16(data))
	}
	return int(binary.LittleEndian.Uint32(data))
}

// jsonVarBytes reads a string's length (7 bits a byte, low bits first,
// the high bit set on all but the last byte) and the bytes it counts; it
// returns them and the bytes read in all.
func jsonVarBytes(data []byte) ([]byte, int, error) {
	n, shift := 0, 0
	for i := 0; i < 5 && i < len(data); i++ {
		n |= int(data[i]&0x7f) << shift
		shift += 7
		if data[i]&0x80 == 0 {
			if i+1+n > len(data) {
				return nil, 0, errJSONTruncated
			}
			return data[i+1 : i+1+n], i + 1 + n, nil
		}
	}
	return nil, 0, errJSONTruncated
}

// appendMySQLJSONString appends s quoted as MySQL's double_quote does:
// the named escapes, \u00xx for other control characters below 0x1f (not
// 0x1f itself, which MySQL leaves as it is), every other byte as it is.
func appendMySQLJSONString(b []byte, s []byte) []byte {
	b = append(b, '"')
	for _, c := range s {
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x1f {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}

// appendJSONDouble appends a JSON double as MySQL prints it: my_gcvt's
// text at its widest field (the shortest digits that read back as d, in
// plain notation for a decimal point from 10^-15 to 10^15, else as
// "1.5e-7", "1e100"), with ".0" added when that shows neither a point nor
// an exponent.
func appendJSONDouble(b []byte, d float64) []byte {
	if math.IsNaN(d) || math.IsInf(d, 0) {
		return append(b, '0') // MySQL's dtoa prints "0" for them; JSON cannot hold them
	}
	var buf [32]byte
	sci := strconv.AppendFloat(buf[:0], math.Abs(d), 'e', -1, 64) // d.ddde±XX
	mant, exp := sci, 0
	for i, c := range sci {
		if c == 'e' {
			mant = sci[:i]
			exp, _ = strconv.Atoi(string(sci[i+1:]))
			break
		}
	}
	var digits [24]byte
	nd := 0
	for _, c := range mant {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	for nd > 1 && digits[nd-1] == '0' {
		nd-- // shortest digits have no trailing zeros, but 0 is "0e+00"
	}
	decpt := exp + 1 // the value is 0.digits × 10^decpt
	if d == 0 {
		decpt = 1
	}
	if math.Signbit(d) {
		b = append(b, '-')
	}
	if decpt >= -14 && (decpt <= 15 || nd > decpt) {
		// 'f' format, as my_gcvt chooses it with room for every digit.
		switch {
		case decpt <= 0:
			b = append(b, '0', '.')
			for i := decpt; i < 0; i++ {
				b = append(b, '0')
			}
			b = append(b, digits[:nd]...)
		case decpt >= nd:
			b = append(b, digits[:nd]...)
			for i := nd; i < decpt; i++ {
				b = append(b, '0')
			}
			b = append(b, '.', '0')
		default:
			b = append(b, digits[:decpt]...)
			b = append(b, '.')
			b = append(b, digits[decpt:nd]...)
		}
		return b
	}
	b = append(b, digits[0])
	if nd > 1 {
		b = append(b, '.')
		b = append(b, digits[1:nd]...)
	}
	b = append(b, 'e')
	return strconv.AppendInt(b, int64(decpt-1), 10)
}

// appendJSONOpaque appends an opaque value: a DECIMAL as its number,
// a DATE, TIME, DATETIME or TIMESTAMP as a string (times with six
// fraction digits, as MySQL prints them in JSON), anything else as
// "base64:typeN:<its bytes in base64>".
func appendJSONOpaque(b []byte, fieldType byte, v []byte) ([]byte, error) {
	switch fieldType {
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		if len(v) < 2 {
			return b, errJSONTruncated
		}
		precision, scale := int(v[0]), int(v[1])
		if scale > precision || precision > 65 || len(v)-2 < decimalSize(precision, scale) {
			return b, fmt.Errorf("binary JSON decimal(%d,%d) of %d bytes", precision, scale, len(v)-2)
		}
		b, _ = appendDecimal(b, v[2:], precision, scale)
		return b, nil
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIME:
		if len(v) < 8 {
			return b, errJSONTruncated
		}
		packed := int64(binary.LittleEndian.Uint64(v))
		b = append(b, '"')
		neg := packed < 0
		if neg {
			packed = -packed
		}
		usec := int(packed % (1 << 24))
		hi := packed >> 24
		if fieldType == mysql.MYSQL_TYPE_TIME {
			if neg {
				b = append(b, '-')
			}
			hour, minute, second := int(hi>>12)%(1<<10), int(hi>>6)%(1<<6), int(hi)%(1<<6)
			b = appendPadded(b, hour, 2)
			b = append(b, ':')
			b = appendPadded(b, minute, 2)
			b = append(b, ':')
			b = appendPadded(b, second, 2)
			b = fracDigits(b, usec, 6)
			return append(b, '"'), nil
		}
		ymd, hms := hi>>17, hi%(1<<17)
		ym := ymd >> 5
		year, month, day := int(ym/13), int(ym%13), int(ymd%(1<<5))
		if fieldType == mysql.MYSQL_TYPE_DATE {
			b = appendDateSlow(b, year, month, day)
			return append(b, '"'), nil
		}
		b = appendDatetime(b, year, month, day, int(hms>>12), int((hms>>6)%(1<<6)), int(hms%(1<<6)), usec, 6)
		return append(b, '"'), nil
	}
	b = append(b, `"base64:type`...)
	b = strconv.AppendUint(b, uint64(fieldType), 10)
	b = append(b, ':')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"'), nil
}
