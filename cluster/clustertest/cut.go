package clustertest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// errCut is what a cut-off node's gossip dials fail with.
var errCut = errors.New("clustertest: node cut off")

// raftProxy stands in front of a node's Raft port: the other nodes dial
// the proxy (the node advertises it, cluster.Config.RaftAdvertise), which
// forwards each connection to the node. While cut, it drops every
// connection it carries and closes new ones at once, so the others
// cannot reach the node; the connections the node dials itself are not
// its to cut (raftstore dials with net.Dial and has no hook).
//
// It outlives the node's restarts: while the node is down, connections
// it forwards are refused by the node's closed port, as they would be
// without it.
type raftProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and two copiers per connection

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{} // both ends of every forwarded connection
}

func listenProxy(addr, target string) (*raftProxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &raftProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

func (p *raftProxy) addr() string { return p.ln.Addr().String() }

func (p *raftProxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

func (p *raftProxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track registers c; false (and c closed) when the proxy is cut or closed.
func (p *raftProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *raftProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *raftProxy) forward(in net.Conn) {
	if !p.track(in) {
		return
	}
	out, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		p.untrack(in)
		return
	}
	if !p.track(out) {
		p.untrack(in)
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		// One direction ended: end both, as a crossed-out cable would.
		p.untrack(in, out)
	}
	wg.Go(func() { pipe(out, in) })
	wg.Go(func() { pipe(in, out) })
	wg.Wait()
}

// setCut cuts (true) or restores (false) the node's inbound Raft traffic.
func (p *raftProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
			delete(p.conns, c)
		}
	}
}

// close stops the proxy and waits for its goroutines.
func (p *raftProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// cutTransport wraps a node's gossip transport (cluster.Config.
// GossipTransport): while cut is set it drops every packet in and out,
// refuses to dial and closes every stream the others open, so that the
// node and the others each see the other fail. It implements only
// memberlist.Transport (memberlist adapts it), so that no method of the
// wrapped transport goes around it.
type cutTransport struct {
	inner   memberlist.Transport
	cut     *atomic.Bool
	packets chan *memberlist.Packet
	streams chan net.Conn

	// stopping closes when Shutdown begins: from then on the forwarders
	// drop what comes in (the wrapped transport's listeners block on
	// their channels until read, so they must be read until it is shut
	// down); done closes when it is, and they return.
	stopping, done chan struct{}
	wg             sync.WaitGroup // the two forwarders
	shutOnce       sync.Once
	shutErr        error
}

var _ memberlist.Transport = (*cutTransport)(nil)

func newCutTransport(inner memberlist.Transport, cut *atomic.Bool) *cutTransport {
	t := &cutTransport{inner: inner, cut: cut, packets: make(chan *memberlist.Packet),
		streams: make(chan net.Conn), stopping: make(chan struct{}), done: make(chan struct{})}
	t.wg.Go(t.forwardPackets)
	t.wg.Go(t.forwardStreams)
	return t
}

// forwardPackets passes the wrapped transport's packets on unless cut.
func (t *cutTransport) forwardPackets() {
	for {
		select {
		case p := <-t.inner.PacketCh():
			if t.cut.Load() {
				continue
			}
			select {
			case t.packets <- p:
			case <-t.stopping:
			}
		case <-t.done:
			return
		}
	}
}

// forwardStreams passes the streams others open on, and closes them while
// cut.
func (t *cutTransport) forwardStreams() {
	for {
		select {
		case c := <-t.inner.StreamCh():
			if t.cut.Load() {
				c.Close()
				continue
			}
			select {
			case t.streams <- c:
			case <-t.stopping:
				c.Close()
			}
		case <-t.done:
			return
		}
	}
}

func (t *cutTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

func (t *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.cut.Load() {
		return time.Now(), nil // sent, and lost on the way
	}
	return t.inner.WriteTo(b, addr)
}

func (t *cutTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *cutTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.cut.Load() {
		return nil, errCut
	}
	return t.inner.DialTimeout(addr, timeout)
}

func (t *cutTransport) StreamCh() <-chan net.Conn { return t.streams }

func (t *cutTransport) Shutdown() error {
	t.shutOnce.Do(func() {
		close(t.stopping)
		t.shutErr = t.inner.Shutdown()
		close(t.done)
		t.wg.Wait()
	})
	return t.shutErr
}
