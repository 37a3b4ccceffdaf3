// Package mysqlauth keeps braid's MySQL clients from giving a server the
// password in a form the server can read, on a connection without TLS.
//
// A spec names the address braid logs in to, and whoever writes specs is
// not trusted with the password's plain text. A MySQL server picks the
// authentication method: after the handshake it may switch the client to
// mysql_clear_password (or dialog, PAM's), which sends the password as it
// is, or ask for sha256_password or caching_sha2_password's full
// authentication, which without TLS send it encrypted with an RSA key the
// server itself supplies. go-mysql v1.14 follows every one of these
// requests, and go-sql-driver v1.10 the last two; a rogue "source" so
// received the password in clear. Neither library lets a caller refuse a
// method, so Conn watches the server's side of the authentication on the
// plain connection instead and, when the server asks for one of them,
// fails the connection before the client can answer: the request never
// reaches the client, and a write after it fails too.
//
// What stays allowed is what proves the password without revealing it:
// mysql_native_password and caching_sha2_password's scrambles (and its
// fast path), MariaDB's client_ed25519 signature.
//
// # Invariants
//
//   - Over a Conn, no client answers a server request for
//     mysql_clear_password, dialog, sha256_password, the old password
//     method, any plugin not in the allowed list, or a
//     caching_sha2_password full authentication: the Read that would
//     deliver the request fails with an error wrapping ErrClearText, the
//     connection is closed, and every later Read and Write fails.
//   - Once the server has answered the authentication (OK or error), Conn
//     watches nothing and passes bytes through.
//
// Use a Conn only on a connection without TLS: it reads the protocol in
// clear. With TLS the server has proved its name, and sending the
// password through it is the point of TLS.
//
// # Concurrency
//
// A Conn is read by one goroutine at a time, as any net.Conn; Refused and
// Write may be called from others. A Watch is safe for concurrent use.
package mysqlauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
)

// ErrClearText: the server asked for the password in a form it can read.
var ErrClearText = errors.New("the server asked for the password in clear text over a connection without TLS, and braid never sends it so")

// allowed are the authentication plugins whose answer does not reveal the
// password.
var allowed = []string{"mysql_native_password", "caching_sha2_password", "client_ed25519"}

// clearPlugins are plugins that send the password as it is, refused even
// in the initial handshake.
var clearPlugins = []string{"mysql_clear_password", "dialog"}

// headMax is how much of a packet Conn keeps to judge it: the first byte
// and a plugin name.
const headMax = 256

// Conn is a net.Conn to a MySQL server that refuses, during
// authentication, the server requests that would have the client send the
// password in a form the server can read (see the package's invariants).
type Conn struct {
	net.Conn

	// The reading goroutine's parser state.
	done    bool    // authentication is over: pass through
	packets int     // server packets seen
	hdr     [4]byte // the current packet's header
	hdrLen  int
	need    int    // payload bytes left of the current packet
	head    []byte // its first headMax bytes
	plugin  string // the authentication plugin in use

	mu      sync.Mutex
	refused error
}

// Guard wraps c, a connection without TLS whose first byte from the server
// is the MySQL handshake.
func Guard(c net.Conn) *Conn { return &Conn{Conn: c} }

// Refused returns the refusal that failed the connection, nil if none.
func (c *Conn) Refused() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// Read reads from the server, failing the connection when the server asks
// for the password in a form it can read.
func (c *Conn) Read(p []byte) (int, error) {
	if c.done { // the reader's own state: no lock on the hot path
		return c.Conn.Read(p)
	}
	if err := c.Refused(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if rerr := c.scan(p[:n]); rerr != nil {
		c.mu.Lock()
		c.refused = rerr
		c.mu.Unlock()
		c.Conn.Close()
		clear(p[:n])
		return 0, rerr
	}
	return n, err
}

// Write writes to the server unless the connection was refused.
func (c *Conn) Write(p []byte) (int, error) {
	if err := c.Refused(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// SyscallConn passes the wrapped connection's through, for drivers that
// check a pooled connection's liveness on the socket (go-sql-driver).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// scan parses the server's bytes b into packets and judges each.
func (c *Conn) scan(b []byte) error {
	for len(b) > 0 && !c.done {
		if c.hdrLen < 4 {
			k := copy(c.hdr[c.hdrLen:], b)
			c.hdrLen += k
			b = b[k:]
			if c.hdrLen < 4 {
				return nil
			}
			c.need = int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
			c.head = c.head[:0]
		} else {
			k := min(c.need, len(b))
			if room := headMax - len(c.head); room > 0 {
				c.head = append(c.head, b[:min(k, room)]...)
			}
			b = b[k:]
			c.need -= k
		}
		if c.need == 0 {
			c.hdrLen = 0
			if err := c.packet(c.head); err != nil {
				return err
			}
		}
	}
	return nil
}

// packet judges one whole server packet (its first headMax bytes).
func (c *Conn) packet(h []byte) error {
	c.packets++
	if c.packets == 1 { // the initial handshake
		if len(h) == 0 || h[0] == 0xff {
			c.done = true
			return nil
		}
		c.plugin = handshakePlugin(h)
		if slices.Contains(clearPlugins, c.plugin) {
			return refusal(c.plugin)
		}
		return nil
	}
	if len(h) == 0 {
		return nil
	}
	switch h[0] {
	case 0x00, 0xff: // OK, error: the authentication is over
		c.done = true
	case 0xfe: // auth switch request
		name := "mysql_old_password" // the old request names none
		if len(h) > 1 {
			b, _, _ := bytes.Cut(h[1:], []byte{0})
			name = string(b)
		}
		if !slices.Contains(allowed, name) {
			return refusal(name)
		}
		c.plugin = name
	case 0x01: // more data: only caching_sha2_password's fast-auth success
		if len(h) == 2 && h[1] == 0x03 {
			return nil
		}
		if c.plugin == "caching_sha2_password" && len(h) == 2 && h[1] == 0x04 {
			return fmt.Errorf("%w (caching_sha2_password full authentication: encrypted with a key the server itself supplies, which it can read as clear text)", ErrClearText)
		}
		return fmt.Errorf("%w (%s: encrypted with a key the server itself supplies, which it can read as clear text)", ErrClearText, c.plugin)
	}
	return nil
}

func refusal(plugin string) error {
	return fmt.Errorf("%w (%s)", ErrClearText, plugin)
}

// handshakePlugin is the plugin name of a protocol-10 initial handshake,
// "" if it has none.
func handshakePlugin(h []byte) string {
	if h[0] != 10 {
		return ""
	}
	i := bytes.IndexByte(h[1:], 0) // server version
	if i < 0 {
		return ""
	}
	p := 1 + i + 1 + 4 + 8 + 1 + 2 // conn id, salt 1, filler, caps low
	if len(h) < p+1+2+2+1+10 {
		return ""
	}
	authLen := int(h[p+5])
	p += 1 + 2 + 2 + 1 + 10 // charset, status, caps high, auth length, reserved
	p += max(13, authLen-8)
	if p >= len(h) {
		return ""
	}
	name, _, _ := bytes.Cut(h[p:], []byte{0})
	return string(name)
}

// Dialer is a dial function, as go-mysql's client.Dialer and
// go-sql-driver's Config.DialFunc.
type Dialer = func(ctx context.Context, network, addr string) (net.Conn, error)

// Watch guards every connection of a dialer and keeps the last refusal,
// for the caller to name when its driver reports a failed connection in
// its own words.
type Watch struct {
	mu  sync.Mutex
	err error
}

// Dial returns d (nil: a plain net.Dialer) with each connection guarded.
func (w *Watch) Dial(d Dialer) Dialer {
	if d == nil {
		d = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &watched{Conn: Guard(nc), w: w}, nil
	}
}

// Err returns the last refusal of a connection Dial made, nil if none.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// watched reports its refusal to its Watch.
type watched struct {
	*Conn
	w *Watch
}

func (c *watched) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, ErrClearText) {
		c.w.mu.Lock()
		c.w.err = err
		c.w.mu.Unlock()
	}
	return n, err
}
