package postgres

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// COPY's binary format, when every column of the target is of a type
// below: each value encoded as its type's binary receive function reads
// it, straight from the change's value, so that the server parses no
// text (a tenth of its CPU a row under the benchmark's stream went to
// splitting and parsing COPY's text). A value is the same value the text
// format gives the column: the same digits of a numeric (its scale
// included), the same microseconds of a timestamp, the same bytes of a
// text, and -infinity or NULL for a zero date as pgValue says. A value
// this file has no exact encoding for (a type pair it does not know, a
// text it does not read exactly as the server would) sends its run in
// the text format instead, which is the reference: a run goes one way or
// the other, never half.

// Type OIDs of the types COPY's binary format is written for.
const (
	int8OID      = 20
	int2OID      = 21
	int4OID      = 23
	textOID      = 25
	jsonOID      = 114
	float4OID    = 700
	float8OID    = 701
	bpcharOID    = 1042
	varcharOID   = 1043
	dateOID      = 1082
	timestampOID = 1114
	intervalOID  = 1186
	bitOID       = 1560
	varbitOID    = 1562
	numericOID   = 1700
	jsonbOID     = 3802
)

// binaryOID reports whether COPY's binary format has an encoding here
// for values into a column of type oid.
func binaryOID(oid uint32) bool {
	switch oid {
	case int8OID, int2OID, int4OID, textOID, jsonOID, float4OID, float8OID, bpcharOID, varcharOID,
		dateOID, timestampOID, intervalOID, bitOID, varbitOID, numericOID, jsonbOID, byteaOID:
		return true
	}
	return false
}

// copyHeader starts COPY's binary format: the signature, no flags, no
// header extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyBinaryRows is the COPY binary data of the after-images of cs, each
// followed by its origin when the target has the column; false when a
// value has no exact binary encoding here (the run goes as text).
func (ts *tableStmts) copyBinaryRows(cs []sink.Change) ([]byte, bool) {
	// Sized by the rows the table's last COPY sent (a row's bytes vary
	// little), so that the buffer is not grown and copied row by row.
	per := int(ts.rowBytes.Load())
	if per == 0 {
		per = 2 + len(ts.cols)*16
	}
	b := make([]byte, 0, len(copyHeader)+2+(len(cs)+1)*per)
	b = append(b, copyHeader...)
	ok := true
	for _, c := range cs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(ts.cols)))
		for i, v := range c.After {
			if b, ok = appendBinaryField(b, ts.oids[i], &ts.columns[i], v); !ok {
				return nil, false
			}
		}
		if ts.origin {
			b = binary.BigEndian.AppendUint32(b, uint32(len(c.Source)+1+len(c.Origin)))
			b = append(b, c.Source...)
			b = append(b, '/')
			b = append(b, c.Origin...)
		}
	}
	ts.rowBytes.Store(int64(len(b)/len(cs)) + 1)
	return binary.BigEndian.AppendUint16(b, 0xffff), true
}

// appendBinaryField appends value v of column c, for a target column of
// type oid, as a field of COPY's binary format (its length, then its
// bytes), converted as pgValue converts it for the text format.
func appendBinaryField(b []byte, oid uint32, c *change.Column, v change.Value) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return binary.BigEndian.AppendUint32(b, math.MaxUint32), true // -1: NULL
	case string:
		switch c.Type {
		case "date", "datetime", "timestamp":
			if zeroDate(x) {
				if c.Nullable {
					return binary.BigEndian.AppendUint32(b, math.MaxUint32), true
				}
				x = "-infinity"
			}
		}
		return appendBinaryText(b, oid, x)
	case []byte:
		switch oid {
		case byteaOID, textOID, varcharOID, bpcharOID, jsonOID:
			return appendBinaryBytes(b, x), true
		case jsonbOID:
			b = binary.BigEndian.AppendUint32(b, uint32(len(x)+1))
			return append(append(b, 1), x...), true // jsonb's version 1, then its text
		}
	case int64:
		return appendBinaryInt(b, oid, x)
	case uint64:
		if c.Type == "bit" {
			s, _ := pgValue(c, x).(string)
			return appendBinaryText(b, oid, s)
		}
		if x > math.MaxInt64 {
			if oid != numericOID {
				return b, false
			}
			return appendNumeric(b, strconv.FormatUint(x, 10))
		}
		return appendBinaryInt(b, oid, int64(x))
	case float64:
		if oid == float8OID {
			b = binary.BigEndian.AppendUint32(b, 8)
			return binary.BigEndian.AppendUint64(b, math.Float64bits(x)), true
		}
	case float32:
		switch oid {
		case float4OID:
			b = binary.BigEndian.AppendUint32(b, 4)
			return binary.BigEndian.AppendUint32(b, math.Float32bits(x)), true
		case float8OID:
			// The text format's shortest text of float64(x) reads back as
			// float64(x).
			b = binary.BigEndian.AppendUint32(b, 8)
			return binary.BigEndian.AppendUint64(b, math.Float64bits(float64(x))), true
		}
	}
	return b, false
}

// appendBinaryBytes appends p as a field: its length, then its bytes.
func appendBinaryBytes[S string | []byte](b []byte, p S) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	return append(b, p...)
}

// appendBinaryInt appends integer x into a column of type oid.
func appendBinaryInt(b []byte, oid uint32, x int64) ([]byte, bool) {
	switch oid {
	case int2OID:
		if x < math.MinInt16 || x > math.MaxInt16 {
			return b, false
		}
		b = binary.BigEndian.AppendUint32(b, 2)
		return binary.BigEndian.AppendUint16(b, uint16(x)), true
	case int4OID:
		if x < math.MinInt32 || x > math.MaxInt32 {
			return b, false
		}
		b = binary.BigEndian.AppendUint32(b, 4)
		return binary.BigEndian.AppendUint32(b, uint32(x)), true
	case int8OID:
		b = binary.BigEndian.AppendUint32(b, 8)
		return binary.BigEndian.AppendUint64(b, uint64(x)), true
	case numericOID:
		var d [20]byte
		return appendNumeric(b, string(strconv.AppendInt(d[:0], x, 10)))
	case textOID, varcharOID, bpcharOID:
		// The digits, as the text format writes them.
		n := len(b)
		b = append(b, 0, 0, 0, 0)
		b = strconv.AppendInt(b, x, 10)
		binary.BigEndian.PutUint32(b[n:], uint32(len(b)-n-4))
		return b, true
	}
	return b, false
}

// appendBinaryText appends text s (what pgValue makes of a string value)
// into a column of type oid: as it is for the text types, parsed
// otherwise exactly as the column type's input function would.
func appendBinaryText(b []byte, oid uint32, s string) ([]byte, bool) {
	switch oid {
	case textOID, varcharOID, bpcharOID, jsonOID:
		return appendBinaryBytes(b, s), true
	case jsonbOID:
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)+1))
		return append(append(b, 1), s...), true
	case numericOID:
		return appendNumeric(b, s)
	case timestampOID:
		us, ok := parseTimestamp(s)
		if !ok {
			return b, false
		}
		b = binary.BigEndian.AppendUint32(b, 8)
		return binary.BigEndian.AppendUint64(b, uint64(us)), true
	case dateOID:
		if s == "-infinity" {
			b = binary.BigEndian.AppendUint32(b, 4)
			return binary.BigEndian.AppendUint32(b, 1<<31), true // DATEVAL_NOBEGIN, math.MinInt32
		}
		if len(s) != 10 {
			return b, false
		}
		days, ok := parseDate(s)
		if !ok {
			return b, false
		}
		b = binary.BigEndian.AppendUint32(b, 4)
		return binary.BigEndian.AppendUint32(b, uint32(int32(days))), true
	case intervalOID:
		us, ok := parseTime(s)
		if !ok {
			return b, false
		}
		b = binary.BigEndian.AppendUint32(b, 16)
		b = binary.BigEndian.AppendUint64(b, uint64(us))
		return binary.BigEndian.AppendUint64(b, 0), true // days, months
	case bitOID, varbitOID:
		for i := 0; i < len(s); i++ {
			if s[i] != '0' && s[i] != '1' {
				return b, false
			}
		}
		b = binary.BigEndian.AppendUint32(b, uint32(4+(len(s)+7)/8))
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		for i := 0; i < len(s); i += 8 {
			var by byte
			for j := range 8 {
				by <<= 1
				if i+j < len(s) && s[i+j] == '1' {
					by |= 1
				}
			}
			b = append(b, by)
		}
		return b, true
	}
	return b, false
}

// appendNumeric appends decimal text s ([-]digits[.digits], as MySQL
// writes a DECIMAL) as a numeric: base-10000 digits around the decimal
// point, its display scale the fraction's digits, as numeric_in reads
// it; false for any other text.
func appendNumeric(b []byte, s string) ([]byte, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	intPart, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			intPart, frac = s[:i], s[i+1:]
			break
		}
	}
	if intPart == "" && frac == "" || len(s) > 1000 {
		return b, false
	}
	for _, p := range [2]string{intPart, frac} {
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return b, false
			}
		}
	}
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	dscale := len(frac)
	// Base-10000 groups: the integer part's from the right, the
	// fraction's from the left, zero-padded.
	intGroups := (len(intPart) + 3) / 4
	fracGroups := (len(frac) + 3) / 4
	var digits [260]uint16
	if intGroups+fracGroups > len(digits) {
		return b, false
	}
	n := 0
	for g := range intGroups {
		end := len(intPart) - 4*(intGroups-1-g)
		start := max(0, end-4)
		digits[n] = uint16(atoiDigits(intPart[start:end]))
		n++
	}
	for g := range fracGroups {
		start := 4 * g
		var d uint16
		for k := range 4 {
			d *= 10
			if start+k < len(frac) {
				d += uint16(frac[start+k] - '0')
			}
		}
		digits[n] = d
		n++
	}
	weight := intGroups - 1
	// Leading and trailing zero groups are not stored.
	first, last := 0, n
	for first < last && digits[first] == 0 {
		first++
		weight--
	}
	for last > first && digits[last-1] == 0 {
		last--
	}
	sign := uint16(0)
	if neg && first < last {
		sign = 0x4000
	}
	if first == last {
		weight = 0
	}
	nd := last - first
	b = binary.BigEndian.AppendUint32(b, uint32(8+2*nd))
	b = binary.BigEndian.AppendUint16(b, uint16(nd))
	b = binary.BigEndian.AppendUint16(b, uint16(int16(weight)))
	b = binary.BigEndian.AppendUint16(b, sign)
	b = binary.BigEndian.AppendUint16(b, uint16(dscale))
	for _, d := range digits[first:last] {
		b = binary.BigEndian.AppendUint16(b, d)
	}
	return b, true
}

// atoiDigits is the value of s, at most 4 decimal digits.
func atoiDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// pgEpochDays is 2000-01-01, PostgreSQL's epoch, in days since
// 1970-01-01.
const pgEpochDays = 10957

// parseDate reads "YYYY-MM-DD" (a valid date of years 1 to 9999) as days
// since PostgreSQL's epoch.
func parseDate(s string) (int64, bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	y, ok1 := digitsAt(s, 0, 4)
	m, ok2 := digitsAt(s, 5, 2)
	d, ok3 := digitsAt(s, 8, 2)
	if !ok1 || !ok2 || !ok3 || y < 1 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, false
	}
	return daysFromCivil(y, m, d) - pgEpochDays, true
}

// parseTimestamp reads "YYYY-MM-DD hh:mm:ss[.f...]" (up to 6 fraction
// digits), or -infinity, as microseconds since PostgreSQL's epoch.
func parseTimestamp(s string) (int64, bool) {
	if s == "-infinity" {
		return math.MinInt64, true // DT_NOBEGIN
	}
	days, ok := parseDate(s)
	if !ok || len(s) < 19 || s[10] != ' ' || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	h, ok1 := digitsAt(s, 11, 2)
	mi, ok2 := digitsAt(s, 14, 2)
	sec, ok3 := digitsAt(s, 17, 2)
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 59 {
		return 0, false
	}
	us, ok := fraction(s[19:])
	if !ok {
		return 0, false
	}
	return ((days*24+int64(h))*60+int64(mi))*60_000_000 + int64(sec)*1_000_000 + us, true
}

// parseTime reads MySQL's TIME text, "[-]h...:mm:ss[.f...]", as the
// microseconds of the interval PostgreSQL reads it as (the sign is the
// whole value's).
func parseTime(s string) (int64, bool) {
	neg := false
	if s != "" && s[0] == '-' {
		neg, s = true, s[1:]
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 4 || len(s) < i+6 || s[i] != ':' || s[i+3] != ':' {
		return 0, false
	}
	h, _ := digitsAt(s, 0, i)
	mi, ok1 := digitsAt(s, i+1, 2)
	sec, ok2 := digitsAt(s, i+4, 2)
	if !ok1 || !ok2 || mi > 59 || sec > 59 {
		return 0, false
	}
	us, ok := fraction(s[i+6:])
	if !ok {
		return 0, false
	}
	v := (int64(h)*3600+int64(mi)*60+int64(sec))*1_000_000 + us
	if neg {
		v = -v
	}
	return v, true
}

// fraction reads "" or ".f..." (1 to 6 digits) as microseconds.
func fraction(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	if s[0] != '.' || len(s) < 2 || len(s) > 7 {
		return 0, false
	}
	us, ok := digitsAt(s, 1, len(s)-1)
	for range 7 - len(s) {
		us *= 10
	}
	return int64(us), ok
}

// digitsAt reads the n decimal digits of s at i.
func digitsAt(s string, i, n int) (int, bool) {
	v := 0
	for k := i; k < i+n; k++ {
		if s[k] < '0' || s[k] > '9' {
			return 0, false
		}
		v = v*10 + int(s[k]-'0')
	}
	return v, true
}

// daysIn is the number of days of month m of year y (proleptic
// Gregorian, as PostgreSQL's dates).
func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the days from 1970-01-01 to y-m-d (Howard Hinnant's
// algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097 + doe - 719468)
}
