package tcpproxy

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/braid-cdc/braid/internal/testutil/retry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echoServer answers each line it reads with "name:line", so a client
// knows which backend it reached. It stops when the test ends.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
		wg     sync.WaitGroup
	)
	echo := func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(name + ":" + line)); err != nil {
				return
			}
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				_ = c.Close()
			} else {
				conns = append(conns, c)
			}
			mu.Unlock()
			wg.Go(func() { echo(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// client is one connection through the proxy.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("connect to the proxy: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{t: t, conn: c, r: bufio.NewReader(c)}
}

// send writes a line.
func (c *client) send(line string) {
	c.t.Helper()
	if _, err := c.conn.Write([]byte(line + "\n")); err != nil {
		c.t.Fatalf("send %q: %v", line, err)
	}
}

// read reads a line within d; it returns the error on timeout or EOF.
func (c *client) read(d time.Duration) (string, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	line, err := c.r.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// ask sends a line and returns the answer, failing the test without one.
func (c *client) ask(line string) string {
	c.t.Helper()
	c.send(line)
	got, err := c.read(5 * time.Second)
	if err != nil {
		c.t.Fatalf("answer to %q: %v", line, err)
	}
	return got
}

// Bytes go both ways, to the backend current at connect time, and the
// connection is counted.
func TestForward(t *testing.T) {
	a := echoServer(t, "a")
	p := Start(t, a)
	c := dial(t, p.Addr())
	if got := c.ask("hello"); got != "a:hello" {
		t.Fatalf("got %q, want a:hello", got)
	}
	if got := c.ask("again"); got != "a:again" {
		t.Fatalf("got %q, want a:again", got)
	}
	if st := p.Stats(); st.Accepted != 1 || st.Open != 1 || st.Cut != 0 {
		t.Fatalf("stats %+v, want 1 accepted and open, none cut", st)
	}
	if p.Backend() != a {
		t.Fatalf("Backend() = %s, want %s", p.Backend(), a)
	}
}

// Switch cuts the connections to the old backend, as a virtual IP move
// does, and later ones reach the new backend.
func TestSwitchCuts(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	p := Start(t, a)
	old := dial(t, p.Addr())
	if got := old.ask("x"); got != "a:x" {
		t.Fatalf("got %q, want a:x", got)
	}
	p.Switch(b)
	if line, err := old.read(5 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("old connection after Switch: read %q, %v; want it closed", line, err)
	}
	if got := dial(t, p.Addr()).ask("y"); got != "b:y" {
		t.Fatalf("new connection: got %q, want b:y", got)
	}
	retry.Until(t, 5*time.Second, func() error {
		if st := p.Stats(); st.Accepted != 2 || st.Cut != 1 || st.Open != 1 {
			return errors.New("stats: want 2 accepted, 1 cut, 1 open")
		}
		return nil
	})
}

// SwitchKeep leaves the existing connections on the old backend.
func TestSwitchKeep(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	p := Start(t, a)
	old := dial(t, p.Addr())
	if got := old.ask("x"); got != "a:x" {
		t.Fatalf("got %q, want a:x", got)
	}
	p.SwitchKeep(b)
	if got := old.ask("x2"); got != "a:x2" {
		t.Fatalf("old connection after SwitchKeep: got %q, want a:x2", got)
	}
	if got := dial(t, p.Addr()).ask("y"); got != "b:y" {
		t.Fatalf("new connection: got %q, want b:y", got)
	}
	if st := p.Stats(); st.Cut != 0 || st.Open != 2 {
		t.Fatalf("stats %+v, want none cut, 2 open", st)
	}
}

// A paused proxy is a black hole: connections are accepted, nothing
// comes back, nothing fails; Resume delivers what was held, on the old
// connection and on the one that came during the pause.
func TestPauseResume(t *testing.T) {
	a := echoServer(t, "a")
	p := Start(t, a)
	c := dial(t, p.Addr())
	if got := c.ask("before"); got != "a:before" {
		t.Fatalf("got %q, want a:before", got)
	}
	p.Pause()
	p.Pause() // idempotent
	c.send("held")
	if line, err := c.read(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("paused: read %q, %v; want a timeout", line, err)
	}
	during := dial(t, p.Addr()) // the connect itself succeeds
	during.send("new")
	if line, err := during.read(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("paused, new connection: read %q, %v; want a timeout", line, err)
	}
	p.Resume()
	p.Resume() // idempotent
	if got, err := c.read(5 * time.Second); err != nil || got != "a:held" {
		t.Fatalf("after Resume: %q, %v; want a:held", got, err)
	}
	if got, err := during.read(5 * time.Second); err != nil || got != "a:new" {
		t.Fatalf("after Resume, new connection: %q, %v; want a:new", got, err)
	}
	if st := p.Stats(); st.Accepted != 2 || st.Cut != 0 {
		t.Fatalf("stats %+v, want 2 accepted, none cut", st)
	}
}

// A backend that refuses closes the client's connection at once, and is
// counted; Cut drops connections but keeps the backend.
func TestRefusedAndCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	p := Start(t, dead)
	c := dial(t, p.Addr())
	if line, err := c.read(5 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("to a dead backend: read %q, %v; want the connection closed", line, err)
	}
	retry.Until(t, 5*time.Second, func() error {
		if st := p.Stats(); st.Refused != 1 || st.Open != 0 {
			return errors.New("want 1 refused, none open")
		}
		return nil
	})

	a := echoServer(t, "a")
	p.SwitchKeep(a)
	c = dial(t, p.Addr())
	if got := c.ask("x"); got != "a:x" {
		t.Fatalf("got %q, want a:x", got)
	}
	p.Cut()
	if line, err := c.read(5 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("after Cut: read %q, %v; want the connection closed", line, err)
	}
	if got := dial(t, p.Addr()).ask("y"); got != "a:y" {
		t.Fatalf("after Cut, new connection: got %q, want a:y", got)
	}
}

// Close stops accepting and cuts what is open, paused or not; the leak
// check in TestMain shows its goroutines are gone.
func TestClose(t *testing.T) {
	a := echoServer(t, "a")
	p, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if got := c.ask("x"); got != "a:x" {
		t.Fatalf("got %q, want a:x", got)
	}
	p.Pause()
	held := dial(t, p.Addr())
	held.send("y")
	retry.Until(t, 5*time.Second, func() error {
		if p.Stats().Accepted != 2 {
			return errors.New("second connection not accepted yet")
		}
		return nil
	})
	p.Close()
	p.Close()
	for _, cl := range []*client{c, held} {
		if line, err := cl.read(5 * time.Second); err == nil || isTimeout(err) {
			t.Fatalf("after Close: read %q, %v; want the connection closed", line, err)
		}
	}
	if conn, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = conn.Close()
		t.Fatal("a closed proxy accepts connections")
	}
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
