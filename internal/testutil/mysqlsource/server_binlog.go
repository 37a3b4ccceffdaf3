package mysqlsource

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/go-mysql-org/go-mysql/replication"
)

// The binlog files the server serves are bytes a test gives: whole files
// as a MySQL server writes them (the magic, a FORMAT_DESCRIPTION event,
// PREVIOUS_GTIDS, transactions, a ROTATE at the end of all but the last),
// appended to while clients stream. The server reads what it must from
// them: each event's length, the checksum algorithm, the GTIDs of the
// transactions and of PREVIOUS_GTIDS, so that it can find where a GTID
// dump starts and what gtid_executed and gtid_purged are.

// binlogMagic begins every binlog file.
var binlogMagic = []byte{0xfe, 'b', 'i', 'n'}

// Event header layout (v4).
const (
	headerLen    = 19
	offType      = 4
	offServerID  = 5
	offEventSize = 9
	offLogPos    = 13
	offFlags     = 17
	checksumLen  = 4
)

// binlogFile is one file. data is only ever appended to, so a slice of it
// taken under the server's lock stays valid without it.
type binlogFile struct {
	name     string
	data     []byte
	scanned  int     // data[:scanned] are whole events already read
	checksum bool    // its FORMAT_DESCRIPTION says CRC32
	hasFDE   bool    // a FORMAT_DESCRIPTION was read
	previous gtidSet // its PREVIOUS_GTIDS: every GTID before the file
	gtids    gtidSet // the GTIDs of its transactions
}

// eventAt returns the whole event at off in data, or nil when data does
// not hold all of it (yet).
func eventAt(data []byte, off int) []byte {
	if off+headerLen > len(data) {
		return nil
	}
	size := int(binary.LittleEndian.Uint32(data[off+offEventSize:]))
	if size < headerLen || off+size > len(data) {
		return nil
	}
	return data[off : off+size]
}

// errEventSize: an event header whose length cannot be right.
var errEventSize = errors.New("an event shorter than its header")

// scan reads the events appended since the last scan.
func (f *binlogFile) scan() error {
	if f.scanned == 0 {
		if !bytes.HasPrefix(f.data, binlogMagic) {
			return fmt.Errorf("mysqlsource: binlog %s does not begin with the magic \\xfebin", f.name)
		}
		f.scanned = len(binlogMagic)
	}
	for {
		if f.scanned+headerLen <= len(f.data) &&
			binary.LittleEndian.Uint32(f.data[f.scanned+offEventSize:]) < headerLen {
			return fmt.Errorf("mysqlsource: binlog %s at %d: %w", f.name, f.scanned, errEventSize)
		}
		ev := eventAt(f.data, f.scanned)
		if ev == nil {
			return nil
		}
		if err := f.note(ev); err != nil {
			return fmt.Errorf("mysqlsource: binlog %s at %d: %w", f.name, f.scanned, err)
		}
		f.scanned += len(ev)
	}
}

// note learns what the server needs from one event.
func (f *binlogFile) note(ev []byte) error {
	typ := replication.EventType(ev[offType])
	if typ == replication.FORMAT_DESCRIPTION_EVENT {
		fde := &replication.FormatDescriptionEvent{}
		if err := fde.Decode(ev[headerLen:]); err != nil {
			return fmt.Errorf("FORMAT_DESCRIPTION: %w", err)
		}
		f.hasFDE = true
		f.checksum = fde.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32
		return nil
	}
	if !f.hasFDE {
		return fmt.Errorf("%s before the FORMAT_DESCRIPTION event", typ)
	}
	body := f.body(ev)
	switch typ {
	case replication.PREVIOUS_GTIDS_EVENT:
		set, err := decodeGTIDSet(body)
		if err != nil {
			return fmt.Errorf("PREVIOUS_GTIDS: %w", err)
		}
		f.previous = set
	case replication.GTID_EVENT, replication.GTID_TAGGED_LOG_EVENT:
		id, gno, err := eventGTID(typ, body)
		if err != nil {
			return err
		}
		if f.gtids == nil {
			f.gtids = gtidSet{}
		}
		f.gtids.add(id, gno)
	}
	return nil
}

// body is an event's data after its header, without its checksum.
func (f *binlogFile) body(ev []byte) []byte {
	b := ev[headerLen:]
	if f.checksum && len(b) >= checksumLen {
		b = b[:len(b)-checksumLen]
	}
	return b
}

// eventGTID reads the GTID of a GTID or GTID_TAGGED event's body.
func eventGTID(typ replication.EventType, body []byte) (tsid, int64, error) {
	if typ == replication.GTID_TAGGED_LOG_EVENT {
		e := &replication.GtidTaggedLogEvent{}
		if err := e.Decode(body); err != nil {
			return tsid{}, 0, fmt.Errorf("GTID_TAGGED: %w", err)
		}
		var id tsid
		copy(id.sid[:], e.SID)
		id.tag = e.Tag
		return id, e.GNO, nil
	}
	if len(body) < 25 {
		return tsid{}, 0, errors.New("GTID event too short")
	}
	var id tsid
	copy(id.sid[:], body[1:17])
	return id, int64(binary.LittleEndian.Uint64(body[17:25])), nil
}

// artificialEvent builds an event the server makes up while it sends
// (a ROTATE naming the file it starts from, a HEARTBEAT): timestamp 0,
// the given log_pos and flags, a checksum when checksum is set.
func artificialEvent(typ replication.EventType, serverID, logPos uint32, flags uint16, body []byte, checksum bool) []byte {
	size := headerLen + len(body)
	if checksum {
		size += checksumLen
	}
	ev := make([]byte, headerLen, size)
	ev[offType] = byte(typ)
	binary.LittleEndian.PutUint32(ev[offServerID:], serverID)
	binary.LittleEndian.PutUint32(ev[offEventSize:], uint32(size))
	binary.LittleEndian.PutUint32(ev[offLogPos:], logPos)
	binary.LittleEndian.PutUint16(ev[offFlags:], flags)
	ev = append(ev, body...)
	if checksum {
		ev = binary.LittleEndian.AppendUint32(ev, crc32.ChecksumIEEE(ev))
	}
	return ev
}

// AddFile adds a binlog file after the server's others, as a rotation
// does: data is the file so far, from the magic \xfebin and a
// FORMAT_DESCRIPTION event on; Append adds to it while it is the last.
// The server keeps its own copy.
func (s *Server) AddFile(name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		if f.name == name {
			return fmt.Errorf("mysqlsource: binlog %s already exists", name)
		}
	}
	f := &binlogFile{name: name, data: bytes.Clone(data)}
	if err := f.scan(); err != nil {
		return err
	}
	s.files = append(s.files, f)
	s.executed.union(f.previous)
	s.executed.union(f.gtids)
	s.changedLocked()
	return nil
}

// Append adds events to the end of the last binlog file, as a commit
// does: clients waiting at its end are sent them. events may end inside
// an event; the server sends it once the rest is appended.
func (s *Server) Append(events []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.files) == 0 {
		return errors.New("mysqlsource: Append before AddFile: there is no binlog file yet")
	}
	f := s.files[len(s.files)-1]
	f.data = append(f.data, events...)
	before := f.gtids.clone()
	if err := f.scan(); err != nil {
		return err
	}
	s.executed.union(f.gtids.minus(before))
	s.changedLocked()
	return nil
}

// PurgeTo removes the binlog files before name, as PURGE BINARY LOGS TO
// does; their transactions join gtid_purged.
func (s *Server) PurgeTo(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.files {
		if f.name == name {
			s.files = append([]*binlogFile(nil), s.files[i:]...)
			s.changedLocked()
			return nil
		}
	}
	return fmt.Errorf("mysqlsource: PurgeTo: no binlog file %s", name)
}

// Files lists the binlog files' names, oldest first.
func (s *Server) Files() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, len(s.files))
	for i, f := range s.files {
		names[i] = f.name
	}
	return names
}

// End is the end of the binlog: the last file and its size, what SHOW
// BINARY LOG STATUS prints.
func (s *Server) End() (file string, pos uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endLocked()
}

func (s *Server) endLocked() (string, uint32) {
	if len(s.files) == 0 {
		return "", 0
	}
	f := s.files[len(s.files)-1]
	return f.name, uint32(len(f.data))
}

// gtidPurgedLocked is what the server no longer holds: the GTIDs before
// its oldest file, unless a test set gtid_purged.
func (s *Server) gtidPurgedLocked() gtidSet {
	if v, ok := s.globals["gtid_purged"]; ok && v != "" {
		if set, err := parseGTIDSet(v); err == nil {
			return set
		}
	}
	if len(s.files) == 0 {
		return gtidSet{}
	}
	return s.files[0].previous.clone()
}

// gtidExecutedLocked is every GTID the binlog ever held (purged ones too),
// plus what a test added with SetVariable("gtid_executed", ...).
func (s *Server) gtidExecutedLocked() gtidSet {
	out := s.executed.clone()
	if v := s.globals["gtid_executed"]; v != "" {
		if set, err := parseGTIDSet(v); err == nil {
			out.union(set)
		}
	}
	return out
}

// changedLocked wakes every client waiting for more binlog.
func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}
