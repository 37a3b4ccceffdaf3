package mysqlbinlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
)

// UUID is a server_uuid as the 16 bytes MySQL writes.
type UUID [16]byte

// ParseUUID reads "8-4-4-4-12" hex.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	hexDigits := make([]byte, 0, 32)
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			continue
		}
		hexDigits = append(hexDigits, s[i])
	}
	if len(hexDigits) != 32 {
		return u, fmt.Errorf("mysqlbinlog: %q is not a UUID", s)
	}
	for i := range 16 {
		hi, ok1 := unhex(hexDigits[2*i])
		lo, ok2 := unhex(hexDigits[2*i+1])
		if !ok1 || !ok2 {
			return u, fmt.Errorf("mysqlbinlog: %q is not a UUID", s)
		}
		u[i] = hi<<4 | lo
	}
	return u, nil
}

// MustUUID is ParseUUID for constants in tests.
func MustUUID(s string) UUID {
	u, err := ParseUUID(s)
	if err != nil {
		panic(err)
	}
	return u
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// String prints the UUID as MySQL does.
func (u UUID) String() string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, digits[b>>4], digits[b&15])
	}
	return string(out)
}

// GTID flags (the first byte of a GTID event).
const (
	// GTIDMayHaveSBR is set on transactions that hold a QUERY event other
	// than BEGIN (DDL): the server cannot promise they are row-based only.
	GTIDMayHaveSBR byte = 0x01
)

// GTID is a GTID_EVENT, GTID_TAGGED_LOG_EVENT or ANONYMOUS_GTID_EVENT:
// what a MySQL 8 server writes before each transaction.
type GTID struct {
	Flags byte
	SID   UUID   // zero for ANONYMOUS_GTID
	Tag   string // non-empty: a GTID_TAGGED_LOG_EVENT (MySQL 8.3+)
	GNO   int64  // zero for ANONYMOUS_GTID
	// LastCommitted and SequenceNumber are the logical clock of the
	// binlog file (parallel replication): SequenceNumber counts the
	// transactions of the file from 1.
	LastCommitted, SequenceNumber int64
	// ImmediateCommitTimestamp is the commit time on the server writing
	// the binlog, OriginalCommitTimestamp on the source where the
	// transaction was first committed; both in µs since the epoch. On the
	// source both are the same; a replica of a 5.7 source writes an
	// original of 0.
	ImmediateCommitTimestamp, OriginalCommitTimestamp uint64
	// TransactionLength is the size in bytes of the whole transaction,
	// this event included; Transaction computes it.
	TransactionLength uint64
	// ImmediateServerVersion and OriginalServerVersion as Version.ID;
	// the same on the source.
	ImmediateServerVersion, OriginalServerVersion uint32
}

const (
	logicalTimestampTypeCode = 2
	commitTimestampLength    = 7
	highBit7Bytes            = uint64(1) << 55
)

// Anonymous reports whether the event is an ANONYMOUS_GTID_EVENT
// (gtid_mode=OFF).
func (g GTID) Anonymous() bool { return g.SID == UUID{} && g.GNO == 0 }

// Body returns the event body: the fixed layout of GTID_EVENT, or the
// serialization format of GTID_TAGGED_LOG_EVENT when Tag is set.
func (g GTID) Body() []byte {
	if g.Tag != "" {
		return g.taggedBody()
	}
	b := make([]byte, 0, 64)
	b = append(b, g.Flags)
	b = append(b, g.SID[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(g.GNO))
	b = append(b, logicalTimestampTypeCode)
	b = binary.LittleEndian.AppendUint64(b, uint64(g.LastCommitted))
	b = binary.LittleEndian.AppendUint64(b, uint64(g.SequenceNumber))
	original := g.OriginalCommitTimestamp
	if original != g.ImmediateCommitTimestamp {
		b = appendUint56(b, g.ImmediateCommitTimestamp|highBit7Bytes)
		b = appendUint56(b, original)
	} else {
		b = appendUint56(b, g.ImmediateCommitTimestamp)
	}
	b = appendPackedInt(b, g.TransactionLength)
	originalVersion := g.OriginalServerVersion
	if originalVersion != g.ImmediateServerVersion {
		b = binary.LittleEndian.AppendUint32(b, g.ImmediateServerVersion|1<<31)
		b = binary.LittleEndian.AppendUint32(b, originalVersion)
	} else {
		b = binary.LittleEndian.AppendUint32(b, g.ImmediateServerVersion)
	}
	return b
}

func (g GTID) taggedBody() []byte {
	var m message
	m.fixed(0, []byte{g.Flags})
	m.fixed(1, g.SID[:])
	m.int(2, g.GNO)
	m.str(3, g.Tag)
	m.int(4, g.LastCommitted)
	m.int(5, g.SequenceNumber)
	m.uint(6, g.ImmediateCommitTimestamp)
	if o := g.OriginalCommitTimestamp; o != g.ImmediateCommitTimestamp {
		m.uint(7, o)
	}
	m.uint(8, g.TransactionLength)
	m.uint(9, uint64(g.ImmediateServerVersion))
	if o := g.OriginalServerVersion; o != g.ImmediateServerVersion {
		m.uint(10, uint64(o))
	}
	return m.encode()
}

// GTIDInterval is the GNOs [Start, End] (both included).
type GTIDInterval struct{ Start, End int64 }

// GTIDSetEntry is the GNOs of one server UUID and tag.
type GTIDSetEntry struct {
	SID       UUID
	Tag       string
	Intervals []GTIDInterval
}

// PreviousGTIDs is the PREVIOUS_GTIDS_EVENT that follows the
// FORMAT_DESCRIPTION of every file: the GTIDs of all earlier files.
type PreviousGTIDs struct{ Set []GTIDSetEntry }

// Body returns the event body. A set holding a tag is written in the
// tagged format of MySQL 8.3+, any other in the classic one; entries are
// ordered by UUID, then tag (the untagged one first), as the server does.
func (p PreviousGTIDs) Body() []byte {
	set := append([]GTIDSetEntry(nil), p.Set...)
	sort.SliceStable(set, func(i, j int) bool {
		if c := bytes.Compare(set[i].SID[:], set[j].SID[:]); c != 0 {
			return c < 0
		}
		return set[i].Tag < set[j].Tag
	})
	tagged := false
	for _, e := range set {
		tagged = tagged || e.Tag != ""
	}
	var b []byte
	if tagged {
		// format byte, 6 bytes of count, format byte again
		var head [8]byte
		binary.LittleEndian.PutUint64(head[:], uint64(len(set))<<8)
		head[0], head[7] = 1, 1
		b = append(b, head[:]...)
	} else {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(set)))
	}
	for _, e := range set {
		b = append(b, e.SID[:]...)
		if tagged {
			b = appendVarUint(b, uint64(len(e.Tag)))
			b = append(b, e.Tag...)
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(len(e.Intervals)))
		for _, iv := range e.Intervals {
			b = binary.LittleEndian.AppendUint64(b, uint64(iv.Start))
			b = binary.LittleEndian.AppendUint64(b, uint64(iv.End+1)) // stored end-exclusive
		}
	}
	return b
}

// XIDBody is the XID_EVENT that commits a transaction of InnoDB tables.
func XIDBody(xid uint64) []byte { return binary.LittleEndian.AppendUint64(nil, xid) }

// RotateBody is a ROTATE_EVENT naming the next file and the position to
// read it from (4, after the magic).
func RotateBody(next string, pos uint64) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, pos), next...)
}

// HeartbeatV2Body is a HEARTBEAT_LOG_EVENT_V2 (MySQL 8.0.27+): the
// current file and position as serialization fields.
func HeartbeatV2Body(file string, pos uint64) []byte {
	// Field 1 is the file name, 2 the position; each as type, length,
	// value, then an end mark (0).
	b := []byte{1}
	b = appendPackedInt(b, uint64(len(file)))
	b = append(b, file...)
	b = append(b, 2)
	p := appendPackedInt(nil, pos)
	b = appendPackedInt(b, uint64(len(p)))
	b = append(b, p...)
	return append(b, 0)
}

func appendUint56(b []byte, v uint64) []byte {
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], v)
	return append(b, t[:7]...)
}

// appendPackedInt writes MySQL's length-encoded integer (net_store_length).
func appendPackedInt(b []byte, v uint64) []byte {
	switch {
	case v < 251:
		return append(b, byte(v))
	case v < 1<<16:
		return binary.LittleEndian.AppendUint16(append(b, 0xfc), uint16(v))
	case v < 1<<24:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	default:
		return binary.LittleEndian.AppendUint64(append(b, 0xfe), v)
	}
}

func packedIntSize(v uint64) int { return len(appendPackedInt(nil, v)) }
