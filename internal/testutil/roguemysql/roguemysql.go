// Package roguemysql is a MySQL server for tests that plays the attacker a
// spec's address may lead to: after the client's handshake response it
// asks for the password in a form it can read (in clear text, or
// encrypted with a key it sends itself), and records every byte each
// client sends, so that a test can show that no password arrives.
//
// It speaks the handshake by hand (protocol 10, no TLS offered) and
// nothing after it: every connection ends with an access-denied error.
package roguemysql

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Ask is how the server asks for the password.
type Ask int

const (
	// ClearText switches the client to mysql_clear_password.
	ClearText Ask = iota
	// SHA256 switches the client to sha256_password, whose password goes
	// encrypted with the server's RSA key, which the server sends.
	SHA256
	// FullAuth offers caching_sha2_password and then asks for full
	// authentication, which without TLS sends the password encrypted
	// with a key the server sends.
	FullAuth
	// Dialog switches the client to dialog (PAM), clear text too.
	Dialog
)

// Conn is what one client sent.
type Conn struct {
	// Response is the payload of the client's handshake response.
	Response []byte
	// After is the payload of every packet the client sent after the
	// server asked for the password.
	After [][]byte
	// Raw is every byte the client sent.
	Raw []byte
}

// Server listens on a loopback port until the test ends.
type Server struct {
	ln  net.Listener
	ask Ask

	mu    sync.Mutex
	conns []*Conn
	wg    sync.WaitGroup
}

// Start starts a server that asks as ask.
func Start(tb testing.TB, ask Ask) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{ln: ln, ask: ask}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Conns returns what each client that connected sent, once its
// connection ended.
func (s *Server) Conns() []Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Conn, len(s.conns))
	for i, c := range s.conns {
		out[i] = *c
	}
	return out
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c := s.serve(nc)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// recorder keeps every byte read through it.
type recorder struct {
	r   io.Reader
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

func (s *Server) serve(nc net.Conn) *Conn {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	rec := &recorder{r: nc}
	c := &Conn{}
	defer func() { c.Raw = bytes.Clone(rec.buf.Bytes()) }()
	salt := []byte("abcdefghijklmnopqrst") // 20 bytes
	plugin := "mysql_native_password"
	if s.ask == FullAuth {
		plugin = "caching_sha2_password"
	}
	if writePacket(nc, 0, handshake(salt, plugin)) != nil {
		return c
	}
	resp, seq, err := readPacket(rec)
	if err != nil {
		return c
	}
	c.Response = resp
	var ask []byte
	switch s.ask {
	case ClearText:
		ask = append(append([]byte{0xfe}, "mysql_clear_password\x00"...), salt...)
	case SHA256:
		ask = append(append([]byte{0xfe}, "sha256_password\x00"...), append(salt, 0)...)
	case FullAuth:
		ask = []byte{0x01, 0x04}
	case Dialog:
		ask = append([]byte{0xfe}, "dialog\x00\x04Password: "...)
	}
	if writePacket(nc, seq+1, ask) != nil {
		return c
	}
	// Whatever comes now is the client's answer: keep it until the
	// client hangs up (or the deadline).
	for {
		p, seq, err := readPacket(rec)
		if err != nil {
			return c
		}
		c.After = append(c.After, p)
		writePacket(nc, seq+1, accessDenied())
	}
}

// handshake is a protocol-10 initial handshake offering plugin, without
// CLIENT_SSL.
func handshake(salt []byte, plugin string) []byte {
	const caps = 0x00000001 | 0x00000004 | 0x00000008 | 0x00000200 | 0x00002000 | 0x00008000 | 0x00080000
	b := []byte{10}
	b = append(b, "5.7.44-rogue\x00"...)
	b = binary.LittleEndian.AppendUint32(b, 7)
	b = append(b, salt[:8]...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, caps&0xffff)
	b = append(b, 33) // utf8_general_ci
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, caps>>16)
	b = append(b, byte(len(salt)+1))
	b = append(b, make([]byte, 10)...)
	b = append(b, salt[8:]...)
	b = append(b, 0)
	b = append(b, plugin...)
	return append(b, 0)
}

func accessDenied() []byte {
	b := []byte{0xff}
	b = binary.LittleEndian.AppendUint16(b, 1045)
	b = append(b, "#28000"...)
	return append(b, "Access denied"...)
}

func writePacket(w io.Writer, seq byte, payload []byte) error {
	h := []byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}
	_, err := w.Write(append(h, payload...))
	return err
}

func readPacket(r io.Reader) ([]byte, byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, 0, err
	}
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return p, h[3], err
}
