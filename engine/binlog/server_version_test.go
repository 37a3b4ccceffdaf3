package binlog

import "testing"

// TestStatusStatement: the end-of-binlog statement follows the version a
// server announces: MySQL 8.4 no longer knows SHOW MASTER STATUS (error
// 1064), MariaDB's handshake hides its version behind "5.5.5-".
func TestStatusStatement(t *testing.T) {
	for _, c := range []struct{ version, want string }{
		{"5.7.44-log", "SHOW MASTER STATUS"},
		{"8.0.36", "SHOW MASTER STATUS"},
		{"8.1.0", "SHOW MASTER STATUS"},
		{"8.2.0", "SHOW BINARY LOG STATUS"},
		{"8.4.3", "SHOW BINARY LOG STATUS"},
		{"9.1.0-commercial", "SHOW BINARY LOG STATUS"},
		{"10.4.34-MariaDB", "SHOW MASTER STATUS"},
		{"10.5.1-MariaDB", "SHOW MASTER STATUS"},
		{"10.5.2-MariaDB", "SHOW BINLOG STATUS"},
		{"5.5.5-10.11.19-MariaDB-0+deb12u1", "SHOW BINLOG STATUS"},
		{"11.4.2-MariaDB-log", "SHOW BINLOG STATUS"},
		{"garbage", "SHOW MASTER STATUS"},
	} {
		if got := parseServerVersion(c.version).statusStatement(); got != c.want {
			t.Errorf("%s: %s, want %s", c.version, got, c.want)
		}
	}
}
