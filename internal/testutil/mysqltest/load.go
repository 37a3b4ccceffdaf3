package mysqltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// loadTimeout bounds each connect, read and write of a Load, so a black
// hole (tcpproxy.Pause) costs one write, not the test.
const loadTimeout = 2 * time.Second

// Load is a steady write load on a table, for failover tests: one
// INSERT of the next id every interval, in its own transaction, through
// an address that may change what is behind it (a tcpproxy). A write
// that fails is not retried; the next one goes on a new connection, so
// the load follows a failover by itself.
type Load struct {
	addr, table string
	every       time.Duration
	cancel      context.CancelFunc
	done        chan struct{}

	mu     sync.Mutex
	result LoadResult
}

// LoadResult is what a Load wrote.
type LoadResult struct {
	// Committed are the ids whose INSERT the server acknowledged, in
	// order: they must be wherever the table's history goes.
	Committed []int64
	// Unknown are the ids whose INSERT failed without an answer (the
	// connection broke or timed out): committed or not, the server
	// decided. A test settles them by reading the table.
	Unknown []int64
	// Refused are the ids whose INSERT the server refused with an error
	// (read_only on a replica, say): not committed.
	Refused []int64
	// ConnectFailures counts connects that failed; no id was used.
	ConnectFailures int
}

// StartLoad starts writing "INSERT INTO db.table (id) VALUES (n)" for
// n = 1, 2, ... every interval, as root, to addr, until Stop or the end
// of the test. The table must exist with an integer id column as its
// primary key, and other columns nullable or with defaults.
func StartLoad(t testing.TB, addr, db, table string, every time.Duration) *Load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{addr: addr, table: quoteName(db) + "." + quoteName(table), every: every, cancel: cancel, done: make(chan struct{})}
	go l.run(ctx)
	t.Cleanup(func() { l.Stop() })
	return l
}

// Stop ends the load, waits for the write under way, and returns what
// was written. Stopping again returns the same.
func (l *Load) Stop() LoadResult {
	l.cancel()
	<-l.done
	return l.Result()
}

// moreTimeout bounds StopAfter's wait for the rows it asks for.
const moreTimeout = 90 * time.Second

// StopAfter lets the load write more rows on s (the server its address
// leads to after a failover: the promoted replica), stops it, and
// returns the table's ids on s, in id order (the source's history:
// every acknowledged id and each unknown one that committed), and what
// the load wrote. It fails the test when s does not get them within
// 90s.
func (l *Load) StopAfter(t testing.TB, s *Server, more int) ([]int64, LoadResult) {
	t.Helper()
	q := "SELECT id FROM " + l.table + " ORDER BY id"
	before := len(s.Ints(t, q))
	err := retry.Wait(context.Background(), moreTimeout, func() error {
		if n := len(s.Ints(t, q)); n < before+more {
			return fmt.Errorf("mysqltest: %d rows on %s, want %d: the load goes on there", n, s.Addr(), before+more)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res := l.Stop()
	return s.Ints(t, q), res
}

// NotIn returns the ids acknowledged (Committed) that are not in ids, a
// table's ids in order: none, where the table's history kept every
// acknowledged write.
func (r LoadResult) NotIn(ids []int64) []int64 {
	var out []int64
	for _, id := range r.Committed {
		if _, found := slices.BinarySearch(ids, id); !found {
			out = append(out, id)
		}
	}
	return out
}

// Result is what was written so far.
func (l *Load) Result() LoadResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LoadResult{
		Committed:       slices.Clone(l.result.Committed),
		Unknown:         slices.Clone(l.result.Unknown),
		Refused:         slices.Clone(l.result.Refused),
		ConnectFailures: l.result.ConnectFailures,
	}
}

// run writes until ctx ends.
func (l *Load) run(ctx context.Context) {
	defer close(l.done)
	var c *client.Conn
	defer func() {
		if c != nil {
			_ = c.Close()
		}
	}()
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	next := int64(1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c == nil {
			cctx, cancel := context.WithTimeout(ctx, loadTimeout)
			var err error
			c, err = sqlutf8.Connect(cctx, l.addr, "root", "", "", nil, func(c *client.Conn) error {
				c.ReadTimeout, c.WriteTimeout = loadTimeout, loadTimeout
				return nil
			})
			cancel()
			if err != nil {
				c = nil
				l.mu.Lock()
				l.result.ConnectFailures++
				l.mu.Unlock()
				continue
			}
		}
		id := next
		next++
		r, err := c.Execute(fmt.Sprintf("INSERT INTO %s (id) VALUES (%d)", l.table, id))
		l.mu.Lock()
		switch {
		case err == nil:
			r.Close()
			l.result.Committed = append(l.result.Committed, id)
		case isServerError(err):
			l.result.Refused = append(l.result.Refused, id)
		default:
			l.result.Unknown = append(l.result.Unknown, id)
		}
		l.mu.Unlock()
		if err != nil {
			_ = c.Close()
			c = nil
		}
	}
}

// quoteName quotes an identifier.
func quoteName(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// isServerError reports whether err is the server's answer (an error
// packet), not a broken connection.
func isServerError(err error) bool {
	var e *mysql.MyError
	return errors.As(err, &e)
}
