package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// braid decodes the row images of the common column types itself, producing
// exactly the values go-mysql's RowsEvent.DecodeData would (the rest of the
// engine relies on that), but without fmt.Sprintf and time.Format per
// temporal value and without an intermediate strings.Builder per DECIMAL:
// measured in bench/, those made go-mysql's decoding the bottleneck of a
// catch-up. A table with a column type outside fastTypes (TIME, MySQL's
// binary JSON, pre-5.6 temporal types, VECTOR) and a compressed or partial
// rows event go to go-mysql's decoder.

// fastTypes are the binlog column types decodeImage handles.
var fastTypes = func() (t [256]bool) {
	for _, c := range []byte{
		mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG,
		mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE,
		mysql.MYSQL_TYPE_NEWDECIMAL, mysql.MYSQL_TYPE_BIT, mysql.MYSQL_TYPE_TIMESTAMP2,
		mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_YEAR,
		mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING,
		mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_NULL,
	} {
		t[c] = true
	}
	return t
}()

// canDecodeFast reports whether every column of the table map is of a type
// decodeImage handles.
func canDecodeFast(tm *replication.TableMapEvent) bool {
	for i, tp := range tm.ColumnType {
		if tp == mysql.MYSQL_TYPE_STRING && tm.ColumnMeta[i] >= 256 {
			tp = stringRealType(tm.ColumnMeta[i])
			if tp != mysql.MYSQL_TYPE_STRING && tp != mysql.MYSQL_TYPE_ENUM && tp != mysql.MYSQL_TYPE_SET {
				return false
			}
			continue
		}
		if !fastTypes[tp] {
			return false
		}
	}
	return true
}

// stringRealType is the real type of a MYSQL_TYPE_STRING column (CHAR,
// BINARY, ENUM or SET) from its metadata.
func stringRealType(meta uint16) byte {
	b0 := byte(meta >> 8)
	if b0&0x30 != 0x30 {
		return b0 | 0x30
	}
	return b0
}

// decodeRowsData decodes the row images of re from data[pos:], as
// RowsEvent.DecodeData does for an uncompressed, non-partial event.
func decodeRowsData(re *replication.RowsEvent, pos int, data []byte, tz *time.Location) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rows event of %s.%s is truncated or malformed: %v", re.Table.Schema, re.Table.Table, r)
		}
	}()
	update := re.Type() == replication.EnumRowsEventTypeUpdate
	n := 0
	for pos < len(data) {
		var row []any
		if row, n, err = decodeImage(re, data[pos:], re.ColumnBitmap1, tz); err != nil {
			return err
		}
		pos += n
		re.Rows = append(re.Rows, row)
		if update {
			if row, n, err = decodeImage(re, data[pos:], re.ColumnBitmap2, tz); err != nil {
				return err
			}
			pos += n
			re.Rows = append(re.Rows, row)
		}
	}
	return nil
}

// decodeImage decodes one row image: a null bitmap over the columns present
// in bitmap, then the values of the present, non-NULL columns.
func decodeImage(re *replication.RowsEvent, data []byte, bitmap []byte, tz *time.Location) ([]any, int, error) {
	cols := int(re.ColumnCount)
	present := 0
	for i := 0; i < len(bitmap); i++ {
		present += bits.OnesCount8(bitmap[i])
	}
	if extra := len(bitmap)*8 - cols; extra > 0 { // bits past the last column
		present -= bits.OnesCount8(bitmap[len(bitmap)-1] >> (8 - extra))
	}
	nulls := data[:(present+7)/8]
	pos := len(nulls)
	row := make([]any, cols)
	tm := re.Table
	nullIdx := 0
	for i := 0; i < cols; i++ {
		if bitmap[i>>3]&(1<<(i&7)) == 0 {
			continue
		}
		isNull := nulls[nullIdx>>3]&(1<<(nullIdx&7)) != 0
		nullIdx++
		if isNull {
			continue
		}
		v, n, err := decodeValue(data[pos:], tm.ColumnType[i], tm.ColumnMeta[i], tz)
		if err != nil {
			return nil, 0, fmt.Errorf("column %d: %w", i, err)
		}
		row[i] = v
		pos += n
	}
	return row, pos, nil
}

// decodeValue decodes one value of a fastTypes column.
func decodeValue(data []byte, tp byte, meta uint16, tz *time.Location) (any, int, error) {
	length := 0
	if tp == mysql.MYSQL_TYPE_STRING {
		if meta >= 256 {
			b0, b1 := byte(meta>>8), byte(meta&0xff)
			if b0&0x30 != 0x30 {
				length = int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
				tp = b0 | 0x30
			} else {
				length = int(b1)
				tp = b0
			}
		} else {
			length = int(meta)
		}
	}
	switch tp {
	case mysql.MYSQL_TYPE_NULL:
		return nil, 0, nil
	case mysql.MYSQL_TYPE_TINY:
		return int8(data[0]), 1, nil
	case mysql.MYSQL_TYPE_SHORT:
		return int16(binary.LittleEndian.Uint16(data)), 2, nil
	case mysql.MYSQL_TYPE_INT24:
		u := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16
		if u&0x800000 != 0 {
			u |= 0xff000000
		}
		return int32(u), 3, nil
	case mysql.MYSQL_TYPE_LONG:
		return int32(binary.LittleEndian.Uint32(data)), 4, nil
	case mysql.MYSQL_TYPE_LONGLONG:
		return int64(binary.LittleEndian.Uint64(data)), 8, nil
	case mysql.MYSQL_TYPE_FLOAT:
		return math.Float32frombits(binary.LittleEndian.Uint32(data)), 4, nil
	case mysql.MYSQL_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(data)), 8, nil
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		return decodeDecimal(data, int(meta>>8), int(meta&0xff))
	case mysql.MYSQL_TYPE_BIT:
		nbits := int(meta>>8)*8 + int(meta&0xff)
		n := (nbits + 7) / 8
		return int64(bigEndian(data[:n])), n, nil
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		return decodeTimestamp2(data, int(meta), tz)
	case mysql.MYSQL_TYPE_DATETIME2:
		return decodeDatetime2(data, int(meta))
	case mysql.MYSQL_TYPE_DATE:
		v := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16
		if v == 0 {
			return "0000-00-00", 3, nil
		}
		b := make([]byte, 0, 10)
		b = appendPadded(b, int(v/(16*32)), 4)
		b = append(b, '-')
		b = appendPadded(b, int(v/32%16), 2)
		b = append(b, '-')
		b = appendPadded(b, int(v%32), 2)
		return bytesString(b), 3, nil
	case mysql.MYSQL_TYPE_YEAR:
		if data[0] == 0 {
			return 0, 1, nil
		}
		return int(data[0]) + 1900, 1, nil
	case mysql.MYSQL_TYPE_ENUM:
		switch meta & 0xff {
		case 1:
			return int64(data[0]), 1, nil
		case 2:
			return int64(binary.LittleEndian.Uint16(data)), 2, nil
		}
		return nil, 0, fmt.Errorf("ENUM of %d bytes", meta&0xff)
	case mysql.MYSQL_TYPE_SET:
		n := int(meta & 0xff)
		return int64(littleEndian(data[:n])), n, nil
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		return decodeString(data, int(meta))
	case mysql.MYSQL_TYPE_STRING:
		return decodeString(data, length)
	case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY:
		var l, n int
		switch meta {
		case 1:
			l, n = int(data[0]), 1
		case 2:
			l, n = int(binary.LittleEndian.Uint16(data)), 2
		case 3:
			l, n = int(littleEndian(data[:3])), 3
		case 4:
			l, n = int(binary.LittleEndian.Uint32(data)), 4
		default:
			return nil, 0, fmt.Errorf("BLOB with %d length bytes", meta)
		}
		return data[n : n+l], n + l, nil
	}
	return nil, 0, fmt.Errorf("column type %d", tp)
}

// decodeString reads a length-prefixed string: one length byte for columns
// of up to 255 bytes, two beyond. Like go-mysql, the string shares the
// event's bytes, which nothing modifies.
func decodeString(data []byte, maxLen int) (any, int, error) {
	if maxLen < 256 {
		l := int(data[0])
		return bytesString(data[1 : 1+l]), 1 + l, nil
	}
	l := int(binary.LittleEndian.Uint16(data))
	return bytesString(data[2 : 2+l]), 2 + l, nil
}

func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func bigEndian(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

func littleEndian(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// appendPadded appends v in decimal, zero-padded to width digits.
func appendPadded(b []byte, v, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// fracDigits appends the first dec digits of a microsecond fraction.
func fracDigits(b []byte, usec, dec int) []byte {
	if dec == 0 {
		return b
	}
	var tmp [6]byte
	for i := 5; i >= 0; i-- {
		tmp[i] = byte('0' + usec%10)
		usec /= 10
	}
	b = append(b, '.')
	return append(b, tmp[:dec]...)
}

// fracBytes reads the fractional seconds of a temporal value with dec
// digits, as microseconds.
func fracBytes(data []byte, dec int) (usec int, n int) {
	switch dec {
	case 1, 2:
		return int(data[0]) * 10000, 1
	case 3, 4:
		return int(binary.BigEndian.Uint16(data)) * 100, 2
	case 5, 6:
		return int(bigEndian(data[:3])), 3
	}
	return 0, 0
}

// appendDatetime appends "YYYY-MM-DD hh:mm:ss[.frac]".
func appendDatetime(b []byte, year, month, day, hour, minute, second, usec, dec int) []byte {
	b = appendPadded(b, year, 4)
	b = append(b, '-')
	b = appendPadded(b, month, 2)
	b = append(b, '-')
	b = appendPadded(b, day, 2)
	b = append(b, ' ')
	b = appendPadded(b, hour, 2)
	b = append(b, ':')
	b = appendPadded(b, minute, 2)
	b = append(b, ':')
	b = appendPadded(b, second, 2)
	return fracDigits(b, usec, dec)
}

// decodeTimestamp2 reads a TIMESTAMP(dec): seconds since the epoch (big
// endian) and the fraction, shown in the server's zone.
func decodeTimestamp2(data []byte, dec int, tz *time.Location) (any, int, error) {
	sec := int64(binary.BigEndian.Uint32(data))
	usec, fn := fracBytes(data[4:], dec)
	b := make([]byte, 0, 26)
	if sec == 0 {
		return bytesString(appendDatetime(b, 0, 0, 0, 0, 0, 0, usec, dec)), 4 + fn, nil
	}
	t := time.Unix(sec, 0)
	if tz != nil {
		t = t.In(tz)
	}
	year, month, day := t.Date()
	hour, minute, second := t.Clock()
	return bytesString(appendDatetime(b, year, int(month), day, hour, minute, second, usec, dec)), 4 + fn, nil
}

// decodeDatetime2 reads a DATETIME(dec): 40 bits of packed date and time
// (offset by 0x8000000000) and the fraction.
func decodeDatetime2(data []byte, dec int) (any, int, error) {
	intPart := int64(bigEndian(data[:5])) - 0x8000000000
	usec, fn := fracBytes(data[5:], dec)
	b := make([]byte, 0, 26)
	if intPart == 0 {
		return bytesString(appendDatetime(b, 0, 0, 0, 0, 0, 0, usec, dec)), 5 + fn, nil
	}
	if intPart < 0 {
		intPart = -intPart
	}
	ymd, hms := intPart>>17, intPart%(1<<17)
	ym := ymd >> 5
	return bytesString(appendDatetime(b, int(ym/13), int(ym%13), int(ymd%(1<<5)),
		int(hms>>12), int((hms>>6)%(1<<6)), int(hms%(1<<6)), usec, dec)), 5 + fn, nil
}

// decimalDigitBytes is how many bytes hold a group of 0..9 decimal digits.
var decimalDigitBytes = [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

// decodeDecimal reads a DECIMAL(precision, scale) in MySQL's binary format:
// groups of nine digits in four big-endian bytes, the leftover digits of the
// integral and fractional parts in fewer bytes, the sign in the top bit (a
// negative number has every byte inverted). It returns the exact digits as
// go-mysql does: no leading zeros, "0" for a zero integral part, all scale
// digits.
func decodeDecimal(data []byte, precision, scale int) (any, int, error) {
	integral := precision - scale
	fullInt, leadInt := integral/9, integral%9
	fullFrac, leadFrac := scale/9, scale%9
	size := decimalDigitBytes[leadInt] + fullInt*4 + fullFrac*4 + decimalDigitBytes[leadFrac]
	raw := data[:size]
	var mask byte
	if raw[0]&0x80 == 0 {
		mask = 0xff
	}
	// read returns the next n bytes as a big-endian number, sign-corrected.
	pos := 0
	read := func(n int) uint32 {
		var v uint32
		for i := 0; i < n; i++ {
			c := raw[pos+i] ^ mask
			if pos+i == 0 {
				c ^= 0x80
			}
			v = v<<8 | uint32(c)
		}
		pos += n
		return v
	}
	b := make([]byte, 0, precision+2)
	if mask != 0 {
		b = append(b, '-')
	}
	leading := true
	if n := decimalDigitBytes[leadInt]; n > 0 {
		if v := read(n); v != 0 {
			b = strconv.AppendUint(b, uint64(v), 10)
			leading = false
		}
	}
	for i := 0; i < fullInt; i++ {
		v := read(4)
		if leading {
			if v != 0 {
				b = strconv.AppendUint(b, uint64(v), 10)
				leading = false
			}
			continue
		}
		b = appendPadded(b, int(v), 9)
	}
	if leading {
		b = append(b, '0')
	}
	if scale > 0 {
		b = append(b, '.')
		for i := 0; i < fullFrac; i++ {
			b = appendPadded(b, int(read(4)), 9)
		}
		if n := decimalDigitBytes[leadFrac]; n > 0 {
			b = appendPadded(b, int(read(n)), leadFrac)
		}
	}
	return bytesString(b), size, nil
}
