package mysqlsource

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
)

// The binlog dump follows MySQL 8's Binlog_sender (rpl_binlog_sender.cc):
// for each file it sends a made-up ROTATE naming the file and the start
// position, the file's FORMAT_DESCRIPTION as a dump thread sends it (in-use
// flag cleared, created 0 when the dump starts past it: mysqlbinlog's
// DumpFormatDescription, checked against a real replica's relay log), then
// the file's events from the start; at the end of the last file it waits for
// more, sending a HEARTBEAT after each heartbeat period with nothing to
// send. A GTID dump starts at the newest file whose PREVIOUS_GTIDS the
// replica holds and skips the transactions the replica has. Errors are
// MySQL's error 1236 with its wording, after which the server closes the
// connection, as MySQL ends the dump thread's connection.

// Dump command flags.
const (
	dumpNonBlock    = 0x01
	dumpHeartbeatV2 = 0x02 // USE_HEARTBEAT_EVENT_V2, in COM_BINLOG_DUMP_GTID's flags
)

// dumpRequest is a COM_BINLOG_DUMP or COM_BINLOG_DUMP_GTID.
type dumpRequest struct {
	flags    uint16
	serverID uint32
	file     string
	pos      uint64
	gtids    gtidSet // nil: a dump from file:pos
}

func parseDump(data []byte) (dumpRequest, error) {
	if len(data) < 10 {
		return dumpRequest{}, mysql.ErrMalformPacket
	}
	return dumpRequest{
		pos:      uint64(binary.LittleEndian.Uint32(data)),
		flags:    binary.LittleEndian.Uint16(data[4:]),
		serverID: binary.LittleEndian.Uint32(data[6:]),
		file:     string(data[10:]),
	}, nil
}

// parseDumpGTID reads COM_BINLOG_DUMP_GTID: flags, server_id, the file
// name's length and name, the position, then the GTID set's length and
// encoding (classic or tagged).
func parseDumpGTID(data []byte) (dumpRequest, error) {
	var r dumpRequest
	if len(data) < 10 {
		return r, mysql.ErrMalformPacket
	}
	r.flags = binary.LittleEndian.Uint16(data)
	r.serverID = binary.LittleEndian.Uint32(data[2:])
	n := int(binary.LittleEndian.Uint32(data[6:]))
	data = data[10:]
	if len(data) < n+8+4 {
		return r, mysql.ErrMalformPacket
	}
	r.file = string(data[:n])
	r.pos = binary.LittleEndian.Uint64(data[n:])
	data = data[n+8:]
	size := int(binary.LittleEndian.Uint32(data))
	data = data[4:]
	if len(data) < size {
		return r, mysql.ErrMalformPacket
	}
	set, err := decodeGTIDSet(data[:size])
	if err != nil {
		return r, mysql.NewError(mysql.ER_MALFORMED_PACKET, "Malformed communication packet.")
	}
	r.gtids = set
	return r, nil
}

// fatal1236 is the error a dump ends with.
func fatal1236(format string, args ...any) *mysql.MyError {
	return mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG, fmt.Sprintf(format, args...))
}

// errStop ends a dump whose client is gone or killed: nothing more is
// written.
var errStop = errors.New("mysqlsource: dump stopped")

// dump serves one binlog dump until the client goes, the connection is
// killed, the server closes, or an error (sent to the client). It always
// returns an error, the connection being over.
func (c *session) dump(req dumpRequest) error {
	s := c.s
	s.mu.Lock()
	if c.replica == nil {
		// MySQL serves a client that did not register too.
		c.replica = &Replica{ServerID: req.serverID}
	}
	logBin := s.globals["log_bin"]
	gtidMode := s.globals["gtid_mode"]
	s.mu.Unlock()
	c.replicaAlg = c.checksumAware()
	c.heartbeat = c.heartbeatPeriod()
	c.heartbeatV2 = req.flags&dumpHeartbeatV2 != 0
	c.out = bufio.NewWriterSize(c.conn.Conn.Conn, 256<<10) // the socket, or TLS over it

	err := func() error {
		if !s.hasPrivilege(c.conn.GetUser(), "REPLICATION SLAVE") {
			return denied("REPLICATION SLAVE")
		}
		if logBin != "ON" {
			return fatal1236("Binary log is not open")
		}
		idx, pos, err := c.dumpStart(req, gtidMode)
		if err != nil {
			return err
		}
		return c.send(req, idx, pos)
	}()
	if me := (*mysql.MyError)(nil); errors.As(err, &me) {
		if c.flush() == nil {
			c.writeErr(me)
		}
	}
	c.kill()
	return errStop
}

// checksumAware reads what the replica said of checksums before the
// dump: @source_binlog_checksum or @master_binlog_checksum; "" when it
// said nothing (a replica that cannot handle checksummed events).
func (c *session) checksumAware() string {
	for _, name := range []string{"source_binlog_checksum", "master_binlog_checksum"} {
		if v, ok := c.user[name]; ok && v != nil {
			return strings.ToUpper(text(v))
		}
	}
	return ""
}

// heartbeatPeriod is @source_heartbeat_period or @master_heartbeat_period,
// in nanoseconds; 0 sends none.
func (c *session) heartbeatPeriod() time.Duration {
	for _, name := range []string{"source_heartbeat_period", "master_heartbeat_period"} {
		if v, ok := c.user[name]; ok && v != nil {
			n, err := strconv.ParseFloat(text(v), 64)
			if err == nil && n > 0 {
				return time.Duration(n)
			}
		}
	}
	return 0
}

// dumpStart finds where the dump starts: the file's index and position.
func (c *session) dumpStart(req dumpRequest, gtidMode string) (int, uint64, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.p
	if len(s.files) == 0 {
		return 0, 0, fatal1236("Binary log is not open")
	}
	if req.gtids == nil {
		idx := 0
		if req.file != "" {
			idx = -1
			for i, f := range s.files {
				if f.name == req.file {
					idx = i
				}
			}
			if idx < 0 {
				return 0, 0, fatal1236("Could not find first log file name in binary log index file")
			}
		}
		f := s.files[idx]
		if req.pos < 4 {
			return 0, 0, fatal1236("Client requested %s to start replication from position < 4.", p.source())
		}
		if req.pos > uint64(len(f.data)) {
			return 0, 0, fatal1236("Client requested %s to start replication from position > file size", p.source())
		}
		return idx, req.pos, nil
	}

	if gtidMode != "ON" {
		return 0, 0, fatal1236("The replication sender thread cannot start in AUTO_POSITION mode: this server has GTID_MODE = %s instead of ON.", gtidMode)
	}
	if req.gtids.tagged() && !p.hasTaggedGTIDs() {
		return 0, 0, mysql.NewError(mysql.ER_MALFORMED_PACKET, "Malformed communication packet.")
	}
	own, _ := parseSID(s.cfg.ServerUUID)
	executed := s.gtidExecutedLocked()
	for id := range req.gtids {
		if id.sid != own {
			continue
		}
		if !(gtidSet{id: req.gtids[id]}).subsetOf(executed) {
			return 0, 0, fatal1236("%s has more GTIDs than the %s has, using the %s's SERVER_UUID. This may indicate that the end of the binary log was truncated "+
				"or that the last binary log file was lost, e.g., after a power or disk failure when sync_binlog != 1. The %s may or may not have rolled back "+
				"transactions that were already replicated to the %s. Suggest to replicate any transactions that %s has rolled back from %s to %s, and/or commit "+
				"empty transactions on %s to account for transactions that have been committed on %s but are not included in GTID_EXECUTED.",
				capital(p.replica()), p.source(), p.source(), p.source(), p.replica(), p.source(), p.replica(), p.source(), p.source(), p.source())
		}
	}
	if missing := s.gtidPurgedLocked().minus(req.gtids); !missing.empty() {
		return 0, 0, fatal1236("Cannot replicate because the %s purged required binary logs. Replicate the missing transactions from elsewhere, or provision a new %s from backup. "+
			"Consider increasing the %s's binary log expiration period. The GTID set sent by the %s is '%s', and the missing transactions are '%s'",
			p.source(), p.replica(), p.source(), p.replica(), req.gtids.format(",\n"), missing.format(",\n"))
	}
	idx := 0
	for i := len(s.files) - 1; i >= 0; i-- {
		if s.files[i].previous.subsetOf(req.gtids) {
			idx = i
			break
		}
	}
	return idx, 4, nil
}

func capital(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// send streams from file idx at pos; see the top of the file.
func (c *session) send(req dumpRequest, idx int, pos uint64) error {
	s := c.s
	alg := c.replicaAlg // what the made-up ROTATE's checksum follows, until a FORMAT_DESCRIPTION
	lastSent := time.Now()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	s.mu.Lock()
	f := s.files[idx]
	s.mu.Unlock()
	for {
		name := f.name

		if err := c.writeEvent(mysqlbinlog.ArtificialRotate(c.s.cfg.ServerID, name, pos, alg == "CRC32")); err != nil {
			return err
		}

		s.mu.Lock()
		data, checksum := f.data, f.checksum
		s.mu.Unlock()
		fde := eventAt(data, len(binlogMagic))
		if fde == nil || replication.EventType(fde[offType]) != replication.FORMAT_DESCRIPTION_EVENT {
			return fatal1236("binlog %s has no FORMAT_DESCRIPTION event", name)
		}
		if checksum && c.replicaAlg == "" {
			return fatal1236("%s can not handle replication events with the checksum that %s is configured to log; the first event '%s' at %d, "+
				"the last event read from './%s' at 4, the last byte read from './%s' at 4.", capital(s.p.replica()), s.p.source(), name, pos, name, name)
		}
		fde = mysqlbinlog.DumpFormatDescription(fde, uint32(min(pos, 1<<32-1)))
		if err := c.writeEvent(fde); err != nil {
			return err
		}
		if checksum {
			alg = "CRC32"
		} else {
			alg = "NONE"
		}
		at := len(binlogMagic) + len(fde)
		if pos <= 4 {
			pos = uint64(at)
		}
		// The start must be an event's: walk to it.
		for uint64(at) < pos {
			ev := eventAt(data, at)
			if ev == nil {
				break
			}
			at += len(ev)
		}
		if uint64(at) != pos {
			return fatal1236("Client requested %s to start replication from impossible position; the first event '%s' at %d, "+
				"the last event read from './%s' at 4, the last byte read from './%s' at 4.", s.p.source(), name, pos, name, name)
		}

		skipping := false
		for {
			s.mu.Lock()
			data = f.data
			next := s.nextFileLocked(f)
			changed := s.changed
			s.mu.Unlock()
			sent := false
			for ev := eventAt(data, at); ev != nil; ev = eventAt(data, at) {
				at += len(ev)
				typ := replication.EventType(ev[offType])
				switch {
				case typ == replication.GTID_EVENT || typ == replication.GTID_TAGGED_LOG_EVENT:
					skipping = false
					if req.gtids != nil {
						body := ev[headerLen:]
						if checksum {
							body = body[:len(body)-checksumLen]
						}
						id, gno, err := eventGTID(typ, body)
						if err != nil {
							return fatal1236("binlog %s at %d: %v", name, at-len(ev), err)
						}
						skipping = req.gtids.contains(id, gno)
					}
				case typ == replication.ANONYMOUS_GTID_EVENT:
					skipping = false
				case typ == replication.ROTATE_EVENT:
					skipping = false
				}
				if skipping {
					// As Binlog_sender: a long skipped stretch still sends
					// a heartbeat each period, the replica's position moving.
					if c.heartbeat > 0 && time.Since(lastSent) >= c.heartbeat {
						if err := c.writeEvent(c.heartbeatEvent(name, uint64(at), checksum)); err != nil {
							return err
						}
						lastSent = time.Now()
					}
					continue
				}
				if err := c.writeEvent(ev); err != nil {
					return err
				}
				sent = true
			}
			if sent {
				lastSent = time.Now()
			}
			if next != nil {
				f = next // the file is whole: on to the next
				break
			}
			if err := c.flush(); err != nil {
				return err
			}
			if req.flags&dumpNonBlock != 0 {
				c.writeEOF()
				return errStop
			}
			var tick <-chan time.Time
			if c.heartbeat > 0 {
				wait := c.heartbeat - time.Since(lastSent)
				if wait <= 0 {
					if err := c.writeEvent(c.heartbeatEvent(name, uint64(at), checksum)); err != nil {
						return err
					}
					if err := c.flush(); err != nil {
						return err
					}
					lastSent = time.Now()
					wait = c.heartbeat
				}
				timer.Reset(wait)
				tick = timer.C
			}
			select {
			case <-changed:
			case <-tick:
			case <-c.dead:
				return errStop
			case <-s.done:
				return errStop
			}
			timer.Stop()
		}
		pos = 4
	}
}

// nextFileLocked is the file after f, nil when f is the last (or was
// purged, which a real server's open file survives too).
func (s *Server) nextFileLocked(f *binlogFile) *binlogFile {
	for i, x := range s.files {
		if x == f && i+1 < len(s.files) {
			return s.files[i+1]
		}
	}
	return nil
}

// heartbeatEvent is a HEARTBEAT (v1: the file name; v2: name and
// position fields) at pos of file.
func (c *session) heartbeatEvent(file string, pos uint64, checksum bool) []byte {
	if !c.heartbeatV2 {
		return artificialEvent(replication.HEARTBEAT_EVENT, c.s.cfg.ServerID, uint32(min(pos, 1<<32-1)), 0, []byte(file), checksum)
	}
	body := mysqlbinlog.HeartbeatV2Body(file, pos)
	return artificialEvent(replication.HEARTBEAT_LOG_EVENT_V2, c.s.cfg.ServerID, 0, 0, body, checksum)
}

// writeEvent sends one event: a packet of an OK byte, then the event,
// into the dump's buffer (MySQL too sends through a network buffer: one
// write per event would make the server, not the replica, what a
// benchmark measures). Packets of 16 MiB or more are split as the
// protocol splits them; the sequence numbers are the connection's.
func (c *session) writeEvent(ev []byte) error {
	const maxPayload = 1<<24 - 1
	payload := len(ev) + 1
	first := true
	for {
		n := min(payload, maxPayload)
		hdr := [4]byte{byte(n), byte(n >> 8), byte(n >> 16), c.conn.Sequence}
		c.conn.Sequence++
		if _, err := c.out.Write(hdr[:]); err != nil {
			return errStop
		}
		chunk := n
		if first {
			if err := c.out.WriteByte(mysql.OK_HEADER); err != nil {
				return errStop
			}
			chunk--
			first = false
		}
		if _, err := c.out.Write(ev[:chunk]); err != nil {
			return errStop
		}
		ev = ev[chunk:]
		payload -= n
		if n < maxPayload {
			return nil
		}
	}
}

// flush sends what the dump's buffer holds.
func (c *session) flush() error {
	if err := c.out.Flush(); err != nil {
		return errStop
	}
	return nil
}

// writeErr sends an error packet.
func (c *session) writeErr(e *mysql.MyError) {
	pkt := make([]byte, 4, 16+len(e.Message))
	pkt = append(pkt, mysql.ERR_HEADER, byte(e.Code), byte(e.Code>>8), '#')
	pkt = append(pkt, e.State...)
	pkt = append(pkt, e.Message...)
	_ = c.conn.WritePacket(pkt)
}

// writeEOF sends the EOF packet that ends a non-blocking dump.
func (c *session) writeEOF() {
	_ = c.conn.WritePacket([]byte{0, 0, 0, 0, mysql.EOF_HEADER, 0, 0, 0, 0})
}
