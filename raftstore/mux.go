package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A node serves two protocols on its one TCP port, told apart by the first
// byte a dialer sends: Raft's own RPCs (hashicorp/raft's NetworkTransport)
// and braid's forwarding of writes and read-index requests to the leader.
const (
	connRaft    byte = 'R'
	connForward byte = 'F'
)

// classifyTimeout bounds the wait for a new connection's first byte.
const classifyTimeout = 5 * time.Second

// mux owns the node's listener and every connection accepted or dialed
// through it, so Close drops them all at once, as a crashed process would.
// It is the raft.StreamLayer of the node's NetworkTransport.
type mux struct {
	ln        net.Listener
	advertise net.Addr
	log       *slog.Logger
	raftCh    chan net.Conn
	forward   func(net.Conn) // serves one forwarding connection until it ends

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup // the accept loop, classifiers and forward servers

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

var _ raft.StreamLayer = (*mux)(nil)

func listenMux(bind, advertise string, log *slog.Logger) (*mux, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raftstore: listen on %s: %w", bind, err)
	}
	m := &mux{ln: ln, log: log, raftCh: make(chan net.Conn), closed: make(chan struct{}), conns: map[*trackedConn]struct{}{}}
	if advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("raftstore: advertise address %s: %w", advertise, err)
		}
		m.advertise = a
	} else {
		a := ln.Addr().(*net.TCPAddr)
		if a.IP == nil || a.IP.IsUnspecified() {
			ln.Close()
			return nil, fmt.Errorf("raftstore: bound to %s, which others cannot dial: set AdvertiseAddr", a)
		}
		m.advertise = a
	}
	return m, nil
}

// start runs the accept loop; forward serves forwarding connections.
func (m *mux) start(forward func(net.Conn)) {
	m.forward = forward
	m.wg.Add(1)
	go m.acceptLoop()
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.log.Error("raft listener failed", "err", err)
			return
		}
		tc := m.track(c)
		if tc == nil {
			return
		}
		m.wg.Add(1)
		go m.classify(tc)
	}
}

func (m *mux) classify(c *trackedConn) {
	defer m.wg.Done()
	c.SetReadDeadline(time.Now().Add(classifyTimeout))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	switch b[0] {
	case connRaft:
		select {
		case m.raftCh <- c:
		case <-m.closed:
			c.Close()
		}
	case connForward:
		m.forward(c)
	default:
		m.log.Warn("unknown protocol on raft port", "remote", c.RemoteAddr().String(), "byte", b[0])
		c.Close()
	}
}

// track registers c so Close closes it; nil (and c closed) if closed already.
func (m *mux) track(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, m: m}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		c.Close()
		return nil
	}
	m.conns[tc] = struct{}{}
	return tc
}

// Accept implements net.Listener for raft: connections that said 'R'.
func (m *mux) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftCh:
		return c, nil
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it closes the listener and every
// connection. raft's NetworkTransport calls it from its Close.
func (m *mux) Close() error {
	m.closeOnce.Do(func() {
		close(m.closed)
		m.ln.Close()
		m.mu.Lock()
		conns := m.conns
		m.conns = nil
		m.mu.Unlock()
		for c := range conns {
			c.Conn.Close()
		}
	})
	return nil
}

// wait returns when every goroutine the mux started has ended.
func (m *mux) wait() { m.wg.Wait() }

// Addr implements net.Listener: the advertised address.
func (m *mux) Addr() net.Addr { return m.advertise }

// Dial implements raft.StreamLayer.
func (m *mux) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return m.dial(string(address), connRaft, timeout)
}

func (m *mux) dial(address string, proto byte, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", address, timeout)
	if err != nil {
		return nil, err
	}
	tc := m.track(c)
	if tc == nil {
		return nil, net.ErrClosed
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{proto}); err != nil {
		tc.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return tc, nil
}

// trackedConn forgets itself in its mux when closed.
type trackedConn struct {
	net.Conn
	m    *mux
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.m.mu.Lock()
		if c.m.conns != nil {
			delete(c.m.conns, c)
		}
		c.m.mu.Unlock()
	})
	return c.Conn.Close()
}
