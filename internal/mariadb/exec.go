package mariadb

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/internal/sqlutf8"
)

// Exec runs the statements in order, in one session as root, and stops at
// the first error. Session state carries over from one statement to the
// next: Exec("SET timestamp = 1700000000", "INSERT ...") gives the INSERT
// that binlog timestamp. An error names the server and the statement
// (shortened to 200 bytes).
func (s *Server) Exec(sqls ...string) error {
	c, err := sqlutf8.Connect(context.Background(), s.Addr(), "root", "", "", nil)
	if err != nil {
		return fmt.Errorf("mariadb: connect to %s as root: %w", s.Addr(), err)
	}
	defer quit(c)
	for _, q := range sqls {
		r, err := c.Execute(q)
		if err != nil {
			return fmt.Errorf("mariadb: %s: %s: %w", s.Addr(), abbrev(q), err)
		}
		r.Close()
	}
	return nil
}

// quit ends a session politely, so the server does not log it as aborted.
func quit(c *client.Conn) {
	if c.Quit() != nil {
		_ = c.Close()
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

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// errorLines returns the last n lines of b up to its last error line, or
// its last n lines if it has none: mariadb-install-db follows the cause with
// a page of advice.
func errorLines(b []byte, n int) string {
	if i := bytes.LastIndex(b, []byte("ERROR")); i >= 0 {
		if end := bytes.IndexByte(b[i:], '\n'); end >= 0 {
			b = b[:i+end]
		}
	}
	return tail(b, n)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
