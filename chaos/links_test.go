package chaos

import (
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestLinksCutANode: a proxy of links forwards TCP and UDP to its node's
// port, knows which node dialed a connection (the process holding the
// socket) or sent a packet (its gossip port), and while a node is cut
// carries nothing to it or from it, and again once it is mended.
func TestLinksCutANode(t *testing.T) {
	// "n2" is this test's process: it holds the dialing sockets, and its
	// UDP socket's port is n2's gossip port.
	l := newLinks()
	l.pids = func() map[int]string { return map[int]string{os.Getpid(): "n2"} }

	tcpBackend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcpBackend.Close()
	go func() {
		for {
			c, err := tcpBackend.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	udpBackend, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: tcpBackend.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Skipf("the backend's port is taken for UDP: %v", err)
	}
	defer udpBackend.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := udpBackend.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = udpBackend.WriteToUDP(buf[:n], from)
		}
	}()
	p, err := l.listen("n1", tcpBackend.Addr().(*net.TCPAddr).Port, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	l.cancel = cancel
	l.wg.Go(func() { p.run(ctx) })
	defer l.stop()

	sender, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	l.mu.Lock()
	l.gossip[sender.LocalAddr().(*net.UDPAddr).Port] = "n2"
	l.mu.Unlock()
	proxyUDP, _ := net.ResolveUDPAddr("udp", p.Addr())

	// echo says whether a TCP round trip and a UDP one pass the proxy.
	echo := func() (tcpOK, udpOK bool) {
		c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 4)
			if _, err := c.Write([]byte("ping")); err == nil {
				_, err = io.ReadFull(c, buf)
				tcpOK = err == nil && string(buf) == "ping"
			}
			c.Close()
		}
		_ = sender.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := sender.WriteToUDP([]byte("pong"), proxyUDP); err == nil {
			buf := make([]byte, 16)
			n, _, err := sender.ReadFromUDP(buf)
			udpOK = err == nil && string(buf[:n]) == "pong"
		}
		return
	}
	if tcpOK, udpOK := echo(); !tcpOK || !udpOK {
		t.Fatalf("before any cut: TCP %v, UDP %v; want both through", tcpOK, udpOK)
	}
	// A connection open when its dialer is cut is closed.
	held, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(held, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	for _, cut := range []string{"n2", "n1"} { // the dialer, then the node behind the proxy
		l.setCut(cut, true)
		if tcpOK, udpOK := echo(); tcpOK || udpOK {
			t.Errorf("%s cut: TCP %v, UDP %v; want neither through", cut, tcpOK, udpOK)
		}
		l.setCut(cut, false)
		if tcpOK, udpOK := echo(); !tcpOK || !udpOK {
			t.Errorf("%s mended: TCP %v, UDP %v; want both through", cut, tcpOK, udpOK)
		}
	}
	_ = held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Errorf("a connection of n2's open when n2 was cut: read %v, want it closed", err)
	}
}
