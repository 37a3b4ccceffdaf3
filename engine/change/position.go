package change

import (
	"fmt"
	"strconv"
	"strings"
)

// Position is a place in one source's binlog: a file name and a byte offset.
// Positions compare by file sequence number first (binlog.000002 comes after
// binlog.000001), then by offset.
type Position struct {
	File string `json:"file"`
	Pos  uint32 `json:"pos"`
}

// String renders "file:pos", the form stream messages carry.
func (p Position) String() string { return fmt.Sprintf("%s:%d", p.File, p.Pos) }

// IsZero reports whether p names no place.
func (p Position) IsZero() bool { return p.File == "" }

// Compare returns -1, 0 or +1 as p is before, at or after q.
func (p Position) Compare(q Position) int {
	if p.File != q.File {
		ps, qs := fileSeq(p.File), fileSeq(q.File)
		if ps != qs {
			if ps < qs {
				return -1
			}
			return 1
		}
		return strings.Compare(p.File, q.File)
	}
	switch {
	case p.Pos < q.Pos:
		return -1
	case p.Pos > q.Pos:
		return 1
	}
	return 0
}

// fileSeq is the numeric suffix of a binlog file name ("mysql-bin.000042" → 42).
func fileSeq(name string) int64 {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Server identifies the server a source's binlog was read from: a
// Position is a place in that server's binlog only (another server of the
// same topology has other files and offsets for the same transactions).
// MySQL servers are told apart by server_uuid; MariaDB, which has none,
// by server_id with the host and port the server reports and its binlog
// base name.
type Server struct {
	// ID is the server's server_id.
	ID uint32 `json:"id"`
	// UUID is MySQL's server_uuid; "" on MariaDB.
	UUID string `json:"uuid,omitempty"`
	// Host is "@@hostname:@@port" as the server reports them.
	Host string `json:"host,omitempty"`
	// Binlog is the server's log_bin_basename.
	Binlog string `json:"binlog,omitempty"`
}

// Same reports whether s and o are the same server (nil is no server).
func (s *Server) Same(o *Server) bool {
	if s == nil || o == nil {
		return false
	}
	return *s == *o
}

// Mark names a boundary of one source beyond its file:pos: the GTID
// state there, and the server whose binlog the file:pos is in. After a
// failover a source's positions are of several servers, which do not
// compare (the promoted server's files may be numbered below the old
// primary's): two places of which one is on another server compare by
// GTID (GTIDState.Covers and Holds). The zero Mark (a state saved
// before braid kept them, or a source without GTIDs) compares by
// position.
type Mark struct {
	GTIDs  GTIDState `json:"gtids,omitzero"`
	Server *Server   `json:"server,omitempty"`
}

// Across reports whether a place read on server s is on another server
// than m's, known on both sides: then positions do not compare.
func (m Mark) Across(s *Server) bool {
	return m.Server != nil && s != nil && !m.Server.Same(s)
}

// String renders the identity for log lines: "server_id 1 (host:3306)".
func (s *Server) String() string {
	if s == nil {
		return "unknown server"
	}
	b := fmt.Sprintf("server_id %d", s.ID)
	if s.UUID != "" {
		b += " uuid " + s.UUID
	}
	if s.Host != "" {
		b += " (" + s.Host + ")"
	}
	return b
}
