package change

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// braid reads the row images of the common column types itself: it keeps
// them raw, formats values straight from their bytes (Codec's
// appendRawText), and decodes a value only when asked, to exactly the value
// go-mysql's RowsEvent.DecodeData would give (braid relies
// on that). Measured in bench/, go-mysql's decoding (fmt.Sprintf and
// time.Format per temporal value), then braid's own decoding to boxed
// values, were the bottleneck of a catch-up. A table with a column of a
// type shapeOf does not know (pre-5.6 temporal types) and MariaDB's
// compressed rows events go to go-mysql's decoder. MySQL's binary JSON and
// VECTOR are read raw too (go-mysql's JSON text is not MySQL's), and so are
// PARTIAL_UPDATE_ROWS events, whose JSON diffs braid applies
// (SplitPartialRows).

// tableShapes returns the shape of each column's values in a table map's
// rows events, or nil when a column is of a type braid does not read raw.
func TableShapes(tm *replication.TableMapEvent) []Shape {
	shapes := make([]Shape, len(tm.ColumnType))
	for i, tp := range tm.ColumnType {
		sh, err := shapeOf(tp, tm.ColumnMeta[i])
		if err != nil {
			return nil
		}
		shapes[i] = sh
	}
	return shapes
}

// Images are the row images of one rows event, shared by its row
// changes: raw, for the column types braid reads itself, or as go-mysql
// decoded them. Raw images stay as the binlog wrote them: the flat writer
// and the canal encoder format each value straight from its bytes, so a
// row change costs no boxed value, no slice of them and no garbage
// (measured in bench/: decoding to values and formatting them again was
// most of a catch-up's CPU). Values are decoded only when asked for
// (RowChange.Before, After).
type Images struct {
	// data is a raw event's rows part; it is never modified.
	data []byte
	// at holds, for each raw image in order, cols offsets into data where
	// a column's value starts, or -1 for NULL (or a column the image
	// leaves out).
	at   []int32
	cols int
	// decoded holds go-mysql's values, one slice per image, for an event
	// that is not raw.
	Decoded [][]any
	// ends, set for text images (TextRows), holds where each value that
	// at says starts ends in data.
	ends []int32
	// starts, for raw images, holds where each image starts in data, and
	// then len(data): image k is data[starts[k]:starts[k+1]].
	starts []int32
	// binlog is what else of the rows event a target replaying it needs
	// (SetBinlog); nil when the reader kept none.
	binlog *RowsBinlog
	// presentBefore and presentAfter are the bitmaps of the columns the
	// before and after images hold (SetPresent); nil when they hold all.
	presentBefore, presentAfter []byte
}

// SetPresent records the rows event's bitmaps of the columns its images
// hold, before for its before images (a DELETE's, an UPDATE's) and after
// for its after images (an INSERT's, an UPDATE's), of cols columns: with
// binlog_row_image MINIMAL or NOBLOB they leave columns out, which read
// as NULL but are not the row's (RowChange.Present). A bitmap of every
// column is not kept.
func (im *Images) SetPresent(before, after []byte, cols int) {
	if !allPresent(before, cols) {
		im.presentBefore = before
	}
	if !allPresent(after, cols) {
		im.presentAfter = after
	}
}

// allPresent reports whether bitmap marks each of cols columns (a nil
// bitmap: the image is not there).
func allPresent(bitmap []byte, cols int) bool {
	if bitmap == nil {
		return true
	}
	if len(bitmap) < (cols+7)>>3 {
		return false
	}
	// A byte at a time (bit by bit it was most of a rows event's
	// bookkeeping, twice an event).
	whole := cols >> 3
	for _, b := range bitmap[:whole] {
		if b != 0xff {
			return false
		}
	}
	last := byte(1)<<(cols&7) - 1
	return cols&7 == 0 || bitmap[whole]&last == last
}

// RowsBinlog is what a target that applies the rows event's images as
// binlog row events (sink/mysql) needs besides them. It is read-only.
type RowsBinlog struct {
	// Format is the body of the source's format description event
	// (binlog version, server version, header lengths, checksum
	// algorithm), without its header and checksum.
	Format []byte
	// TableMap is the table map event's post-header and body, without
	// its header and checksum.
	TableMap []byte
	// Present is the rows event's bitmap of the columns its images hold
	// (an UPDATE's before images), PresentAfter an UPDATE's after images'
	// (nil for the other kinds).
	Present, PresentAfter []byte
}

// SetBinlog keeps b with raw images, for RowChange.Binlog.
func (im *Images) SetBinlog(b *RowsBinlog) {
	if im.Raw() && im.starts != nil {
		im.binlog = b
	}
}

// Raw reports whether the images are raw binlog images (else go-mysql
// decoded them, or they are text).
func (im *Images) Raw() bool { return im.Decoded == nil && im.ends == nil }

// OffsetBytes is the memory the raw images' offsets take, for Event.Size.
func (im *Images) OffsetBytes() int64 { return 4 * int64(cap(im.at)+cap(im.ends)+cap(im.starts)) }

// offsets are raw image k's column offsets.
func (im *Images) offsets(k int32) []int32 {
	from := int(k) * im.cols
	return im.at[from : from+im.cols : from+im.cols]
}

// count is how many images there are.
func (im *Images) Count() int {
	if im.Decoded != nil || im.cols == 0 {
		return len(im.Decoded)
	}
	return len(im.at) / im.cols
}

// splitRows finds where each value of each row image of re starts in
// data[pos:], as RowsEvent.DecodeData would read them for an uncompressed,
// non-partial event, without decoding a value.
func SplitRows(re *replication.RowsEvent, shapes []Shape, pos int, data []byte) (rr *Images, err error) {
	return splitRows(re, shapes, data[pos:], re.Type() == replication.EnumRowsEventTypeUpdate)
}

// splitRows is SplitRows of rows, an UPDATE's pairs of images when update
// is set.
func splitRows(re *replication.RowsEvent, shapes []Shape, rows []byte, update bool) (rr *Images, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rows event of %s.%s is truncated or malformed: %v", re.Table.Schema, re.Table.Table, r)
		}
	}()
	cols := int(re.ColumnCount)
	if cols != len(shapes) {
		return nil, fmt.Errorf("rows event of %s.%s has %d columns, its table map %d", re.Table.Schema, re.Table.Table, cols, len(shapes))
	}
	rr = &Images{data: rows, cols: cols}
	present1, present2 := presentColumns(re.ColumnBitmap1, cols), presentColumns(re.ColumnBitmap2, cols)
	for at := 0; at < len(rr.data); {
		rr.starts = append(rr.starts, int32(at))
		if at, err = rr.image(shapes, at, re.ColumnBitmap1, present1); err != nil {
			return nil, err
		}
		if update {
			rr.starts = append(rr.starts, int32(at))
			if at, err = rr.image(shapes, at, re.ColumnBitmap2, present2); err != nil {
				return nil, err
			}
		}
		if first := len(rr.at) == cols || (update && len(rr.at) == 2*cols); first && at < len(rr.data) {
			// Room for as many rows as are left if they are as long as
			// the first (Event.Size counts the capacity).
			more := (len(rr.data)-at)/at + 1
			rr.at = slices.Grow(rr.at, len(rr.at)*more)
			rr.starts = slices.Grow(rr.starts, len(rr.starts)*more+1)
		}
	}
	rr.starts = append(rr.starts, int32(len(rr.data)))
	return rr, nil
}

// presentColumns counts the columns a row image bitmap marks present.
func presentColumns(bitmap []byte, cols int) int {
	present := 0
	for _, c := range bitmap {
		present += bits.OnesCount8(c)
	}
	if extra := len(bitmap)*8 - cols; extra > 0 { // bits past the last column
		present -= bits.OnesCount8(bitmap[len(bitmap)-1] >> (8 - extra))
	}
	return present
}

// image appends the offsets of the row image at data[at:], a null bitmap
// over the present columns then the present, non-NULL columns' values, and
// returns where the next image starts.
func (rr *Images) image(shapes []Shape, at int, bitmap []byte, present int) (int, error) {
	nulls := rr.data[at : at+(present+7)/8]
	at += len(nulls)
	nullIdx := 0
	for i, sh := range shapes {
		if bitmap[i>>3]&(1<<(i&7)) == 0 {
			rr.at = append(rr.at, -1)
			continue
		}
		isNull := nulls[nullIdx>>3]&(1<<(nullIdx&7)) != 0
		nullIdx++
		if isNull || sh.null {
			rr.at = append(rr.at, -1)
			continue
		}
		n := sh.len(rr.data[at:])
		if at+n > len(rr.data) {
			return 0, fmt.Errorf("column %d: a value of %d bytes at %d of %d", i, n, at, len(rr.data))
		}
		if sh.json {
			var short [512]byte
			if _, err := AppendMySQLJSON(short[:0], sh.bytes(rr.data[at:])); err != nil {
				return 0, fmt.Errorf("column %d: %w", i, err)
			}
		}
		rr.at = append(rr.at, int32(at))
		at += n
	}
	return at, nil
}

// stringColumn resolves a MYSQL_TYPE_STRING column's real type (CHAR,
// BINARY, ENUM or SET) and byte width from its metadata; other types are
// returned as they are.
func stringColumn(tp byte, meta uint16) (realType byte, width int) {
	if tp != mysql.MYSQL_TYPE_STRING {
		return tp, 0
	}
	if meta < 256 {
		return tp, int(meta)
	}
	b0, b1 := byte(meta>>8), byte(meta&0xff)
	if b0&0x30 != 0x30 {
		return b0 | 0x30, int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
	}
	return b0, int(b1)
}

// Shape is where a column's value ends in a row image: after fixed
// bytes, or after a little-endian length of prefix bytes and the bytes it
// counts. A NULL-type column has no value.
type Shape struct {
	fixed, prefix int
	null          bool
	// json marks MySQL's binary JSON, checked when the image is split so
	// that formatting it later cannot fail.
	json bool
}

// shapeOf is the shape of a column's values, for the types braid reads
// raw; an error for the others, and for metadata out of range.
func shapeOf(tp byte, meta uint16) (Shape, error) {
	real, width := stringColumn(tp, meta)
	if tp == mysql.MYSQL_TYPE_STRING && real != mysql.MYSQL_TYPE_STRING && real != mysql.MYSQL_TYPE_ENUM && real != mysql.MYSQL_TYPE_SET {
		return Shape{}, fmt.Errorf("CHAR column of real type %d", real)
	}
	switch real {
	case mysql.MYSQL_TYPE_NULL:
		return Shape{null: true}, nil
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_YEAR:
		return Shape{fixed: 1}, nil
	case mysql.MYSQL_TYPE_SHORT:
		return Shape{fixed: 2}, nil
	case mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_DATE:
		return Shape{fixed: 3}, nil
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_FLOAT:
		return Shape{fixed: 4}, nil
	case mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_DOUBLE:
		return Shape{fixed: 8}, nil
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		if precision, scale := int(meta>>8), int(meta&0xff); scale <= precision && precision <= 65 {
			return Shape{fixed: decimalSize(precision, scale)}, nil
		}
	case mysql.MYSQL_TYPE_BIT:
		if nbits := int(meta>>8)*8 + int(meta&0xff); nbits <= 64 {
			return Shape{fixed: (nbits + 7) / 8}, nil
		}
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		if meta <= 6 {
			return Shape{fixed: 4 + fracSize(int(meta))}, nil
		}
	case mysql.MYSQL_TYPE_DATETIME2:
		if meta <= 6 {
			return Shape{fixed: 5 + fracSize(int(meta))}, nil
		}
	case mysql.MYSQL_TYPE_TIME2:
		if meta <= 6 {
			return Shape{fixed: 3 + fracSize(int(meta))}, nil
		}
	case mysql.MYSQL_TYPE_ENUM:
		if n := int(meta & 0xff); n == 1 || n == 2 {
			return Shape{fixed: n}, nil
		}
	case mysql.MYSQL_TYPE_SET:
		if n := int(meta & 0xff); n >= 1 && n <= 8 {
			return Shape{fixed: n}, nil
		}
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING:
		if real != mysql.MYSQL_TYPE_STRING {
			width = int(meta) // VARCHAR's metadata is its width
		}
		if width < 256 {
			return Shape{prefix: 1}, nil
		}
		return Shape{prefix: 2}, nil
	case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_JSON, mysql.MYSQL_TYPE_VECTOR:
		if meta >= 1 && meta <= 4 {
			return Shape{prefix: int(meta), json: real == mysql.MYSQL_TYPE_JSON}, nil
		}
	}
	return Shape{}, fmt.Errorf("column type %d (metadata %#x)", tp, meta)
}

// len is the byte length of the value at data[0:].
func (s Shape) len(data []byte) int {
	if s.prefix == 0 {
		return s.fixed
	}
	return s.prefix + int(littleEndian(data[:s.prefix]))
}

// bytes is a length-prefixed value's bytes, after its length.
func (s Shape) bytes(data []byte) []byte {
	return data[s.prefix:s.len(data)]
}

// decodeValue decodes one value of a column braid reads raw to the value
// go-mysql's decoder gives. Strings share data's bytes.
func decodeValue(data []byte, tp byte, meta uint16, tz *ZoneClock) (any, int, error) {
	real, _ := stringColumn(tp, meta)
	switch real {
	case mysql.MYSQL_TYPE_NULL:
		return nil, 0, nil
	case mysql.MYSQL_TYPE_TINY:
		return int8(data[0]), 1, nil
	case mysql.MYSQL_TYPE_SHORT:
		return int16(binary.LittleEndian.Uint16(data)), 2, nil
	case mysql.MYSQL_TYPE_INT24:
		return int32(int24(data)), 3, nil
	case mysql.MYSQL_TYPE_LONG:
		return int32(binary.LittleEndian.Uint32(data)), 4, nil
	case mysql.MYSQL_TYPE_LONGLONG:
		return int64(binary.LittleEndian.Uint64(data)), 8, nil
	case mysql.MYSQL_TYPE_FLOAT:
		return math.Float32frombits(binary.LittleEndian.Uint32(data)), 4, nil
	case mysql.MYSQL_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(data)), 8, nil
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		precision, scale := int(meta>>8), int(meta&0xff)
		b, n := appendDecimal(make([]byte, 0, precision+2), data, precision, scale)
		return bytesString(b), n, nil
	case mysql.MYSQL_TYPE_BIT:
		n := (int(meta>>8)*8 + int(meta&0xff) + 7) / 8
		return int64(bigEndian(data[:n])), n, nil
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		b, n := appendTimestamp2(make([]byte, 0, 26), data, int(meta), tz)
		return bytesString(b), n, nil
	case mysql.MYSQL_TYPE_DATETIME2:
		b, n := appendDatetime2(make([]byte, 0, 26), data, int(meta))
		return bytesString(b), n, nil
	case mysql.MYSQL_TYPE_TIME2:
		b := appendTime2(make([]byte, 0, 17), data, int(meta), false)
		return bytesString(b), 3 + fracSize(int(meta)), nil
	case mysql.MYSQL_TYPE_DATE:
		if date(data) == 0 {
			return "0000-00-00", 3, nil
		}
		return bytesString(appendDate(make([]byte, 0, 10), data)), 3, nil
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
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING,
		mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY:
		sh, err := shapeOf(tp, meta)
		if err != nil {
			return nil, 0, err
		}
		if real == mysql.MYSQL_TYPE_BLOB || real == mysql.MYSQL_TYPE_GEOMETRY {
			return sh.bytes(data), sh.len(data), nil
		}
		return bytesString(sh.bytes(data)), sh.len(data), nil
	case mysql.MYSQL_TYPE_JSON:
		// The text MySQL's SELECT prints, not the binary document.
		sh := Shape{prefix: int(meta)}
		text, err := AppendMySQLJSON(nil, sh.bytes(data))
		return bytesString(text), sh.len(data), err
	case mysql.MYSQL_TYPE_VECTOR:
		sh := Shape{prefix: int(meta)}
		return bytesString(appendVector(nil, sh.bytes(data))), sh.len(data), nil
	}
	return nil, 0, fmt.Errorf("column type %d", tp)
}

// int24 reads a MEDIUMINT's three little-endian bytes, sign-extended.
func int24(data []byte) uint32 {
	u := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16
	if u&0x800000 != 0 {
		u |= 0xff000000
	}
	return u
}

// date reads a DATE's three little-endian bytes.
func date(data []byte) uint32 {
	return uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16
}

// appendDate appends a DATE as YYYY-MM-DD.
func appendDate(b []byte, data []byte) []byte {
	v := int(date(data))
	if v == 0 {
		return append(b, "0000-00-00"...)
	}
	year, month, day := v/(16*32), v/32%16, v%32
	if year > 9999 {
		return appendDateSlow(b, year, month, day)
	}
	var t [10]byte // in one piece, as appendDatetime
	putDate(t[:], year, month, day)
	return append(b, t[:]...)
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
	switch {
	case width == 2 && v >= 0 && v < 100: // the parts of a date and time
		return append(b, byte('0'+v/10), byte('0'+v%10))
	case width == 4 && v >= 0 && v < 10000:
		return append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	}
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

// fracSize is how many bytes hold the fraction of a temporal value with
// dec digits.
func fracSize(dec int) int { return (dec + 1) / 2 }

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
	if uint(year) > 9999 || uint(month) > 99 || uint(day) > 99 || uint(hour) > 99 || uint(minute) > 99 ||
		uint(second) > 99 || uint(usec) > 999999 || uint(dec) > 6 {
		return appendDatetimeSlow(b, year, month, day, hour, minute, second, usec, dec)
	}
	// The common case in one piece: each field's digits put in place (a
	// DATETIME(6) value's text took eleven appends and their checks).
	var t [26]byte
	putDate(t[:], year, month, day)
	t[10] = ' '
	put2(t[11:], hour)
	t[13] = ':'
	put2(t[14:], minute)
	t[16] = ':'
	put2(t[17:], second)
	if dec == 0 {
		return append(b, t[:19]...)
	}
	t[19] = '.'
	put2(t[20:], usec/10000)
	put2(t[22:], usec/100%100)
	put2(t[24:], usec%100)
	return append(b, t[:20+dec]...)
}

// putDate writes "YYYY-MM-DD" at t[0:10]: year 0..9999, month and day
// 0..99.
func putDate(t []byte, year, month, day int) {
	put2(t[0:], year/100)
	put2(t[2:], year%100)
	t[4] = '-'
	put2(t[5:], month)
	t[7] = '-'
	put2(t[8:], day)
}

// appendDateSlow appends "YYYY-MM-DD" field by field, for any values.
func appendDateSlow(b []byte, year, month, day int) []byte {
	b = appendPadded(b, year, 4)
	b = append(b, '-')
	b = appendPadded(b, month, 2)
	b = append(b, '-')
	return appendPadded(b, day, 2)
}

// put2 writes v (0..99) as two digits at t[0:2].
func put2(t []byte, v int) {
	t[0], t[1] = twoDigits[2*v], twoDigits[2*v+1]
}

const twoDigits = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// appendDatetimeSlow is appendDatetime for fields out of their ranges
// (a year past 9999 from a damaged image, say).
func appendDatetimeSlow(b []byte, year, month, day, hour, minute, second, usec, dec int) []byte {
	b = appendDateSlow(b, year, month, day)
	b = append(b, ' ')
	b = appendPadded(b, hour, 2)
	b = append(b, ':')
	b = appendPadded(b, minute, 2)
	b = append(b, ':')
	b = appendPadded(b, second, 2)
	return fracDigits(b, usec, dec)
}

// appendTimestamp2 appends a TIMESTAMP(dec), read from seconds since the
// epoch (big endian) and the fraction, in the server's zone; it returns
// the value's byte length too.
func appendTimestamp2(b []byte, data []byte, dec int, tz *ZoneClock) ([]byte, int) {
	sec := int64(binary.BigEndian.Uint32(data))
	usec, fn := fracBytes(data[4:], dec)
	if sec == 0 {
		return appendDatetime(b, 0, 0, 0, 0, 0, 0, usec, dec), 4 + fn
	}
	// The wall clock read as UTC: time's fast path, no zone lookup.
	t := time.Unix(sec+tz.offset(sec), 0).UTC()
	year, month, day := t.Date()
	hour, minute, second := t.Clock()
	return appendDatetime(b, year, int(month), day, hour, minute, second, usec, dec), 4 + fn
}

// ZoneClock is the zone TIMESTAMP values are shown in, with the last span
// of one UTC offset it met: consecutive values mostly fall in it, and then
// no zone lookup is made (time's lookup binary-searches a named zone's
// transitions for any time outside the span around the process's start,
// about 140 ns a value; a hit costs a few). Safe for concurrent use.
type ZoneClock struct {
	loc  *time.Location // nil: time.Local
	span atomic.Pointer[zoneSpan]
}

// zoneSpan is the seconds [start, end) in which a zone is offset seconds
// ahead of UTC.
type zoneSpan struct{ start, end, offset int64 }

func NewZoneClock(loc *time.Location) *ZoneClock { return &ZoneClock{loc: loc} }

// offset is the zone's offset from UTC at sec, in seconds.
func (z *ZoneClock) offset(sec int64) int64 {
	if s := z.span.Load(); s != nil && sec >= s.start && sec < s.end {
		return s.offset
	}
	return z.lookup(sec)
}

// lookup is offset when sec is outside the span held: it asks time and
// holds sec's span.
func (z *ZoneClock) lookup(sec int64) int64 {
	t := time.Unix(sec, 0)
	if z.loc != nil {
		t = t.In(z.loc)
	}
	_, off := t.Zone()
	start, end := t.ZoneBounds()
	s := &zoneSpan{start: math.MinInt64, end: math.MaxInt64, offset: int64(off)}
	if !start.IsZero() {
		s.start = start.Unix()
	}
	if !end.IsZero() {
		s.end = end.Unix()
	}
	z.span.Store(s)
	return s.offset
}

// appendTime2 appends a TIME(dec) value from its binlog bytes as go-mysql
// shows it, [-]HH:MM:SS[.fraction] with as many hour digits as it takes,
// and the fraction's dec digits only when they are not all zero, unless
// zeroFrac is set (MySQL prints them, and so does canal).
func appendTime2(b []byte, data []byte, dec int, zeroFrac bool) []byte {
	intPart := int64(bigEndian(data[:3])) - 0x800000
	var tmp int64 // seconds<<24 | microseconds, signed
	switch dec {
	case 1, 2:
		frac := int64(data[3])
		if intPart < 0 && frac != 0 {
			// A negative value's fraction is stored as 0x100 - fraction,
			// counting from the next second (binary sort order).
			intPart++
			frac -= 0x100
		}
		tmp = intPart<<24 + frac*10000
	case 3, 4:
		frac := int64(binary.BigEndian.Uint16(data[3:5]))
		if intPart < 0 && frac != 0 {
			intPart++
			frac -= 0x10000
		}
		tmp = intPart<<24 + frac*100
	case 5, 6:
		tmp = int64(bigEndian(data[:6])) - 0x800000000000
	default:
		tmp = intPart << 24
	}
	if tmp < 0 {
		b = append(b, '-')
		tmp = -tmp
	}
	hms, usec := tmp>>24, int(tmp%(1<<24))
	b = appendPadded(b, int((hms>>12)%(1<<10)), 2)
	b = append(b, ':')
	b = appendPadded(b, int((hms>>6)%(1<<6)), 2)
	b = append(b, ':')
	b = appendPadded(b, int(hms%(1<<6)), 2)
	switch {
	case usec != 0:
		b = append(b, '.')
		b = appendPadded(b, usec, 6)
		b = b[:len(b)-(6-dec)]
	case zeroFrac && dec > 0:
		b = append(b, '.')
		b = append(b, "000000"[:dec]...)
	}
	return b
}

// appendDatetime2 appends a DATETIME(dec), read from 40 bits of packed date
// and time (offset by 0x8000000000) and the fraction; it returns the
// value's byte length too.
func appendDatetime2(b []byte, data []byte, dec int) ([]byte, int) {
	intPart := int64(bigEndian(data[:5])) - 0x8000000000
	usec, fn := fracBytes(data[5:], dec)
	if intPart == 0 {
		return appendDatetime(b, 0, 0, 0, 0, 0, 0, usec, dec), 5 + fn
	}
	if intPart < 0 {
		intPart = -intPart
	}
	ymd, hms := intPart>>17, intPart%(1<<17)
	ym := ymd >> 5
	return appendDatetime(b, int(ym/13), int(ym%13), int(ymd%(1<<5)),
		int(hms>>12), int((hms>>6)%(1<<6)), int(hms%(1<<6)), usec, dec), 5 + fn
}

// decimalDigitBytes is how many bytes hold a group of 0..9 decimal digits.
var decimalDigitBytes = [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

// decimalSize is the byte length of a DECIMAL(precision, scale).
func decimalSize(precision, scale int) int {
	integral := precision - scale
	return decimalDigitBytes[integral%9] + integral/9*4 + scale/9*4 + decimalDigitBytes[scale%9]
}

// appendDecimal appends a DECIMAL(precision, scale) read from MySQL's
// binary format: groups of nine digits in four big-endian bytes, the
// leftover digits of the integral and fractional parts in fewer bytes, the
// sign in the top bit (a negative number has every byte inverted). It
// writes the exact digits as go-mysql does: no leading zeros, "0" for a
// zero integral part, all scale digits; and returns the value's byte
// length.
func appendDecimal(b []byte, data []byte, precision, scale int) ([]byte, int) {
	integral := precision - scale
	fullInt, leadInt := integral/9, integral%9
	fullFrac, leadFrac := scale/9, scale%9
	size := decimalSize(precision, scale)
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
	return b, size
}
