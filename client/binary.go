package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"unsafe"
)

// This file reads braid's binary stream encoding (the server's
// flat.BinaryMessage documents it), which the client asks for unless
// WithJSONLines says otherwise: the same messages as the NDJSON stream,
// with each value length-prefixed, so a row's values are found without
// scanning or unescaping them.

// binaryStreamType is the media type of the binary encoding
// (native.BinaryStreamType; this package does not import the server's).
const binaryStreamType = "application/x-braid-stream"

// Frame kinds (flat.BinaryMessage, flat.BinaryCheckpoint).
const (
	frameMessage    = 'M'
	frameCheckpoint = 'C'
)

// maxFrame bounds a frame's length: a message holds at most the server's
// MaxRows rows, far below it; a longer one is a broken stream.
const maxFrame = 1 << 30

// errBadFrame: a frame does not hold what its kind says.
var errBadFrame = errors.New("client: a malformed frame in the binary stream")

// frameReader reads a binary stream's frames without a copy each: a frame
// is a view of the reader's buffer, or of long when it is longer.
type frameReader struct {
	r    io.Reader
	buf  []byte
	i, n int // buf[i:n] is read and not yet returned
	long []byte
}

// next returns the next frame's payload, only valid until the next call.
func (fr *frameReader) next() ([]byte, error) {
	if cap(fr.long) > maxKeptLong {
		fr.long = nil
	}
	size, head := binary.Uvarint(fr.buf[fr.i:fr.n])
	for head <= 0 {
		if head < 0 || fr.n-fr.i >= binary.MaxVarintLen64 {
			return nil, errBadFrame
		}
		if err := fr.fill(); err != nil {
			return nil, err
		}
		size, head = binary.Uvarint(fr.buf[fr.i:fr.n])
	}
	if size > maxFrame {
		return nil, fmt.Errorf("%w: a frame of %d bytes", errBadFrame, size)
	}
	n := int(size)
	if head+n > len(fr.buf) {
		// Longer than the buffer: assembled in long.
		fr.long = append(fr.long[:0], fr.buf[fr.i+head:fr.n]...)
		fr.i = fr.n
		for len(fr.long) < n {
			if err := fr.fill(); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF // inside the frame
				}
				return nil, err
			}
			take := min(n-len(fr.long), fr.n-fr.i)
			fr.long = append(fr.long, fr.buf[fr.i:fr.i+take]...)
			fr.i += take
		}
		return fr.long, nil
	}
	for fr.n-fr.i < head+n {
		if err := fr.fill(); err != nil {
			return nil, err
		}
	}
	p := fr.buf[fr.i+head : fr.i+head+n : fr.i+head+n]
	fr.i += head + n
	return p, nil
}

// fill reads more into buf, moving what is unread to its start first.
func (fr *frameReader) fill() error {
	if fr.i > 0 {
		fr.n = copy(fr.buf, fr.buf[fr.i:fr.n])
		fr.i = 0
	}
	for {
		k, err := fr.r.Read(fr.buf[fr.n:])
		fr.n += k
		if k > 0 {
			return nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) && fr.n > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
}

// binReader walks one frame's payload; a read past its end or a length
// out of range sets bad and returns zeros.
type binReader struct {
	p   []byte
	i   int
	bad bool
}

// more reports whether the payload has bytes left.
func (r *binReader) more() bool { return r.i < len(r.p) }

// fail marks the payload bad and stops reading it.
func (r *binReader) fail() { r.bad, r.i = true, len(r.p) }

func (r *binReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.p[r.i:])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.i += n
	return v
}

// varint reads a zig-zag varint (binary.AppendVarint's).
func (r *binReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// bytes returns the next n bytes, a view of the payload.
func (r *binReader) bytes(n uint64) []byte {
	if n > uint64(len(r.p)-r.i) {
		r.fail()
		return nil
	}
	b := r.p[r.i : r.i+int(n) : r.i+int(n)]
	r.i += int(n)
	return b
}

// view returns the next str as a view of the payload.
func (r *binReader) view() string {
	b := r.bytes(r.uvarint())
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// count reads a list's uvarint(n+1): n, and whether the list is there
// (0 is null). n is bounded by what the rest of the payload can hold.
func (r *binReader) count() (int, bool) {
	k := r.uvarint()
	if k == 0 {
		return 0, false
	}
	if k-1 > uint64(len(r.p)-r.i) {
		r.fail()
		return 0, false
	}
	return int(k - 1), true
}

// decodeBinary decodes one frame's payload into v, as decode does a line.
func (d *lineDecoder) decodeBinary(p []byte, v *MessageView) error {
	v.reset()
	r := &binReader{p: p}
	if len(p) == 0 {
		return errBadFrame
	}
	r.i = 1
	switch p[0] {
	case frameCheckpoint:
		seq := r.uvarint()
		v.checkpoint = &seq
	case frameMessage:
		d.binaryMessage(r, v)
	default:
		return fmt.Errorf("%w: unknown frame kind %#x", errBadFrame, p[0])
	}
	if r.bad || r.i != len(p) {
		return errBadFrame
	}
	return nil
}

func (d *lineDecoder) binaryMessage(r *binReader, v *MessageView) {
	v.ID = r.uvarint()
	v.Database = d.intern(r.view())
	v.Table = d.intern(r.view())
	if n, ok := r.count(); ok {
		v.hasPkNames = true
		for range n {
			v.PkNames = append(v.PkNames, d.intern(r.view()))
		}
	}
	if ddl := r.bytes(1); len(ddl) == 1 {
		v.IsDdl = ddl[0] != 0
	}
	v.Type = d.intern(r.view())
	v.Es = r.varint()
	v.Ts = r.varint()
	v.SQL = strings.Clone(r.view())
	ncols, ok := r.count()
	if ok {
		v.hasSQLType, v.hasMysqlType = true, true
		for range ncols {
			name := d.intern(r.view())
			sqlType := r.varint()
			mysqlType := d.intern(r.view())
			v.cols = append(v.cols, viewColumn{name: name, sqlType: int(sqlType), mysqlType: mysqlType, inSQLType: true, inMysqlType: true})
		}
	}
	binaryRows(r, &v.data, ncols)
	binaryRows(r, &v.old, ncols)
	v.Seq = r.uvarint()
	v.Source = d.intern(r.view())
	v.OriginDatabase = d.intern(r.view())
	v.OriginTable = d.intern(r.view())
	v.Position = strings.Clone(r.view())
	v.GTID = strings.Clone(r.view())
	if r.more() {
		// Flags, written only when set: 1, snapshot rows, is the only one.
		if r.uvarint() != 1 {
			r.fail()
		}
		v.Snapshot = true
	}
}

// binaryRows reads data or old: rows of ncols cells each. Every value of
// the stream goes through its loop, which reads the payload through locals
// and takes a one-byte cell number (a value under 126 bytes, a NULL, an
// absent column) without calling the varint decoder. It repeats what
// r.uvarint and r.bytes read: a helper shared with them, fast path and
// all, is over the inliner's budget and made the loop 10% slower.
func binaryRows(r *binReader, rs *viewRows, ncols int) {
	nrows, ok := r.count()
	if !ok {
		return
	}
	rs.set = true
	p, i := r.p, r.i
	for range nrows {
		row := viewRow{first: int32(len(rs.cells))}
		for col := range ncols {
			if i >= len(p) {
				r.fail()
				return
			}
			k := uint64(p[i])
			if k < 0x80 {
				i++
			} else {
				var n int
				if k, n = binary.Uvarint(p[i:]); n <= 0 {
					r.fail()
					return
				}
				i += n
			}
			switch k {
			case binaryAbsent:
			case binaryNull:
				rs.cells = append(rs.cells, viewCell{col: int32(col), null: true})
			default:
				n := k - 2
				if n > uint64(len(p)-i) {
					r.fail()
					return
				}
				end := i + int(n)
				rs.cells = append(rs.cells, viewCell{col: int32(col), v: p[i:end:end]})
				i = end
			}
		}
		row.n = int32(len(rs.cells)) - row.first
		rs.rows = append(rs.rows, row)
	}
	r.i = i
}

// Binary cells' first numbers, before a value's length+2.
const (
	binaryAbsent = 0
	binaryNull   = 1
)
