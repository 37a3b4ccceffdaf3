package mysqlbinlog

import (
	"encoding/binary"
	"math/bits"
)

// message writes MySQL's serialization format (libs/mysql/serialization,
// 8.3+), used by GTID_TAGGED_LOG_EVENT: a header (format version, message
// size, last non-ignorable field id), then each present field as its id
// and value, all integers in MySQL's variable-length encoding.
type message struct{ fields []byte }

const serializationFormatVersion = 1

func (m *message) id(id uint64) { m.fields = appendVarUint(m.fields, id) }

func (m *message) uint(id, v uint64) {
	m.id(id)
	m.fields = appendVarUint(m.fields, v)
}

func (m *message) int(id uint64, v int64) {
	m.id(id)
	m.fields = appendVarInt(m.fields, v)
}

func (m *message) str(id uint64, s string) {
	m.id(id)
	m.fields = appendVarUint(m.fields, uint64(len(s)))
	m.fields = append(m.fields, s...)
}

// fixed writes a fixed-length integer field byte by byte: bytes below
// 0x80 take one byte (shifted left), others two.
func (m *message) fixed(id uint64, v []byte) {
	m.id(id)
	for _, c := range v {
		switch {
		case c < 0x80:
			m.fields = append(m.fields, c<<1)
		case c < 0xc0:
			m.fields = append(m.fields, (c-0x80)<<2|1, 2)
		default:
			m.fields = append(m.fields, (c-0xc0)<<2|1, 3)
		}
	}
}

// encode returns the message; its size field counts the whole message,
// itself included.
func (m *message) encode() []byte {
	rest := 1 + len(m.fields) // last non-ignorable field id (0), fields
	head := appendVarUint(nil, serializationFormatVersion)
	size := uint64(len(head) + rest)
	for uint64(len(head)+varUintSize(size)+rest) != size {
		size = uint64(len(head) + varUintSize(size) + rest)
	}
	out := appendVarUint(head, size)
	out = appendVarUint(out, 0)
	return append(out, m.fields...)
}

// appendVarUint writes MySQL's variable-length unsigned integer: n bytes
// (1..9) whose lowest byte starts with n-1 one bits then a zero, the value
// in the bits above; 9 bytes are 0xff and the value in 8 bytes.
func appendVarUint(b []byte, v uint64) []byte {
	n := varUintSize(v)
	if n == 9 {
		return binary.LittleEndian.AppendUint64(append(b, 0xff), v)
	}
	x := v<<uint(n) | (uint64(1)<<uint(n-1) - 1)
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], x)
	return append(b, t[:n]...)
}

func varUintSize(v uint64) int {
	n := (bits.Len64(v) + 6) / 7
	if n == 0 {
		n = 1
	}
	if n > 8 {
		return 9
	}
	return n
}

// appendVarInt writes a signed integer: the sign in the lowest value bit.
func appendVarInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendVarUint(b, uint64(v)<<1)
	}
	return appendVarUint(b, uint64(-(v+1))<<1|1)
}
