package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/braid-cdc/braid/internal/localcluster"
)

// links stands between the nodes: each node's Raft port and gossip port
// (TCP and UDP) sit behind a proxy of the run's, which the node
// advertises (--raft-advertise, --gossip-advertise), so every byte one
// node sends another passes through a proxy. Cutting a node off (a
// partition) drops everything to it and from it, while its HTTP and
// canal ports, and its connections to the sources and the targets, stay
// as they are: a node cut from the other nodes, not from the world.
//
// A proxy knows the node it stands for; the node at the other end it
// learns per connection: a TCP connection's dialer is the node process
// that holds its socket (/proc/net/tcp and /proc/PID/fd), a UDP packet's
// sender is the node whose gossip port it comes from (memberlist sends
// its packets from the port it listens on).
type links struct {
	mu      sync.Mutex
	cut     map[string]bool // node names cut off
	pids    func() map[int]string
	gossip  map[int]string // a node's own gossip port → its name
	proxies []*linkProxy
	cancel  context.CancelFunc // ends the proxies of the cluster in place
	wg      sync.WaitGroup
}

func newLinks() *links {
	return &links{cut: map[string]bool{}, gossip: map[int]string{}}
}

// place puts proxies in front of c's nodes' Raft and gossip ports, which
// the nodes advertise, ending those of a cluster placed before (Start
// tries again on new ports when one was taken).
func (l *links) place(c *localcluster.Cluster) error {
	l.stop()
	ctx, cancel := context.WithCancel(context.Background())
	l.mu.Lock()
	l.proxies, l.cancel = nil, cancel
	clear(l.gossip)
	l.pids = func() map[int]string {
		out := map[int]string{}
		for _, n := range c.Nodes {
			if pid := n.PID(); pid != 0 {
				out[pid] = n.Name
			}
		}
		return out
	}
	l.mu.Unlock()
	for _, n := range c.Nodes {
		raft, err := l.listen(n.Name, n.RaftPort, false)
		if err != nil {
			l.closeAll()
			return err
		}
		gossip, err := l.listen(n.Name, n.GossipPort, true)
		if err != nil {
			l.closeAll()
			return err
		}
		n.RaftAdvertise, n.GossipAdvertise = raft.Addr(), gossip.Addr()
		l.mu.Lock()
		l.gossip[n.GossipPort] = n.Name
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		l.wg.Go(func() { p.run(ctx) })
	}
	return nil
}

// closeAll closes the ports of proxies place made but did not run.
func (l *links) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		p.ln.Close()
		if p.udp != nil {
			p.udp.Close()
		}
	}
	l.proxies = nil
}

// stop ends every proxy and waits for them.
func (l *links) stop() {
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	l.wg.Wait()
}

// blocked says whether traffic between nodes a and b (either "" when
// unknown) is cut.
func (l *links) blocked(a, b string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut[a] || l.cut[b]
}

// setCut cuts node name off from the other nodes, or mends it: every
// connection to or from it is closed when it is cut.
func (l *links) setCut(name string, cut bool) {
	l.mu.Lock()
	l.cut[name] = cut
	ps := l.proxies
	l.mu.Unlock()
	if cut {
		for _, p := range ps {
			p.dropNode(name)
		}
	}
}

// mendAll mends every cut.
func (l *links) mendAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.cut)
}

// linkProxy is one node's port behind a proxy: TCP always, UDP too for
// gossip, on the same port number.
type linkProxy struct {
	l       *links
	node    string // the node it stands for
	backend string // the node's own port, 127.0.0.1:N
	ln      net.Listener
	udp     *net.UDPConn // nil for Raft

	mu    sync.Mutex
	conns map[net.Conn]string // both ends of each connection → the node at the far end ("" unknown)
	nat   map[string]*net.UDPConn
	wg    sync.WaitGroup
}

// listen makes a proxy for node's port backend; withUDP also forwards UDP
// on the same port number.
func (l *links) listen(node string, backend int, withUDP bool) (*linkProxy, error) {
	p := &linkProxy{l: l, node: node, backend: net.JoinHostPort("127.0.0.1", strconv.Itoa(backend)),
		conns: map[net.Conn]string{}, nat: map[string]*net.UDPConn{}}
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		if !withUDP {
			p.ln = ln
			break
		}
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: ln.Addr().(*net.TCPAddr).Port})
		if err == nil {
			p.ln, p.udp = ln, u
			break
		}
		ln.Close()
		if try == 20 {
			return nil, fmt.Errorf("no port free for both TCP and UDP: %w", err)
		}
	}
	l.mu.Lock()
	l.proxies = append(l.proxies, p)
	l.mu.Unlock()
	return p, nil
}

// Addr is the address the node advertises.
func (p *linkProxy) Addr() string { return p.ln.Addr().String() }

// run forwards until ctx ends, then closes everything and waits.
func (p *linkProxy) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		p.ln.Close()
		if p.udp != nil {
			p.udp.Close()
		}
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		for _, u := range p.nat {
			u.Close()
		}
		p.mu.Unlock()
	}()
	if p.udp != nil {
		p.wg.Go(p.packets)
	}
	for {
		c, err := p.ln.Accept()
		if err != nil {
			break
		}
		p.wg.Go(func() { p.serve(c) })
	}
	p.wg.Wait()
}

func (p *linkProxy) serve(c net.Conn) {
	from := p.dialer(c)
	if p.l.blocked(p.node, from) {
		c.Close()
		return
	}
	b, err := net.Dial("tcp", p.backend)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[b] = from, from
	p.mu.Unlock()
	if p.l.blocked(p.node, from) { // cut while dialing
		p.drop(c, b)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	p.drop(c, b)
	<-done
}

func (p *linkProxy) drop(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

// dropNode closes every connection to or from node.
func (p *linkProxy) dropNode(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, from := range p.conns {
		if p.node == node || from == node {
			c.Close()
			delete(p.conns, c)
		}
	}
}

// packets forwards gossip's UDP: each sender gets a socket of its own
// toward the node (as a NAT would), so that the node's answers to the
// address a packet came from find their way back.
func (p *linkProxy) packets() {
	buf := make([]byte, 64<<10)
	backend, err := net.ResolveUDPAddr("udp", p.backend)
	if err != nil {
		return
	}
	for {
		n, src, err := p.udp.ReadFromUDP(buf)
		if err != nil {
			return
		}
		p.l.mu.Lock()
		from := p.l.gossip[src.Port]
		p.l.mu.Unlock()
		if p.l.blocked(p.node, from) {
			continue
		}
		p.mu.Lock()
		u := p.nat[src.String()]
		if u == nil {
			if u, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
				p.mu.Unlock()
				continue
			}
			p.nat[src.String()] = u
			p.wg.Go(func() { p.answers(u, src, from) })
		}
		p.mu.Unlock()
		_, _ = u.WriteToUDP(buf[:n], backend)
	}
}

// answers sends what the node sends to sender src's socket u back to src.
func (p *linkProxy) answers(u *net.UDPConn, src *net.UDPAddr, from string) {
	buf := make([]byte, 64<<10)
	for {
		n, _, err := u.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if p.l.blocked(p.node, from) {
			continue
		}
		_, _ = p.udp.WriteToUDP(buf[:n], src)
	}
}

// dialer is the node whose process dialed c ("" when none is known): the
// one holding the socket at c's far end.
func (p *linkProxy) dialer(c net.Conn) string {
	ra, ok1 := c.RemoteAddr().(*net.TCPAddr)
	la, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ""
	}
	inode, err := socketInode(ra.Port, la.Port)
	if err != nil {
		return ""
	}
	for pid, name := range p.l.pids() {
		if holds(pid, inode) {
			return name
		}
	}
	return ""
}

// socketInode finds the inode of the TCP socket whose local port is
// local and whose peer's port is remote, on loopback.
func socketInode(local, remote int) (string, error) {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 {
				continue
			}
			if portOf(fs[1]) == local && portOf(fs[2]) == remote {
				fh.Close()
				return fs[9], nil
			}
		}
		fh.Close()
	}
	return "", errors.New("no such socket")
}

// portOf is the port of /proc/net/tcp's "ADDR:PORT" (hex).
func portOf(s string) int {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseUint(s[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}

// holds says whether process pid has socket inode open.
func holds(pid int, inode string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range ents {
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && t == want {
			return true
		}
	}
	return false
}
