package raftstore

import (
	"encoding/binary"
	"errors"
)

// encoder appends the primitives commands are made of: unsigned and signed
// varints and length-prefixed byte strings.
type encoder struct{ b []byte }

func (e *encoder) byte1(v byte)     { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) count(n int)      { e.uvarint(uint64(n)) }
func (e *encoder) bytesOut() []byte { return e.b }
func newEncoder(size int) *encoder  { return &encoder{b: make([]byte, 0, size)} }
func (e *encoder) header(t cmdType) { e.byte1(cmdVersion); e.byte1(byte(t)) }

var errTruncated = errors.New("truncated")

// decoder reads what encoder wrote. The first error sticks: later reads
// return zero values, and err says what went wrong. It never panics on bad
// input and never allocates more than the input's length.
type decoder struct {
	b   []byte
	err error
}

func (e *encoder) boolean(v bool) {
	if v {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte1() byte {
	if len(d.b) < 1 {
		d.fail(errTruncated)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) raw() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.raw()) }

func (d *decoder) bytes() []byte { return append([]byte(nil), d.raw()...) }

func (d *decoder) boolean() bool {
	switch d.byte1() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(errors.New("bad boolean"))
	return false
}

// count reads a slice length, refusing one that the remaining input could
// not hold (each element takes at least one byte).
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return 0
	}
	return int(n)
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	return d.err
}
