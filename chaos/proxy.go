package chaos

import (
	"context"
	"io"
	"net"
	"sync"
)

// proxy forwards a loopback port to a service, and can cut it: while cut,
// its connections are closed and new ones are closed as they come, as a
// network partition looks to the client (a refused or reset connection).
type proxy struct {
	name    string
	backend string
	ln      net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newProxy listens on a free loopback port for backend.
func newProxy(name, backend string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &proxy{name: name, backend: backend, ln: ln, conns: map[net.Conn]struct{}{}}, nil
}

// Addr is the address clients use instead of the backend's.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// run accepts until ctx ends, then closes every connection and waits for
// their goroutines.
func (p *proxy) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		p.ln.Close()
	}()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			break
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
	p.setCut(true)
	p.wg.Wait()
}

func (p *proxy) serve(c net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	backend := p.backend
	p.mu.Unlock()
	b, err := net.Dial("tcp", backend)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		b.Close()
		p.dropLocked(c)
		return
	}
	p.conns[b] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	p.drop(c)
	p.drop(b)
	<-done
}

func (p *proxy) drop(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(c)
}

func (p *proxy) dropLocked(c net.Conn) {
	c.Close()
	delete(p.conns, c)
}

// switchTo sends new connections to backend (a virtual IP moved to
// another server); the open ones are closed, as the move breaks them.
func (p *proxy) switchTo(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = backend
	for c := range p.conns {
		p.dropLocked(c)
	}
}

// close stops the proxy, whether run runs or not: its port and every
// connection closed (run then returns once its goroutines are done).
func (p *proxy) close() {
	p.setCut(true)
	p.ln.Close()
}

// setCut cuts the proxy (closing every connection) or mends it.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			p.dropLocked(c)
		}
	}
}
