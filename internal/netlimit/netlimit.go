// Package netlimit caps how many connections a listener serves at once.
// Past the cap a new connection is accepted and closed at once, so the
// peer learns at once instead of waiting in the kernel's backlog, and the
// connections already served go on: 70 idle connections used to exhaust
// a 64-descriptor limit and lock every new client out.
//
// # Invariants
//
//   - At most Max connections returned by Accept are open at once; a
//     connection's slot is freed by its first Close.
//
// # Concurrency
//
// A Listener is safe for concurrent use, as net.Listener is.
package netlimit

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMax is the cap braid's ports take unless told otherwise.
const DefaultMax = 1024

// Listener is a net.Listener serving at most a fixed number of connections
// at once.
type Listener struct {
	net.Listener
	slots   chan struct{}
	log     *slog.Logger
	refused atomic.Int64
	logged  atomic.Int64 // unix seconds of the last refusal logged
}

// Listen wraps l so that it serves at most max connections at once (max
// <= 0: DefaultMax), logging refusals (at most one line a second) to log
// (nil: discarded).
func Listen(l net.Listener, max int, log *slog.Logger) *Listener {
	if max <= 0 {
		max = DefaultMax
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{Listener: l, slots: make(chan struct{}, max), log: log}
}

// Accept returns the next connection there is room for; those past the
// cap are closed as they come.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &conn{Conn: c, free: func() { <-l.slots }}, nil
		default:
			// Counted before the close, so that a refused client that
			// sees its connection end finds the count already raised.
			n := l.refused.Add(1)
			c.Close()
			if now := time.Now().Unix(); l.logged.Swap(now) != now {
				l.log.Warn("connection refused: the port serves its maximum of connections; raise it or find who holds them",
					"addr", l.Addr().String(), "max", cap(l.slots), "refused", n)
			}
		}
	}
}

// Refused counts the connections refused so far.
func (l *Listener) Refused() int64 { return l.refused.Load() }

type conn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *conn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}
