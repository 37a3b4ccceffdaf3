package clustertest

import (
	"bufio"
	"io"
	"log"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every line with the same line until closed.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// roundTrip sends a line through c and reads it back.
func roundTrip(c net.Conn) error {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

// TestProxyCut: a cut drops the connections the proxy carries and
// refuses new ones; restored, it carries new ones again.
func TestProxyCut(t *testing.T) {
	p, err := listenProxy("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	before := dial()
	if err := roundTrip(before); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.setCut(true)
	if err := roundTrip(before); err == nil {
		t.Error("a connection carried before the cut still works")
	}
	if err := roundTrip(dial()); err == nil {
		t.Error("a connection opened during the cut works")
	}
	p.setCut(false)
	if err := roundTrip(dial()); err != nil {
		t.Errorf("after the cut: %v", err)
	}
}

// TestGossipCut: while cut, the transport sends nothing, dials nothing and
// passes nothing received on; Shutdown stops its forwarders.
func TestGossipCut(t *testing.T) {
	transport := func() (*memberlist.NetTransport, string) {
		t.Helper()
		for range 10 {
			l, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.LocalAddr().(*net.UDPAddr).Port
			l.Close()
			nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, BindPort: port, Logger: log.New(io.Discard, "", 0)})
			if err == nil {
				return nt, hostPort(port)
			}
		}
		t.Fatal("no port for a gossip transport")
		return nil, ""
	}
	var cut atomic.Bool
	innerA, addrA := transport()
	a := newCutTransport(innerA, &cut)
	b, addrB := transport()
	defer b.Shutdown()
	defer a.Shutdown()

	recv := func(ch <-chan *memberlist.Packet) bool {
		select {
		case <-ch:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	}
	if _, err := a.WriteTo([]byte("x"), addrB); err != nil || !recv(b.PacketCh()) {
		t.Fatalf("uncut, a packet from a did not reach b: %v", err)
	}
	b.WriteTo([]byte("x"), addrA)
	if !recv(a.PacketCh()) {
		t.Fatal("uncut, a packet from b did not reach a")
	}
	cut.Store(true)
	if a.WriteTo([]byte("x"), addrB); recv(b.PacketCh()) {
		t.Error("cut, a packet from a reached b")
	}
	if b.WriteTo([]byte("x"), addrA); recv(a.PacketCh()) {
		t.Error("cut, a packet from b reached a")
	}
	if c, err := a.DialTimeout(addrB, time.Second); err == nil {
		c.Close()
		t.Error("cut, a dialed b")
	}
	cut.Store(false)
	if a.WriteTo([]byte("x"), addrB); !recv(b.PacketCh()) {
		t.Error("restored, a packet from a did not reach b")
	}
}
