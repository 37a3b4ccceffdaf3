// Package ports finds free loopback ports for the servers tests, the demo
// and benchmarks start: MariaDB shards and braid nodes.
package ports

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// EphemeralLow returns the first port of the kernel's ephemeral range, or 0
// if it is unknown. Ports below it are never handed to outgoing
// connections, so a server that restarts on one finds it free.
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// FreeLoopback returns n distinct loopback ports that were free for TCP
// and UDP (gossip uses both) a moment ago, preferring ports below the
// ephemeral range (see EphemeralLow).
func FreeLoopback(n int) ([]int, error) {
	lo := EphemeralLow()
	seen := map[int]bool{}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 50*n {
			return nil, errors.New("ports: no free loopback ports found")
		}
		port := 0
		if lo > 20000 && tries < 40*n {
			port = 15000 + rand.IntN(lo-15000)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		if !seen[port] {
			seen[port] = true
			ports = append(ports, port)
		}
	}
	return ports, nil
}
