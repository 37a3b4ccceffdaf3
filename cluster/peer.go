package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// The node port (the Raft port) carries, besides Raft and forwarded
// writes, what the nodes ask of each other, so that with Config.TLS all of
// it is mutual TLS between nodes of one CA and none of it is open to a
// client: the canal relay, a destination's state for describe, and a
// probe a leader makes before it adds a voter.
const (
	peerCanal byte = 'C' // a canal client's connection, relayed (canal.Server.ServePeer)
	peerHTTP  byte = 'H' // HTTP/1.1: peerHandler's routes
	peerProbe byte = 'P' // closed at once: proves the TLS identity
)

// peerProtocols are the node port's protocols beyond raftstore's own.
func (n *Node) peerProtocols() map[byte]func(net.Conn) {
	n.peerLn = &connListener{conns: make(chan net.Conn), closed: make(chan struct{}), addr: n.httpLn.Addr()}
	return map[byte]func(net.Conn){
		peerCanal: func(c net.Conn) {
			if n.canalSrv == nil { // this node serves no canal port
				c.Close()
				return
			}
			n.canalSrv.ServePeer(n.life, c)
		},
		peerHTTP:  n.peerLn.push,
		peerProbe: func(c net.Conn) { c.Close() },
	}
}

// peerHandler is what the node port's HTTP serves: a destination's state
// (its sinks and DDL locks too), for describe and the status page on
// another node, and a node's removal, relayed to the
// leader; nothing else (no stream, no ack).
func (n *Node) peerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/destinations/{name}", n.local)
	mux.Handle("GET /v1/destinations/{name}/sinks", n.local) // for the status page
	mux.Handle("GET /v1/destinations/{name}/ddl", n.local)
	mux.HandleFunc("DELETE /v1/cluster/nodes/{name}", n.removeNode)
	return mux
}

// dialPeer connects to another node's node port for proto.
func (n *Node) dialPeer(ctx context.Context, raftAddr string, proto byte) (net.Conn, error) {
	return n.store.DialPeer(ctx, raftAddr, proto)
}

// newPeerClient is the HTTP client of calls to other nodes' node ports;
// a URL's host is the other node's Raft address.
func (n *Node) newPeerClient() *http.Client {
	t := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return n.dialPeer(ctx, addr, peerHTTP)
		},
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     time.Minute,
	}
	return &http.Client{Transport: t}
}

// proveMember dials m's node port and, with TLS, checks that the
// certificate m answers with was issued to m's name: a voter is a node
// that proved it is the member gossip announced. Without TLS it only
// checks that the port answers.
func (n *Node) proveMember(ctx context.Context, m Member) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := n.dialPeer(ctx, m.RaftAddr, peerProbe)
	if err != nil {
		return err
	}
	defer c.Close()
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return errors.New("it showed no certificate")
	}
	if cn := st.PeerCertificates[0].Subject.CommonName; cn != m.Name {
		return fmt.Errorf("its certificate was issued to %q, not to %q: issue it one for %s with braid certs node", cn, m.Name, m.Name)
	}
	return nil
}

// connListener is a net.Listener fed with connections accepted elsewhere
// (the node port's, by their first byte).
type connListener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	addr      net.Addr
}

// push hands c to Accept, or closes it once the listener is closed.
func (l *connListener) push(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }
