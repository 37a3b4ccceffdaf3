package binlog

import (
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
)

// serverVersion is a source's flavor and release, parsed once from the
// version it announces, deciding which spelling of a statement it
// understands.
type serverVersion struct {
	mariadb             bool
	major, minor, patch int
}

// parseServerVersion reads a version as @@version or the handshake gives
// it: "8.4.3", "8.0.36-log", "10.11.6-MariaDB-0+deb12u1", or MariaDB's
// handshake form "5.5.5-10.11.6-MariaDB". A version it cannot read is
// 0.0.0: the oldest spellings, which every server before the renames knew.
func parseServerVersion(s string) serverVersion {
	v := serverVersion{mariadb: strings.Contains(strings.ToLower(s), "mariadb")}
	// MariaDB's handshake puts "5.5.5-" in front of its real version so
	// that old clients do not take 10.x for a MySQL 1.0.
	s = strings.TrimPrefix(s, "5.5.5-")
	nums, _, _ := strings.Cut(s, "-")
	parts := strings.SplitN(nums, ".", 3)
	out := [3]int{}
	for i, p := range parts {
		// "36a" or "0ubuntu": the digits in front.
		end := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' })
		if end >= 0 {
			p = p[:end]
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return serverVersion{mariadb: v.mariadb}
		}
		out[i] = n
	}
	v.major, v.minor, v.patch = out[0], out[1], out[2]
	return v
}

// atLeast tells whether v is major.minor.patch or later.
func (v serverVersion) atLeast(major, minor, patch int) bool {
	if v.major != major {
		return v.major > major
	}
	if v.minor != minor {
		return v.minor > minor
	}
	return v.patch >= patch
}

// statusStatement is the statement that shows v's end of binlog. MySQL
// 8.2 renamed SHOW MASTER STATUS to SHOW BINARY LOG STATUS and 8.4
// removed the old name (error 1064); MariaDB 10.5.2 added SHOW BINLOG
// STATUS beside it. All three answer File and Position first.
func (v serverVersion) statusStatement() string {
	switch {
	case v.mariadb && v.atLeast(10, 5, 2):
		return "SHOW BINLOG STATUS"
	case !v.mariadb && v.atLeast(8, 2, 0):
		return "SHOW BINARY LOG STATUS"
	default:
		return "SHOW MASTER STATUS"
	}
}

// noIntWidths tells whether v prints integer types without their display
// width (MySQL 8.0.19 and later: "int", not "int(11)").
func (v serverVersion) noIntWidths() bool { return !v.mariadb && v.atLeast(8, 0, 19) }

// connVersion is the version the server announced when c connected.
func connVersion(c *client.Conn) serverVersion {
	return parseServerVersion(c.GetServerVersion())
}
