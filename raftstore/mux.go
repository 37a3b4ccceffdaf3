package raftstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A node serves several protocols on its one TCP port, told apart by the
// first byte a dialer sends: Raft's own RPCs (hashicorp/raft's
// NetworkTransport), braid's forwarding of writes and read-index requests
// to the leader, and those of Config.Protocols (the cluster's canal relay
// and node-to-node HTTP). With Config.TLS the byte is sent inside mutual
// TLS: a dialer without a certificate from the cluster's CA never gets to
// send it.
const (
	connRaft    byte = 'R'
	connForward byte = 'F'
)

// classifyTimeout bounds the wait for a new connection's TLS handshake and
// first byte.
const classifyTimeout = 5 * time.Second

// mux owns the node's listener and every connection accepted or dialed
// through it, so Close drops them all at once, as a crashed process would.
// It is the raft.StreamLayer of the node's NetworkTransport.
type mux struct {
	ln        net.Listener
	advertise net.Addr
	log       *slog.Logger
	tls       *tls.Config // nil: plain TCP
	raftCh    chan net.Conn
	// serve maps a first byte to what serves such a connection until it
	// ends: connForward's, and Config.Protocols.
	serve map[byte]func(net.Conn)

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup // the accept loop, classifiers and forward servers

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

var _ raft.StreamLayer = (*mux)(nil)

func listenMux(bind, advertise string, tlsCfg *tls.Config, log *slog.Logger) (*mux, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raftstore: listen on %s: %w", bind, err)
	}
	m := &mux{ln: ln, log: log, tls: tlsCfg, raftCh: make(chan net.Conn), closed: make(chan struct{}), conns: map[*trackedConn]struct{}{}}
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

// start runs the accept loop; serve says what serves each protocol but
// Raft's.
func (m *mux) start(serve map[byte]func(net.Conn)) {
	m.serve = serve
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

func (m *mux) classify(tc *trackedConn) {
	defer m.wg.Done()
	var c net.Conn = tc
	c.SetDeadline(time.Now().Add(classifyTimeout))
	if m.tls != nil {
		t := tls.Server(tc, m.tls)
		if err := t.Handshake(); err != nil {
			// A dialer without the cluster's certificates: say so once
			// per connection, as Consul does, so an operator sees who.
			m.log.Warn("refused a connection to the raft port: TLS handshake failed (is it a node of this cluster, with a certificate from its CA?)",
				"remote", tc.RemoteAddr().String(), "err", err)
			tc.Close()
			return
		}
		c = t // its Close closes tc
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	if b[0] == connRaft {
		select {
		case m.raftCh <- c:
		case <-m.closed:
			c.Close()
		}
		return
	}
	serve, ok := m.serve[b[0]]
	if !ok {
		m.log.Warn("unknown protocol on raft port", "remote", c.RemoteAddr().String(), "byte", b[0])
		c.Close()
		return
	}
	serve(c)
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
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return m.dial(ctx, string(address), connRaft)
}

// dial connects to another node's port for proto, within ctx's deadline
// (the TLS handshake included).
func (m *mux) dial(ctx context.Context, address string, proto byte) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	tc := m.track(c)
	if tc == nil {
		return nil, net.ErrClosed
	}
	var conn net.Conn = tc
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if m.tls != nil {
		t := tls.Client(tc, m.tls)
		if err := t.HandshakeContext(ctx); err != nil {
			tc.Close()
			return nil, fmt.Errorf("TLS handshake with node %s: %w", address, err)
		}
		conn = t
	}
	if _, err := conn.Write([]byte{proto}); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
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
