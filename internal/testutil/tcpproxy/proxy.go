package tcpproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// dialTimeout bounds the proxy's connect to a backend; a backend that
// does not answer in time is treated as one that refused.
const dialTimeout = 5 * time.Second

// Stats counts the proxy's connections.
type Stats struct {
	// Accepted is how many client connections the proxy accepted.
	Accepted int
	// Open is how many are open now (held while paused included).
	Open int
	// Cut is how many the proxy closed itself: by Switch, Cut or Close.
	Cut int
	// Refused is how many it closed because the backend did not answer.
	Refused int
}

// Proxy forwards TCP connections from Addr to a backend the test
// switches at runtime.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	backend string
	conns   map[*pair]struct{}
	paused  chan struct{} // nil: forwarding; else closed by Resume
	stats   Stats
	closed  bool

	wg sync.WaitGroup // the accept loop and every pair's goroutines
}

// pair is one client connection and its connection to the backend.
type pair struct {
	client net.Conn
	cut    bool // closed by the proxy; guarded by Proxy.mu
	done   chan struct{}

	mu      sync.Mutex
	backend net.Conn // nil until dialled
	closed  bool
}

// setBackend gives c its backend connection; it reports false if c was
// closed meanwhile (the caller closes conn).
func (c *pair) setBackend(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.backend = conn
	return true
}

// close closes both sides; closing twice does nothing.
func (c *pair) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	backend := c.backend
	c.mu.Unlock()
	close(c.done)
	_ = c.client.Close()
	if backend != nil {
		_ = backend.Close()
	}
}

// New starts a proxy listening on 127.0.0.1 on a free port, forwarding
// to backend (host:port). The caller closes it.
func New(backend string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, backend: backend, conns: map[*pair]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Start is New for a test: it fails the test if the proxy cannot
// listen, and closes the proxy when the test ends.
func Start(t testing.TB, backend string) *Proxy {
	t.Helper()
	p, err := New(backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients connect to: "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Backend is where new connections go.
func (p *Proxy) Backend() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backend
}

// Switch sends new connections to addr and cuts every existing one, as
// moving a virtual IP does.
func (p *Proxy) Switch(addr string) {
	p.mu.Lock()
	p.backend = addr
	p.mu.Unlock()
	p.Cut()
}

// SwitchKeep sends new connections to addr and leaves the existing ones
// on the backend they have, as a DNS change does.
func (p *Proxy) SwitchKeep(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = addr
}

// Cut closes every open connection; the backend stays. It returns once
// they are closed.
func (p *Proxy) Cut() {
	p.mu.Lock()
	cut := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		if !c.cut {
			c.cut = true
			p.stats.Cut++
		}
		cut = append(cut, c)
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
}

// Pause stops forwarding: connections are still accepted, and no byte
// moves on any connection until Resume. Pausing a paused proxy does
// nothing.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

// Resume forwards again what was held and what comes. Resuming a proxy
// that is not paused does nothing.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
}

// Stats returns the connection counts.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Open = len(p.conns)
	return st
}

// Close stops the listener, cuts every connection and waits for the
// proxy's goroutines. Closing twice does nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// accept runs until the listener closes.
func (p *Proxy) accept() {
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient accept error (EMFILE, an aborted connection)
		}
		c := &pair{client: conn, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = conn.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.stats.Accepted++
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

// gate returns the channel to wait on before forwarding: nil when not
// paused.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// wait blocks while the proxy is paused; it reports false if c was
// closed meanwhile.
func (p *Proxy) wait(c *pair) bool {
	for {
		g := p.gate()
		if g == nil {
			return true
		}
		select {
		case <-g:
		case <-c.done:
			return false
		}
	}
}

// serve dials the backend (once not paused) and copies both ways until
// either side ends or the proxy cuts the pair.
func (p *Proxy) serve(c *pair) {
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	if !p.wait(c) {
		return
	}
	backend := p.Backend()
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.Dial("tcp", backend)
	if err != nil {
		p.mu.Lock()
		p.stats.Refused++
		p.mu.Unlock()
		return
	}
	if !c.setBackend(conn) {
		_ = conn.Close() // cut while dialling
		return
	}
	var both sync.WaitGroup
	both.Go(func() { p.copy(c, conn, c.client) })
	both.Go(func() { p.copy(c, c.client, conn) })
	both.Wait()
}

// copy forwards src to dst chunk by chunk, holding each chunk while the
// proxy is paused; when either side ends, it closes the pair, which ends
// the other direction too.
func (p *Proxy) copy(c *pair, dst io.Writer, src io.Reader) {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
