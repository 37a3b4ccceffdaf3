package binlog

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
)

// A MySQL source started from a GTID set: start: {gtid: ...}, tags
// (8.3+) included.
//
// go-mysql's StartSyncGTID sends COM_BINLOG_DUMP_GTID with the encoding
// of the mysql.GTIDSet it is given, and its own bookkeeping asserts that
// set to be a *mysql.MysqlGTIDSet on every untagged GTID event: a type
// that knows no tags. So the syncer is given an empty MysqlGTIDSet, and
// the connection's packet writer puts braid's own encoding of the set
// (change.MySQLGTIDSet.Encode) in its place in that one packet. The
// server then starts where a replica holding the set would, skipping the
// transactions in it. The rewrite sits above TLS (it wraps the
// connection go-mysql writes its packets to, after the handshake).
//
// The server names its first file (the ROTATE it starts with) at its
// start, then skips the set's transactions in it: a position there would
// read them again. So the reader stays at the set until the first
// transaction after it ends (a reconnect before then asks by GTID
// again), and skips every transaction in the set itself
// (Reader.skipGTIDs), as the server does.

// mysqlStartSet reads the start set of a MySQL source of version, and
// refuses a tagged one a server before 8.3 would take for a malformed
// packet.
func (p *Reader) mysqlStartSet(text, version string) (change.MySQLGTIDSet, error) {
	set, err := change.ParseMySQLGTIDSet(text)
	if err != nil {
		return set, fmt.Errorf("binlog: source %s: start gtid: %v", p.spec.Name, err)
	}
	if v := parseServerVersion(version); set.Tagged() && !v.atLeast(8, 3, 0) {
		return set, fmt.Errorf("binlog: source %s: start gtid %q has tagged GTIDs, which MySQL %s does not know (8.3 and later do): start from a set without tags, or a position", p.spec.Name, text, version)
	}
	return set, nil
}

// dumpGTIDPlaceholder is the set go-mysql is given: empty, so that its
// encoding, which dumpGTIDConn replaces, is eight zero bytes.
func dumpGTIDPlaceholder() mysql.GTIDSet {
	return &mysql.MysqlGTIDSet{Sets: map[string]*mysql.UUIDSet{}}
}

// withDumpGTIDSet returns a connection option that runs opt, then makes
// the connection send set (an encoding) as the GTID set of its
// COM_BINLOG_DUMP_GTID.
func withDumpGTIDSet(opt func(*client.Conn) error, set []byte) func(*client.Conn) error {
	return func(c *client.Conn) error {
		if opt != nil {
			if err := opt(c); err != nil {
				return err
			}
		}
		c.Conn.Conn = &dumpGTIDConn{Conn: c.Conn.Conn, set: set}
		return nil
	}
}

// dumpGTIDConn rewrites the first COM_BINLOG_DUMP_GTID packet written
// through it whose GTID set is the placeholder's; everything else passes.
type dumpGTIDConn struct {
	net.Conn
	set  []byte
	done bool
}

// The COM_BINLOG_DUMP_GTID packet go-mysql writes with an empty binlog
// name and the placeholder set: the 4-byte packet header, the command,
// flags (2), server_id (4), name length (4, zero), position (8), set
// length (4, eight) and the set (8 zero bytes).
const (
	dumpGTIDSetAt  = 4 + 1 + 2 + 4 + 4 + 8 // the set's length
	dumpGTIDPacket = dumpGTIDSetAt + 4 + 8
)

func (c *dumpGTIDConn) Write(b []byte) (int, error) {
	if c.done || !isPlaceholderDump(b) {
		return c.Conn.Write(b)
	}
	c.done = true
	payload := dumpGTIDSetAt - 4 + 4 + len(c.set)
	if payload >= 1<<24-1 {
		return 0, fmt.Errorf("binlog: the start GTID set's encoding is %d bytes, more than one packet holds", len(c.set))
	}
	out := make([]byte, 0, 4+payload)
	out = append(out, byte(payload), byte(payload>>8), byte(payload>>16), b[3])
	out = append(out, b[4:dumpGTIDSetAt]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(c.set)))
	out = append(out, c.set...)
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil // what the caller wrote, as far as it knows
}

// isPlaceholderDump tells whether b is the whole COM_BINLOG_DUMP_GTID
// packet go-mysql writes for the placeholder set.
func isPlaceholderDump(b []byte) bool {
	if len(b) != dumpGTIDPacket || b[4] != mysql.COM_BINLOG_DUMP_GTID {
		return false
	}
	if int(b[0])|int(b[1])<<8|int(b[2])<<16 != dumpGTIDPacket-4 {
		return false
	}
	if binary.LittleEndian.Uint32(b[11:]) != 0 || binary.LittleEndian.Uint32(b[dumpGTIDSetAt:]) != 8 {
		return false
	}
	return binary.LittleEndian.Uint64(b[dumpGTIDSetAt+4:]) == 0
}

// gtidStart checks the start set of a source and returns the set to give
// StartSyncGTID. For MySQL, when cfg is not nil, it also makes cfg's
// connection send braid's encoding of the set (see the top of the file).
func (p *Reader) gtidStart(cfg *replication.BinlogSyncerConfig) (mysql.GTIDSet, error) {
	if p.info.flavor != mysql.MySQLFlavor {
		set, err := mysql.ParseGTIDSet(p.info.flavor, p.startGTID)
		if err != nil {
			return nil, fmt.Errorf("binlog: source %s: start gtid %q is not a %s GTID set: %v", p.spec.Name, p.startGTID, p.info.flavor, err)
		}
		return set, nil
	}
	set, err := p.mysqlStartSet(p.startGTID, p.info.version)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		cfg.Option = withDumpGTIDSet(cfg.Option, set.Encode())
	}
	return dumpGTIDPlaceholder(), nil
}
