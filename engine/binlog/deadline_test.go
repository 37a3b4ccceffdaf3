package binlog

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// countingConn counts the read deadlines set on a real connection.
type countingConn struct {
	net.Conn
	sets int
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.sets++
	return c.Conn.SetReadDeadline(t)
}

// loopback returns the two ends of a real TCP connection.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestCoarseDeadlinesNeverEarly moves the read deadline the way go-mysql
// does, to now + a timeout before every read, many times: the socket's
// deadline moves about once a deadlineSlack, and a read on a silent
// connection still times out (an i/o timeout, as streamError expects),
// never before the last deadline asked for.
func TestCoarseDeadlinesNeverEarly(t *testing.T) {
	client, server := loopback(t)
	inner := &countingConn{Conn: client}
	c := &coarseDeadlines{Conn: inner}
	const timeout = 300 * time.Millisecond
	began := time.Now()
	buf := make([]byte, 1)
	for i := range 2000 {
		if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 { // a read that gets its byte
			if _, err := server.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Read(buf); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
		}
	}
	if limit := 2 + int(time.Since(began)/deadlineSlack); inner.sets > limit {
		t.Errorf("2000 deadlines asked for in %v moved the socket's %d times, want at most %d", time.Since(began), inner.sets, limit)
	}
	asked := time.Now().Add(timeout)
	if err := c.SetReadDeadline(asked); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a silent connection: %v, want a deadline exceeded", err)
	}
	if now := time.Now(); now.Before(asked) {
		t.Errorf("read timed out %v before the deadline asked for", asked.Sub(now))
	}
}

// TestCoarseDeadlinesEarlierAsAsked checks that a deadline earlier than
// the one set (go-mysql's Close cuts a blocked read short with one 100 ms
// away) is set as asked: the read ends, though the deadline before was an
// hour away. Without it this test would block for that hour.
func TestCoarseDeadlinesEarlierAsAsked(t *testing.T) {
	client, _ := loopback(t)
	c := &coarseDeadlines{Conn: client}
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline exceeded", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil { // none: as asked
		t.Fatal(err)
	}
	if !c.set.IsZero() {
		t.Fatalf("no deadline asked for, %v set", c.set)
	}
}
