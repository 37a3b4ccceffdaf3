package mysqlbinlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"
)

// HeaderSize is the size of a binlog v4 event header.
const HeaderSize = 19

// checksumSize is the size of the CRC32 that ends every event when
// binlog_checksum=CRC32 (the default since MySQL 5.6.6).
const checksumSize = 4

// Magic opens every binlog file.
var Magic = []byte{0xfe, 'b', 'i', 'n'}

// Event header flags MySQL sets.
const (
	// FlagBinlogInUse marks the FORMAT_DESCRIPTION of a file the server
	// still writes (cleared when the file is closed).
	FlagBinlogInUse uint16 = 0x0001
	// FlagSuppressUse marks a QUERY event whose statement names its
	// tables with their schema (BEGIN, and DML in statement format).
	FlagSuppressUse uint16 = 0x0008
	// FlagArtificial marks events a server makes up for a dump thread
	// (the fake ROTATE that starts a dump).
	FlagArtificial uint16 = 0x0020
	// FlagIgnorable marks events a replica may skip when it does not know
	// them (PREVIOUS_GTIDS, ROWS_QUERY, ...).
	FlagIgnorable uint16 = 0x0080
)

// Version is a server version as MySQL orders them.
type Version struct{ Major, Minor, Patch int }

// ParseVersion reads the leading "x.y.z" of a server version string such
// as "8.4.3" or "8.0.36-log".
func ParseVersion(s string) (Version, error) {
	core := s
	if i := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		core = s[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("mysqlbinlog: server version %q is not major.minor.patch", s)
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, fmt.Errorf("mysqlbinlog: server version %q is not major.minor.patch", s)
		}
		v[i] = n
	}
	return Version{v[0], v[1], v[2]}, nil
}

// AtLeast reports whether v is major.minor.patch or later.
func (v Version) AtLeast(major, minor, patch int) bool {
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

// ID is the version as the number MySQL writes in GTID events
// (immediate_server_version): 80403 for 8.4.3.
func (v Version) ID() uint32 { return uint32(v.Major*10000 + v.Minor*100 + v.Patch) }

// Header is the binlog v4 header of one event.
type Header struct {
	Timestamp uint32 // seconds since the epoch, when the statement began
	Type      replication.EventType
	ServerID  uint32
	LogPos    uint32 // offset of the byte after the event in its file; 0 inside a payload
	Flags     uint16
}

// Frame returns the event: header, body and, when checksum is set, the
// CRC32 over both. The header's event size is computed here.
func Frame(h Header, body []byte, checksum bool) []byte {
	size := HeaderSize + len(body)
	if checksum {
		size += checksumSize
	}
	out := make([]byte, HeaderSize, size)
	binary.LittleEndian.PutUint32(out[0:], h.Timestamp)
	out[4] = byte(h.Type)
	binary.LittleEndian.PutUint32(out[5:], h.ServerID)
	binary.LittleEndian.PutUint32(out[9:], uint32(size))
	binary.LittleEndian.PutUint32(out[13:], h.LogPos)
	binary.LittleEndian.PutUint16(out[17:], h.Flags)
	out = append(out, body...)
	if checksum {
		crc := crc32.ChecksumIEEE(out)
		if h.Type == replication.FORMAT_DESCRIPTION_EVENT && h.Flags&FlagBinlogInUse != 0 {
			// The server clears the in-use flag in place when it closes
			// the file, so the checksum is of the event without it.
			binary.LittleEndian.PutUint16(out[17:], h.Flags&^FlagBinlogInUse)
			crc = crc32.ChecksumIEEE(out)
			binary.LittleEndian.PutUint16(out[17:], h.Flags)
		}
		out = binary.LittleEndian.AppendUint32(out, crc)
	}
	return out
}

// ClearInUse clears FlagBinlogInUse of the FORMAT_DESCRIPTION that starts
// file (after the magic), as a server does when it closes the file; the
// checksum stays valid (it never covered the flag).
func ClearInUse(file []byte) {
	const flagsAt = 4 + 17
	f := binary.LittleEndian.Uint16(file[flagsAt:])
	binary.LittleEndian.PutUint16(file[flagsAt:], f&^FlagBinlogInUse)
}

// FormatDescription is the FORMAT_DESCRIPTION_EVENT that starts every
// binlog file.
type FormatDescription struct {
	ServerVersion string // as SELECT VERSION() prints it, e.g. "8.4.3"
	// CreateTimestamp is set by the server only in the first file it
	// writes after a start (it tells a replica to drop temporary tables);
	// later files write 0.
	CreateTimestamp uint32
	Checksum        bool // binlog_checksum=CRC32
}

// postHeaderLengths returns the post-header length of each event type
// (1..n) that a server of version v declares, as captured from real
// servers: 8.0.17 (39 types), 8.0.22/8.0.26 (40, TRANSACTION_PAYLOAD),
// 8.0.28/8.0.40 (41, HEARTBEAT_V2), 9.0.1/9.6.0 (42, GTID_TAGGED_LOG, and
// the v1 rows events' lengths dropped to 0 with their removal in 8.3).
func postHeaderLengths(v Version) []byte {
	l := []byte{
		0, 13, 0, 8, 0, 0, 0, 0, 4, 0, // 1..10 (START_V3 .. NEW_LOAD)
		4, 0, 0, 0, 0, 0, 4, 26, 8, 0, // 11..20 (RAND .. WRITE_ROWS_V0); 15 FDE filled below
		0, 0, 8, 8, 8, 2, 0, 0, 0, 10, // 21..30 (UPDATE_V0 .. WRITE_ROWS_V2)
		10, 10, 42, 42, 0, 18, 52, 0, 10, 40, // 31..40 (.. TRANSACTION_PAYLOAD)
		0, 0, // 41 HEARTBEAT_V2, 42 GTID_TAGGED_LOG
	}
	n := 39
	switch {
	case v.AtLeast(8, 3, 0):
		n = 42
		l[22], l[23], l[24] = 0, 0, 0
	case v.AtLeast(8, 0, 27):
		n = 41
	case v.AtLeast(8, 0, 20):
		n = 40
	}
	l = l[:n]
	l[14] = byte(2 + 50 + 4 + 1 + n) // FORMAT_DESCRIPTION's own post-header
	return l
}

// Body returns the event body (without header and checksum).
func (f FormatDescription) Body() ([]byte, error) {
	v, err := ParseVersion(f.ServerVersion)
	if err != nil {
		return nil, err
	}
	if len(f.ServerVersion) >= 50 {
		return nil, fmt.Errorf("mysqlbinlog: server version %q is longer than 49 bytes", f.ServerVersion)
	}
	b := binary.LittleEndian.AppendUint16(nil, 4) // binlog version
	var sv [50]byte
	copy(sv[:], f.ServerVersion)
	b = append(b, sv[:]...)
	b = binary.LittleEndian.AppendUint32(b, f.CreateTimestamp)
	b = append(b, HeaderSize)
	b = append(b, postHeaderLengths(v)...)
	if f.Checksum {
		b = append(b, byte(replication.BINLOG_CHECKSUM_ALG_CRC32))
	} else {
		b = append(b, byte(replication.BINLOG_CHECKSUM_ALG_OFF))
	}
	return b, nil
}

// DumpFormatDescription returns the FORMAT_DESCRIPTION event fde (framed,
// from the start of a file) as a dump thread sends it to a replica that
// asked for its file from startPos (Binlog_sender::
// send_format_description_event, as an 8.0.17 replica's relay log shows
// it): created 0 unless the replica reads from the start (it would drop
// its temporary tables), the in-use flag cleared, the checksum computed
// again; log_pos as in the file.
func DumpFormatDescription(fde []byte, startPos uint32) []byte {
	out := append([]byte(nil), fde...)
	if startPos > uint32(len(Magic)) {
		const createdAt = HeaderSize + 2 + 50
		binary.LittleEndian.PutUint32(out[createdAt:], 0)
	}
	flags := binary.LittleEndian.Uint16(out[17:]) &^ FlagBinlogInUse
	binary.LittleEndian.PutUint16(out[17:], flags)
	if out[len(out)-checksumSize-1] == byte(replication.BINLOG_CHECKSUM_ALG_CRC32) {
		crc := crc32.ChecksumIEEE(out[:len(out)-checksumSize])
		binary.LittleEndian.PutUint32(out[len(out)-checksumSize:], crc)
	}
	return out
}

// ArtificialRotate is the ROTATE a dump thread sends first, naming the
// file and position the replica asked for: time 0, log_pos 0, flagged
// artificial, with the source's server id.
func ArtificialRotate(serverID uint32, file string, pos uint64, checksum bool) []byte {
	return Frame(Header{Type: replication.ROTATE_EVENT, ServerID: serverID, Flags: FlagArtificial}, RotateBody(file, pos), checksum)
}
