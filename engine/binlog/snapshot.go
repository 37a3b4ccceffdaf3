package binlog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/spec"
)

// SnapshotConn reads a source's tables for an initial snapshot: plain
// SELECTs of key ranges on a connection of its own, in autocommit or in
// a read-only transaction WITH CONSISTENT SNAPSHOT (Begin). It takes no
// lock beyond what any reader takes (no LOCK TABLES, no FLUSH TABLES
// WITH READ LOCK) and writes nothing.
type SnapshotConn struct {
	p *Reader // for dialing and wording errors
	c *client.Conn
	// rd reads chunk results off the socket itself (see textRows);
	// deprecateEOF: the server ends column definitions without an EOF
	// packet.
	rd           *packetReader
	deprecateEOF bool
	broken       error // a read cut short left the connection unusable
	// rowBytes is the text a row of each table took in its last chunk:
	// the next chunk's buffers are sized from it.
	rowBytes map[*change.Table]int
}

// OpenSnapshot connects to src for a snapshot.
func OpenSnapshot(ctx context.Context, src spec.Source) (*SnapshotConn, error) {
	pw, err := src.ResolvePassword()
	if err != nil {
		return nil, err
	}
	src.Password, src.PasswordFile, src.PasswordEnv = pw, "", ""
	p := &Reader{spec: src, log: slog.New(slog.DiscardHandler), addrs: src.Addresses(), wantReplica: src.ReadFrom.Replica()}
	var c *client.Conn
	if len(p.addrs) > 1 {
		// The server the source's reader starts on (servers.go), whose
		// binlog positions the chunks' watermarks must be.
		c, err = p.pickStart(ctx)
	} else {
		c, err = p.dial(ctx)
	}
	if err != nil {
		return nil, err
	}
	p.info.flavor = mysql.MySQLFlavor // identify asks by it
	if connVersion(c).mariadb {
		p.info.flavor = mysql.MariaDBFlavor
	}
	// braid asks for no compression or TLS: the socket carries plain
	// packets.
	return &SnapshotConn{p: p, c: c, rd: &packetReader{br: bufio.NewReaderSize(c.Conn.Conn, 256<<10)},
		deprecateEOF: strings.Contains(c.CapabilityString(), "CLIENT_DEPRECATE_EOF")}, nil
}

// Close closes the connection.
func (s *SnapshotConn) Close() error { return s.c.Close() }

// Position is the server's end of binlog now: a chunk's low and high
// watermarks.
func (s *SnapshotConn) Position() (change.Position, error) {
	pos, err := masterPosition(s.c)
	if err != nil {
		return pos, s.p.queryError("read its binlog position", err)
	}
	return pos, nil
}

// Fresh is the server's end of binlog now, as Position, with its Mark:
// the GTID state there (MariaDB's gtid_binlog_pos, read just after, so
// at or past it; MySQL's executed set of the same statement) and the
// server's identity, as the source's reader names them. A chunk read
// again is fresh at it, and the source's changes before it may find
// their rows already so; the Mark finds that point when the reader is
// on another server than this connection's (a failover since).
func (s *SnapshotConn) Fresh() (change.Position, change.Mark, error) {
	pos, executed, err := masterStatus(s.c)
	if err != nil {
		return pos, change.Mark{}, s.p.queryError("read its binlog position", err)
	}
	a, err := s.p.identify(s.c)
	if err != nil {
		return pos, change.Mark{}, err
	}
	m := change.Mark{Server: a.server}
	switch {
	case s.p.info.flavor == mysql.MariaDBFlavor:
		m.GTIDs = change.GTIDText(a.have)
	case a.gtidOn && executed != "":
		set, err := change.ParseMySQLGTIDSet(executed)
		if err != nil {
			return pos, change.Mark{}, fmt.Errorf("binlog: source %s: Executed_Gtid_Set: %w", s.p.spec.Name, err)
		}
		m.GTIDs = change.MySQLGTIDs(change.NewMySQLExecuted(set))
	}
	return pos, m, nil
}

// Begin starts a transaction WITH CONSISTENT SNAPSHOT: the Chunks read
// until End see the tables as one point of the binlog left them, every
// transaction before it and none after, which Begin returns with exact
// true where the server tells it (MariaDB's binlog_snapshot_file and
// binlog_snapshot_position, which the server keeps consistent with the
// InnoDB snapshot; Percona Server has them too). Without them (MySQL,
// whose SHOW STATUS has no such rows; or a server with the binary log
// off) Begin returns exact false and a zero position: the snapshot is
// consistent, but where it falls in the binlog is not known. Positions
// from SHOW BINLOG STATUS cannot stand in: a transaction reaches the
// binlog a moment before the engine commit makes it visible.
func (s *SnapshotConn) Begin(ctx context.Context) (change.Position, bool, error) {
	if s.broken != nil {
		return change.Position{}, false, s.broken
	}
	stop := context.AfterFunc(ctx, func() { s.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := s.c.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return change.Position{}, false, s.p.queryError("start a consistent snapshot", err)
	}
	r, err := s.c.Execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return change.Position{}, false, s.p.queryError("read the snapshot's binlog position", err)
	}
	var pos change.Position
	var file, at bool
	for i := range r.RowNumber() {
		name, _ := r.GetString(i, 0)
		v, _ := r.GetString(i, 1)
		switch strings.ToLower(name) {
		case "binlog_snapshot_file":
			pos.File, file = strings.Clone(v), v != ""
		case "binlog_snapshot_position":
			n, err := strconv.ParseUint(v, 10, 32)
			pos.Pos, at = uint32(n), err == nil
		}
	}
	if !file || !at {
		return change.Position{}, false, nil
	}
	return pos, true, nil
}

// End ends the transaction Begin started.
func (s *SnapshotConn) End() error {
	if s.broken != nil {
		return s.broken
	}
	if _, err := s.c.Execute("COMMIT"); err != nil {
		return s.p.queryError("end a consistent snapshot", err)
	}
	return nil
}

// EstimateRows is the server's estimate of t's row count
// (information_schema's TABLE_ROWS), for progress; 0 when unknown.
func (s *SnapshotConn) EstimateRows(t *change.Table) int64 {
	r, err := s.c.Execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Name)
	if err != nil || r.RowNumber() == 0 {
		return 0
	}
	n, _ := r.GetInt(0, 0)
	return n
}

// ErrNoTable: a table the snapshot was to read does not exist (any more).
var ErrNoTable = errors.New("table does not exist")

// Chunk reads the rows of t after the key after and up to and including
// the key through (key columns keys, values as decimal text; empty: from
// the first row, to the last), in key order, at most limit of them (0:
// all), as the server prints them (see change.TextRows). keys empty reads the whole table in no order (after,
// through and limit must then be unset).
func (s *SnapshotConn) Chunk(ctx context.Context, t *change.Table, keys []int, after, through []string, limit int) (*change.TextRows, error) {
	var q strings.Builder
	q.WriteString("SELECT ")
	for i := range t.Columns {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(quoteName(t.Columns[i].Name))
		if t.Columns[i].Type == "float" {
			// MySQL prints a FLOAT with 6 digits; as a DOUBLE, exactly.
			q.WriteString(" + 0e0")
		}
	}
	q.WriteString(" FROM ")
	q.WriteString(quoteName(t.Schema) + "." + quoteName(t.Name))
	switch {
	case len(after) > 0 && len(through) > 0:
		q.WriteString(" WHERE (")
		keyBound(&q, t, keys, after, ">")
		q.WriteString(") AND NOT (")
		keyBound(&q, t, keys, through, ">")
		q.WriteString(")")
	case len(after) > 0:
		q.WriteString(" WHERE ")
		keyBound(&q, t, keys, after, ">")
	case len(through) > 0:
		q.WriteString(" WHERE NOT (")
		keyBound(&q, t, keys, through, ">")
		q.WriteString(")")
	}
	if len(keys) > 0 {
		q.WriteString(" ORDER BY ")
		for i, k := range keys {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(quoteName(t.Columns[k].Name))
		}
	}
	if limit > 0 {
		fmt.Fprintf(&q, " LIMIT %d", limit)
	}
	if s.broken != nil {
		return nil, s.broken
	}
	stop := context.AfterFunc(ctx, func() { s.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	rows := change.NewTextRows(t)
	if limit > 0 {
		// Room for the whole chunk at once: growing the buffers row by
		// row cost more than reading the rows.
		rows.Grow(limit, limit*s.rowBytes[t]+limit/8*s.rowBytes[t])
	}
	if err := s.textRows(q.String(), rows); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var me *mysql.MyError
		if errors.As(err, &me) && (me.Code == mysql.ER_NO_SUCH_TABLE || me.Code == mysql.ER_BAD_FIELD_ERROR) {
			return nil, fmt.Errorf("%w: source %s: %s.%s: %s", ErrNoTable, s.p.spec.Name, t.Schema, t.Name, me.Message)
		}
		return nil, fmt.Errorf("binlog: source %s (%s): snapshot of %s.%s: %w", s.p.spec.Name, s.p.spec.Address, t.Schema, t.Name, err)
	}
	if n := rows.Len(); n > 0 {
		if s.rowBytes == nil {
			s.rowBytes = map[*change.Table]int{}
		}
		s.rowBytes[t] = rows.TextBytes() / n
	}
	return rows, nil
}

// keyBound writes "(k1, k2) op (v1, v2)" for op > spelt out as
// (k1 > v1) OR (k1 = v1 AND k2 > v2), which range optimizers read.
func keyBound(q *strings.Builder, t *change.Table, keys []int, vals []string, op string) {
	for i := range keys {
		if i > 0 {
			q.WriteString(" OR ")
		}
		q.WriteString("(")
		for j := 0; j < i; j++ {
			fmt.Fprintf(q, "%s = %s AND ", quoteName(t.Columns[keys[j]].Name), vals[j])
		}
		fmt.Fprintf(q, "%s %s %s)", quoteName(t.Columns[keys[i]].Name), op, vals[i])
	}
}

// quoteName quotes an identifier with backticks.
func quoteName(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
