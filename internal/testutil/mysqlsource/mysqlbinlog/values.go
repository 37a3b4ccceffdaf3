package mysqlbinlog

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// appendValue appends the binlog image of v for column c. The Go types
// each kind takes:
//
//	integer kinds        int, int8..int64, uint, uint8..uint64
//	DECIMAL              string ("-12.50"), exact to the column's scale
//	FLOAT, DOUBLE        float32, float64
//	BIT                  uint64 (or any integer)
//	YEAR                 integer (0 or 1901..2155)
//	DATE                 string "2024-02-29"
//	TIME                 string "-838:59:59.000000"
//	DATETIME, TIMESTAMP  string "2024-02-29 13:01:02.5" (TIMESTAMP in UTC) or time.Time
//	CHAR ... LONGTEXT    string or []byte
//	ENUM                 string (member) or integer (1-based index)
//	SET                  string ("a,c") or uint64 (bitmask)
//	JSON                 string (JSON text) or JSONBinary (already encoded)
//	GEOMETRY             []byte (4-byte SRID then WKB, as MySQL stores it)
//	VECTOR               []float32
func appendValue(b []byte, c Column, v any) ([]byte, error) {
	wrap := func(err error) error {
		return fmt.Errorf("mysqlbinlog: column %s: %w", c.Name, err)
	}
	switch c.Kind {
	case KindTinyInt, KindSmallInt, KindMediumInt, KindInt, KindBigInt:
		n, err := intBytes(c, v)
		if err != nil {
			return nil, wrap(err)
		}
		return append(b, n...), nil
	case KindDecimal:
		s, ok := v.(string)
		if !ok {
			return nil, wrap(fmt.Errorf("DECIMAL takes a string, not %T", v))
		}
		d, err := decimalBinary(s, c.Precision, c.Scale)
		if err != nil {
			return nil, wrap(err)
		}
		return append(b, d...), nil
	case KindFloat:
		f, ok := v.(float32)
		if !ok {
			f64, ok64 := v.(float64)
			if !ok64 {
				return nil, wrap(fmt.Errorf("FLOAT takes a float32, not %T", v))
			}
			f = float32(f64)
		}
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(f)), nil
	case KindDouble:
		f, ok := v.(float64)
		if !ok {
			return nil, wrap(fmt.Errorf("DOUBLE takes a float64, not %T", v))
		}
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
	case KindBit:
		u, err := toUint64(v)
		if err != nil {
			return nil, wrap(err)
		}
		if c.Length < 64 && u>>uint(c.Length) != 0 {
			return nil, wrap(fmt.Errorf("%#x does not fit BIT(%d)", u, c.Length))
		}
		n := (c.Length + 7) / 8
		var t [8]byte
		binary.BigEndian.PutUint64(t[:], u)
		return append(b, t[8-n:]...), nil
	case KindYear:
		y, err := toInt64(v)
		if err != nil {
			return nil, wrap(err)
		}
		switch {
		case y == 0:
			return append(b, 0), nil
		case y >= 1901 && y <= 2155:
			return append(b, byte(y-1900)), nil
		}
		return nil, wrap(fmt.Errorf("year %d is not 0 or 1901..2155", y))
	case KindDate:
		s, ok := v.(string)
		if !ok {
			return nil, wrap(fmt.Errorf("DATE takes a string, not %T", v))
		}
		y, mo, d, err := parseDate(s)
		if err != nil {
			return nil, wrap(err)
		}
		n := uint32(d) | uint32(mo)<<5 | uint32(y)<<9
		return append(b, byte(n), byte(n>>8), byte(n>>16)), nil
	case KindTime:
		s, ok := v.(string)
		if !ok {
			return nil, wrap(fmt.Errorf("TIME takes a string, not %T", v))
		}
		t, err := timeBinary(s, c.FSP)
		if err != nil {
			return nil, wrap(err)
		}
		return append(b, t...), nil
	case KindDatetime:
		dt, err := parseDatetimeValue(v, c.FSP)
		if err != nil {
			return nil, wrap(err)
		}
		return append(b, datetimeBinary(dt, c.FSP)...), nil
	case KindTimestamp:
		dt, err := parseDatetimeValue(v, c.FSP)
		if err != nil {
			return nil, wrap(err)
		}
		if !timestampInRange(dt) {
			return nil, wrap(fmt.Errorf("%v is outside TIMESTAMP's range (1970-01-01 00:00:01 to 2038-01-19 03:14:07 UTC)", v))
		}
		return append(b, timestampBinary(dt, c.FSP)...), nil
	case KindChar, KindBinary, KindVarchar, KindVarbinary:
		s, err := toBytes(v)
		if err != nil {
			return nil, wrap(err)
		}
		maxBytes, err := c.maxBytes()
		if err != nil {
			return nil, err
		}
		switch c.Kind {
		case KindChar:
			// CHAR is stored without its trailing spaces
			// (Field_string::pack).
			s = []byte(strings.TrimRight(string(s), " "))
		case KindBinary:
			// BINARY keeps its 0x00 padding to the full length.
			if len(s) < maxBytes {
				s = append(append([]byte(nil), s...), make([]byte, maxBytes-len(s))...)
			}
		}
		if len(s) > maxBytes {
			return nil, wrap(fmt.Errorf("value of %d bytes is longer than the column's %d", len(s), maxBytes))
		}
		if maxBytes > 255 {
			b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
		} else {
			b = append(b, byte(len(s)))
		}
		return append(b, s...), nil
	case KindTinyBlob, KindBlob, KindMediumBlob, KindLongBlob, KindTinyText, KindText, KindMediumText, KindLongText, KindGeometry:
		s, err := toBytes(v)
		if err != nil {
			return nil, wrap(err)
		}
		return appendBlob(b, c.blobPackLength(), s)
	case KindVector:
		f, ok := v.([]float32)
		if !ok {
			return nil, wrap(fmt.Errorf("VECTOR takes a []float32, not %T", v))
		}
		if len(f) > c.Length {
			return nil, wrap(fmt.Errorf("vector of %d dimensions does not fit VECTOR(%d)", len(f), c.Length))
		}
		raw := make([]byte, 0, 4*len(f))
		for _, x := range f {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
		}
		return appendBlob(b, 4, raw)
	case KindJSON:
		var raw []byte
		switch j := v.(type) {
		case JSONBinary:
			raw = j
		case string:
			var err error
			if raw, err = EncodeJSON(j); err != nil {
				return nil, wrap(err)
			}
		default:
			return nil, wrap(fmt.Errorf("JSON takes a string of JSON text or JSONBinary, not %T", v))
		}
		return appendBlob(b, 4, raw)
	case KindEnum:
		idx, err := enumIndex(c, v)
		if err != nil {
			return nil, wrap(err)
		}
		if c.enumPackLength() == 2 {
			return binary.LittleEndian.AppendUint16(b, uint16(idx)), nil
		}
		return append(b, byte(idx)), nil
	case KindSet:
		mask, err := setMask(c, v)
		if err != nil {
			return nil, wrap(err)
		}
		var t [8]byte
		binary.LittleEndian.PutUint64(t[:], mask)
		return append(b, t[:c.setPackLength()]...), nil
	}
	return nil, wrap(fmt.Errorf("kind %d has no encoder", c.Kind))
}

func appendBlob(b []byte, packLength int, s []byte) ([]byte, error) {
	if packLength < 4 && len(s) >= 1<<(8*packLength) {
		return nil, fmt.Errorf("mysqlbinlog: value of %d bytes does not fit a %d-byte length", len(s), packLength)
	}
	var t [4]byte
	binary.LittleEndian.PutUint32(t[:], uint32(len(s)))
	b = append(b, t[:packLength]...)
	return append(b, s...), nil
}

func toBytes(v any) ([]byte, error) {
	switch s := v.(type) {
	case string:
		return []byte(s), nil
	case []byte:
		return s, nil
	}
	return nil, fmt.Errorf("a string column takes a string or []byte, not %T", v)
}

func toInt64(v any) (int64, error) {
	switch n := v.(type) {
	case int:
		return int64(n), nil
	case int8:
		return int64(n), nil
	case int16:
		return int64(n), nil
	case int32:
		return int64(n), nil
	case int64:
		return n, nil
	case uint8:
		return int64(n), nil
	case uint16:
		return int64(n), nil
	case uint32:
		return int64(n), nil
	case uint:
		if uint64(n) > math.MaxInt64 {
			return 0, fmt.Errorf("%d does not fit a signed column", n)
		}
		return int64(n), nil
	case uint64:
		if n > math.MaxInt64 {
			return 0, fmt.Errorf("%d does not fit a signed column", n)
		}
		return int64(n), nil
	}
	return 0, fmt.Errorf("an integer column takes a Go integer, not %T", v)
}

func toUint64(v any) (uint64, error) {
	switch n := v.(type) {
	case uint:
		return uint64(n), nil
	case uint8:
		return uint64(n), nil
	case uint16:
		return uint64(n), nil
	case uint32:
		return uint64(n), nil
	case uint64:
		return n, nil
	}
	i, err := toInt64(v)
	if err != nil {
		return 0, err
	}
	if i < 0 {
		return 0, fmt.Errorf("%d is negative in an unsigned column", i)
	}
	return uint64(i), nil
}

func intBytes(c Column, v any) ([]byte, error) {
	size := 8
	switch c.Kind {
	case KindTinyInt:
		size = 1
	case KindSmallInt:
		size = 2
	case KindMediumInt:
		size = 3
	case KindInt:
		size = 4
	}
	bitsN := uint(8 * size)
	var u uint64
	if c.Unsigned {
		n, err := toUint64(v)
		if err != nil {
			return nil, err
		}
		if bitsN < 64 && n>>bitsN != 0 {
			return nil, fmt.Errorf("%d does not fit %d unsigned bytes", n, size)
		}
		u = n
	} else {
		n, err := toInt64(v)
		if err != nil {
			return nil, err
		}
		if bitsN < 64 && (n < -(1<<(bitsN-1)) || n >= 1<<(bitsN-1)) {
			return nil, fmt.Errorf("%d does not fit %d signed bytes", n, size)
		}
		u = uint64(n)
	}
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], u)
	return t[:size], nil
}

func enumIndex(c Column, v any) (int, error) {
	if s, ok := v.(string); ok {
		if s == "" {
			return 0, nil // the error value '' (index 0)
		}
		for i, e := range c.Elements {
			if e == s {
				return i + 1, nil
			}
		}
		return 0, fmt.Errorf("%q is not a member of the ENUM", s)
	}
	i, err := toInt64(v)
	if err != nil {
		return 0, err
	}
	if i < 0 || int(i) > len(c.Elements) {
		return 0, fmt.Errorf("ENUM index %d is not 0..%d", i, len(c.Elements))
	}
	return int(i), nil
}

func setMask(c Column, v any) (uint64, error) {
	if s, ok := v.(string); ok {
		var mask uint64
		if s == "" {
			return 0, nil
		}
		for _, member := range strings.Split(s, ",") {
			found := false
			for i, e := range c.Elements {
				if e == member {
					mask |= 1 << uint(i)
					found = true
				}
			}
			if !found {
				return 0, fmt.Errorf("%q is not a member of the SET", member)
			}
		}
		return mask, nil
	}
	mask, err := toUint64(v)
	if err != nil {
		return 0, err
	}
	if len(c.Elements) < 64 && mask>>uint(len(c.Elements)) != 0 {
		return 0, fmt.Errorf("SET bitmask %#x names members the SET does not have", mask)
	}
	return mask, nil
}

// decimalBinary is MySQL's decimal2bin: groups of nine digits in four
// bytes, the leftover digits in the fewest bytes, big-endian; negative
// numbers inverted; the first bit flipped so that the bytes sort.
func decimalBinary(s string, precision, scale int) ([]byte, error) {
	neg := strings.HasPrefix(s, "-")
	digits := strings.TrimPrefix(s, "-")
	intPart, fracPart, _ := strings.Cut(digits, ".")
	intPart = strings.TrimLeft(intPart, "0")
	for _, part := range []string{intPart, fracPart} {
		for _, r := range part {
			if r < '0' || r > '9' {
				return nil, fmt.Errorf("%q is not a decimal number", s)
			}
		}
	}
	intg := precision - scale
	if len(intPart) > intg {
		return nil, fmt.Errorf("%q has more than %d integer digits", s, intg)
	}
	if len(fracPart) > scale {
		return nil, fmt.Errorf("%q has more than %d fractional digits", s, scale)
	}
	intPart = strings.Repeat("0", intg-len(intPart)) + intPart
	fracPart += strings.Repeat("0", scale-len(fracPart))
	dig2bytes := [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}
	var out []byte
	put := func(chunk string) {
		if chunk == "" {
			return
		}
		n, _ := strconv.ParseUint(chunk, 10, 32)
		size := dig2bytes[len(chunk)]
		var t [4]byte
		binary.BigEndian.PutUint32(t[:], uint32(n))
		out = append(out, t[4-size:]...)
	}
	lead := intg % 9
	put(intPart[:lead])
	for i := lead; i < intg; i += 9 {
		put(intPart[i : i+9])
	}
	for i := 0; i+9 <= scale; i += 9 {
		put(fracPart[i : i+9])
	}
	put(fracPart[scale-scale%9:])
	if neg {
		for i := range out {
			out[i] = ^out[i]
		}
	}
	if len(out) > 0 {
		out[0] ^= 0x80
	}
	return out, nil
}

// digits reads s, all decimal digits, as a number.
func digits(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

func parseDate(s string) (y, m, d int, err error) {
	var ok1, ok2, ok3 bool
	if len(s) == 10 && s[4] == '-' && s[7] == '-' {
		y, ok1 = digits(s[:4])
		m, ok2 = digits(s[5:7])
		d, ok3 = digits(s[8:])
	}
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, 0, fmt.Errorf("%q is not a date YYYY-MM-DD", s)
	}
	if m > 12 || d > 31 {
		return 0, 0, 0, fmt.Errorf("%q is out of MySQL's date range", s)
	}
	return y, m, d, nil
}

// fraction reads ".123" as microseconds, refusing more digits than fsp.
func fraction(frac string, fsp int) (int64, error) {
	if frac == "" {
		return 0, nil
	}
	if len(frac) > fsp {
		return 0, fmt.Errorf("fraction .%s has more digits than the column's %d", frac, fsp)
	}
	us, err := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fraction .%s is not digits", frac)
	}
	return us, nil
}

type datetime struct {
	year, month, day, hour, minute, second int
	micro                                  int64
}

func parseDatetimeValue(v any, fsp int) (datetime, error) {
	switch t := v.(type) {
	case time.Time:
		t = t.UTC()
		us := int64(t.Nanosecond() / 1000)
		if scale := int64(math.Pow10(6 - fsp)); us%scale != 0 {
			return datetime{}, fmt.Errorf("time %s has more fractional digits than the column's %d", t, fsp)
		}
		return datetime{t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second(), us}, nil
	case string:
		date, clock, ok := strings.Cut(t, " ")
		if !ok {
			return datetime{}, fmt.Errorf("%q is not YYYY-MM-DD HH:MM:SS[.ffffff]", t)
		}
		y, mo, d, err := parseDate(date)
		if err != nil {
			return datetime{}, err
		}
		whole, frac, _ := strings.Cut(clock, ".")
		var h, mi, sec int
		var ok1, ok2, ok3 bool
		if len(whole) == 8 && whole[2] == ':' && whole[5] == ':' {
			h, ok1 = digits(whole[:2])
			mi, ok2 = digits(whole[3:5])
			sec, ok3 = digits(whole[6:])
		}
		if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 59 {
			return datetime{}, fmt.Errorf("%q is not YYYY-MM-DD HH:MM:SS[.ffffff]", t)
		}
		us, err := fraction(frac, fsp)
		if err != nil {
			return datetime{}, err
		}
		return datetime{y, mo, d, h, mi, sec, us}, nil
	}
	return datetime{}, fmt.Errorf("a DATETIME or TIMESTAMP takes a string or time.Time, not %T", v)
}

// appendFraction writes the fractional part of TIME2, DATETIME2 and
// TIMESTAMP2: 0, 1, 2 or 3 bytes by precision, big-endian.
func appendFraction(b []byte, us int64, fsp int) []byte {
	switch fsp {
	case 1, 2:
		return append(b, byte(int8(us/10000)))
	case 3, 4:
		v := uint16(int16(us / 100))
		return append(b, byte(v>>8), byte(v))
	case 5, 6:
		v := uint32(int32(us))
		return append(b, byte(v>>16), byte(v>>8), byte(v))
	}
	return b
}

// datetimeBinary is my_datetime_packed_to_binary: 5 bytes of
// year*13+month, day, hour, minute, second (plus 0x8000000000), then the
// fraction.
func datetimeBinary(d datetime, fsp int) []byte {
	ymd := int64((d.year*13+d.month)<<5 | d.day)
	hms := int64(d.hour<<12 | d.minute<<6 | d.second)
	intPart := ymd<<17 | hms
	v := uint64(intPart + 0x8000000000)
	b := []byte{byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
	return appendFraction(b, d.micro, fsp)
}

// timestampBinary is my_timestamp_to_binary: the seconds since the
// epoch (UTC), 4 bytes big-endian, then the fraction.
func timestampBinary(d datetime, fsp int) []byte {
	var secs int64
	if d.year != 0 || d.month != 0 || d.day != 0 {
		secs = time.Date(d.year, time.Month(d.month), d.day, d.hour, d.minute, d.second, 0, time.UTC).Unix()
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(secs))
	return appendFraction(b, d.micro, fsp)
}

// timestampInRange reports whether d is a TIMESTAMP MySQL can hold: zero,
// or 1970-01-01 00:00:01 to 2038-01-19 03:14:07 UTC.
func timestampInRange(d datetime) bool {
	if d == (datetime{}) {
		return true
	}
	secs := time.Date(d.year, time.Month(d.month), d.day, d.hour, d.minute, d.second, 0, time.UTC).Unix()
	return secs >= 1 && secs <= math.MaxInt32
}

// timeBinary is my_time_packed_to_binary for "[-]H:MM:SS[.ffffff]".
func timeBinary(s string, fsp int) ([]byte, error) {
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	parts := strings.Split(whole, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%q is not [-]HHH:MM:SS[.ffffff]", s)
	}
	var hms [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not [-]HHH:MM:SS[.ffffff]", s)
		}
		hms[i] = n
	}
	if hms[0] > 838 || hms[1] > 59 || hms[2] > 59 {
		return nil, fmt.Errorf("%q is out of TIME's range", s)
	}
	us, err := fraction(frac, fsp)
	if err != nil {
		return nil, err
	}
	packed := (hms[0]<<12|hms[1]<<6|hms[2])<<24 + us
	if neg {
		packed = -packed
	}
	intPart := packed >> 24
	fracPart := packed % (1 << 24)
	// For a negative time the integer part is the floor and the fraction
	// keeps the sign (C's >> and %), as MY_PACKED_TIME_GET_INT_PART and
	// _FRAC_PART compute them.
	switch fsp {
	case 0:
		v := uint32(intPart + 0x800000)
		return []byte{byte(v >> 16), byte(v >> 8), byte(v)}, nil
	case 1, 2, 3, 4:
		v := uint32(intPart + 0x800000)
		return appendFraction([]byte{byte(v >> 16), byte(v >> 8), byte(v)}, fracPart, fsp), nil
	default:
		v := uint64(packed + 0x800000000000)
		return []byte{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}, nil
	}
}
