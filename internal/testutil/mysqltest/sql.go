package mysqltest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/internal/sqlutf8"
)

// purgeTimeout bounds how long PurgeLogsTo waits for files to go.
const purgeTimeout = 10 * time.Second

// Conn returns a new connection as root, closed when the test ends (closing
// it earlier is fine).
func (s *Server) Conn(t testing.TB) *client.Conn {
	t.Helper()
	c := s.connect(t)
	t.Cleanup(func() { quit(c) })
	return c
}

// connect opens a root connection that the caller closes.
func (s *Server) connect(t testing.TB) *client.Conn {
	t.Helper()
	c, err := sqlutf8.Connect(context.Background(), s.Addr(), "root", "", "", nil)
	if err != nil {
		t.Fatalf("mysqltest: connect to %s as root: %v", s.Addr(), err)
	}
	return c
}

// quit ends a session politely, so the server does not log it as aborted.
func quit(c *client.Conn) {
	if c.Quit() != nil {
		_ = c.Close()
	}
}

// Exec runs the statements in order, in one session as root, and fails the
// test at the first error. Session state carries over from one statement to
// the next: Exec(t, "SET timestamp = 1700000000", "INSERT ...") gives the
// INSERT that binlog timestamp.
func (s *Server) Exec(t testing.TB, sqls ...string) {
	t.Helper()
	if err := s.srv.Exec(sqls...); err != nil {
		t.Fatal(err)
	}
}

// Query runs one statement as root and returns its rows, each value as text:
// numbers in decimal, strings and binary values as their bytes, NULL as the
// string "NULL". A statement without a result set returns nil.
func (s *Server) Query(t testing.TB, sql string) [][]string {
	t.Helper()
	c := s.connect(t)
	defer quit(c)
	r, err := c.Execute(sql)
	if err != nil {
		t.Fatalf("mysqltest: %s: %s: %v", s.Addr(), abbrev(sql), err)
	}
	defer r.Close()
	if !r.HasResultset() {
		return nil
	}
	rows := make([][]string, len(r.Values))
	for i, vals := range r.Values {
		row := make([]string, len(vals))
		for j := range vals {
			row[j] = text(&vals[j])
		}
		rows[i] = row
	}
	return rows
}

// Ints runs a query whose first column is an integer and returns that
// column, row by row (the ids of a table, ORDER BY id).
func (s *Server) Ints(t testing.TB, sql string) []int64 {
	t.Helper()
	var out []int64
	for _, r := range s.Query(t, sql) {
		n, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil {
			t.Fatalf("mysqltest: %s: %s: not an integer: %v", s.Addr(), abbrev(sql), err)
		}
		out = append(out, n)
	}
	return out
}

// text formats a value for Query.
func text(v *mysql.FieldValue) string {
	switch v.Type {
	case mysql.FieldValueTypeNull:
		return "NULL"
	case mysql.FieldValueTypeUnsigned:
		return strconv.FormatUint(v.AsUint64(), 10)
	case mysql.FieldValueTypeSigned:
		return strconv.FormatInt(v.AsInt64(), 10)
	case mysql.FieldValueTypeFloat:
		return strconv.FormatFloat(v.AsFloat64(), 'f', -1, 64)
	default:
		return string(v.AsString())
	}
}

// CreateUser creates user@'%' with the password and the privileges a change
// data capture reader needs on *.*: REPLICATION SLAVE, REPLICATION CLIENT
// (BINLOG MONITOR in MariaDB), SELECT, RELOAD and SUPER. Like any statement,
// it is written to the binary log.
func (s *Server) CreateUser(t testing.TB, user, password string) {
	t.Helper()
	account := quote(user) + "@'%'"
	s.Exec(t,
		"CREATE USER "+account+" IDENTIFIED BY "+quote(password),
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD, SUPER ON *.* TO "+account,
	)
}

// MasterStatus returns the server's current binary log file and position
// (SHOW MASTER STATUS). It fails the test if the binary log is off.
func (s *Server) MasterStatus(t testing.TB) (file string, pos uint32) {
	t.Helper()
	stmt := "SHOW MASTER STATUS"
	if s.Flavor == "mysql" {
		if v := s.Query(t, "SELECT @@version"); len(v) == 1 && versionAtLeast(v[0][0], 8, 2) {
			stmt = "SHOW BINARY LOG STATUS" // SHOW MASTER STATUS is gone in 8.4
		}
	}
	rows := s.Query(t, stmt)
	if len(rows) == 0 || len(rows[0]) < 2 {
		t.Fatalf("mysqltest: %s: %s returned no row: is the binary log off?", s.Addr(), stmt)
	}
	p, err := strconv.ParseUint(rows[0][1], 10, 32)
	if err != nil {
		t.Fatalf("mysqltest: %s: %s: position %q: %v", s.Addr(), stmt, rows[0][1], err)
	}
	return rows[0][0], uint32(p)
}

// FlushLogs closes the current binary log file and opens the next one
// (FLUSH BINARY LOGS). MariaDB writes a Binlog_checkpoint event to the new
// file shortly afterwards, so its end may move without any transaction.
func (s *Server) FlushLogs(t testing.TB) {
	t.Helper()
	s.Exec(t, "FLUSH BINARY LOGS")
}

// PurgeLogsTo deletes the binary log files before file
// (PURGE BINARY LOGS TO 'file') and waits until they are gone. MariaDB keeps
// a file until its transactions are checkpointed, which happens shortly after
// FLUSH BINARY LOGS, so the purge is repeated for up to purgeTimeout.
func (s *Server) PurgeLogsTo(t testing.TB, file string) {
	t.Helper()
	deadline := time.Now().Add(purgeTimeout)
	for {
		s.Exec(t, "PURGE BINARY LOGS TO "+quote(file))
		logs := s.Query(t, "SHOW BINARY LOGS")
		if len(logs) > 0 && logs[0][0] >= file {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mysqltest: %s: PURGE BINARY LOGS TO %s: after %v the server still has %q",
				s.Addr(), file, purgeTimeout, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// abbrev shortens a statement for an error message.
func abbrev(sql string) string {
	const limit = 200
	if len(sql) <= limit {
		return sql
	}
	return sql[:limit] + "... (" + strconv.Itoa(len(sql)) + " bytes)"
}

// quote returns s as an SQL string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

// versionAtLeast reports whether a version string such as "8.4.3-log" is at
// least major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
