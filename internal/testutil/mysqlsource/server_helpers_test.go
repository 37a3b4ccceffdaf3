package mysqlsource_test

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// The tests' binlog files are made of events taken from real MySQL 8
// servers, as go-mysql's own tests hold them, and a few built here where
// those tests hold no sample (QUERY, XID, ROTATE: small fixed layouts).
// The encoder package beside this one writes every event type; these
// tests need only enough for the server to stream and braid to read.

// headerLengths80 is the FORMAT_DESCRIPTION post-header length array of
// MySQL 8.0.27 (go-mysql replication/transaction_payload_event_test.go),
// 41 event types: the array an 8.0 server writes.
var headerLengths80 = []byte{0x38, 0xd, 0x0, 0x8, 0x0, 0x12, 0x0, 0x4, 0x4, 0x4, 0x4, 0x12, 0x0, 0x0, 0x5c, 0x0, 0x4, 0x1a, 0x8, 0x0, 0x0, 0x0, 0x8, 0x8, 0x8, 0x2, 0x0, 0x0, 0x0, 0xa, 0xa, 0xa, 0x19, 0x19, 0x0, 0x12, 0x34, 0x0, 0xa, 0x28, 0x0}

// gtidBody80 is a GTID event's body from MySQL 8.0.19 (go-mysql
// replication/event_test.go, "mysql-8.0 only"):
// 5ccc1033-44a8-11ea-bd59-0242ac190003:119 with both commit timestamps,
// 1583813191872618 µs, and transaction length 963.
var gtidBody80 = []byte("\x00\\\xcc\x103D\xa8\x11\xea\xbdY\x02B\xac\x19\x00\x03w\x00\x00\x00\x00\x00\x00\x00\x02x\x00\x00\x00\x00\x00\x00\x00y\x00\x00\x00\x00\x00\x00\x00j0\xb1>x\xa0\x05\xfc\xc3\x03\x938\x01\x00")

// sourceUUID is the uuid of gtidBody80's server.
const sourceUUID = "5ccc1033-44a8-11ea-bd59-0242ac190003"

// binlogFile builds a binlog file with CRC32 checksums.
type binlogFile struct {
	buf      []byte
	serverID uint32
	ts       uint32
}

func newBinlogFile(version string) *binlogFile {
	f := &binlogFile{buf: []byte{0xfe, 'b', 'i', 'n'}, serverID: 1, ts: 1700000000}
	body := binary.LittleEndian.AppendUint16(nil, 4)
	v := make([]byte, 50)
	copy(v, version)
	body = append(body, v...)
	body = binary.LittleEndian.AppendUint32(body, f.ts)
	body = append(body, 19)
	body = append(body, headerLengths80...)
	body = append(body, byte(replication.BINLOG_CHECKSUM_ALG_CRC32))
	f.event(replication.FORMAT_DESCRIPTION_EVENT, body)
	return f
}

// event appends an event with the given body, its log_pos the end.
func (f *binlogFile) event(typ replication.EventType, body []byte) *binlogFile {
	size := 19 + len(body) + 4
	ev := binary.LittleEndian.AppendUint32(nil, f.ts)
	ev = append(ev, byte(typ))
	ev = binary.LittleEndian.AppendUint32(ev, f.serverID)
	ev = binary.LittleEndian.AppendUint32(ev, uint32(size))
	ev = binary.LittleEndian.AppendUint32(ev, uint32(len(f.buf)+size))
	ev = binary.LittleEndian.AppendUint16(ev, 0)
	ev = append(ev, body...)
	ev = binary.LittleEndian.AppendUint32(ev, crc32.ChecksumIEEE(ev))
	f.buf = append(f.buf, ev...)
	return f
}

// previousGTIDs appends PREVIOUS_GTIDS with an encoded set.
func (f *binlogFile) previousGTIDs(encoded []byte) *binlogFile {
	return f.event(replication.PREVIOUS_GTIDS_EVENT, encoded)
}

// classicSet encodes uuid:1-n in the classic (untagged) format; n 0: empty.
func classicSet(uuid [16]byte, n int64) []byte {
	if n == 0 {
		return make([]byte, 8)
	}
	b := binary.LittleEndian.AppendUint64(nil, 1)
	b = append(b, uuid[:]...)
	b = binary.LittleEndian.AppendUint64(b, 1)
	b = binary.LittleEndian.AppendUint64(b, 1)
	return binary.LittleEndian.AppendUint64(b, uint64(n+1))
}

// transaction appends GTID (the 8.0.19 sample, its gno replaced), QUERY
// of sql in db, and XID when xid (a DML transaction's commit).
func (f *binlogFile) transaction(gno int64, db, sql string) *binlogFile {
	g := append([]byte(nil), gtidBody80...)
	binary.LittleEndian.PutUint64(g[17:], uint64(gno))
	f.event(replication.GTID_EVENT, g)
	return f.query(db, sql)
}

// query appends a QUERY event as MySQL 8 writes one: status variables
// flags2, sql_mode, catalog and charsets, then the database and text.
func (f *binlogFile) query(db, sql string) *binlogFile {
	var vars []byte
	vars = append(vars, 0)
	vars = binary.LittleEndian.AppendUint32(vars, 0)
	vars = append(vars, 1)
	vars = binary.LittleEndian.AppendUint64(vars, 0x43c00020) // 8.0's default sql_mode
	vars = append(vars, 6, 3, 's', 't', 'd')
	vars = append(vars, 4, 255, 0, 255, 0, 255, 0)
	body := binary.LittleEndian.AppendUint32(nil, 12) // thread id
	body = binary.LittleEndian.AppendUint32(body, 0)  // exec time
	body = append(body, byte(len(db)))                // db length
	body = binary.LittleEndian.AppendUint16(body, 0)  // error code
	body = binary.LittleEndian.AppendUint16(body, uint16(len(vars)))
	body = append(body, vars...)
	body = append(body, db...)
	body = append(body, 0)
	body = append(body, sql...)
	return f.event(replication.QUERY_EVENT, body)
}

func (f *binlogFile) xid(n uint64) *binlogFile {
	return f.event(replication.XID_EVENT, binary.LittleEndian.AppendUint64(nil, n))
}

func (f *binlogFile) rotate(next string) *binlogFile {
	body := binary.LittleEndian.AppendUint64(nil, 4)
	return f.event(replication.ROTATE_EVENT, append(body, next...))
}

func (f *binlogFile) bytes() []byte { return append([]byte(nil), f.buf...) }

// size is the file's length so far: the next event's position.
func (f *binlogFile) size() uint32 { return uint32(len(f.buf)) }

func mustUUID(t testing.TB, s string) [16]byte {
	t.Helper()
	var u [16]byte
	h := []byte{}
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			h = append(h, s[i])
		}
	}
	for i := range u {
		var b byte
		for _, c := range h[2*i : 2*i+2] {
			b <<= 4
			switch {
			case c >= '0' && c <= '9':
				b |= c - '0'
			default:
				b |= c - 'a' + 10
			}
		}
		u[i] = b
	}
	return u
}
