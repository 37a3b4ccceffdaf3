package mariadb

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ErrPortInUse reports that a server could not listen on its port because
// something else already does. Launch wraps it only for an explicit
// Options.Port (with a free port chosen by Launch it tries another), Restart
// only after waiting a few seconds for the port to come free.
var ErrPortInUse = errors.New("mariadb: port in use")

// ports hands out loopback TCP ports, never the same one twice to servers of
// this process that are alive at the same time.
var ports = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// claimPort reserves a port chosen by the caller; it reports false if a
// server of this process already has it.
func claimPort(port int) bool {
	ports.Lock()
	defer ports.Unlock()
	if ports.used[port] {
		return false
	}
	ports.used[port] = true
	return true
}

// reservePort returns a port that was free a moment ago. It prefers ports
// below the kernel's ephemeral range, so that no outgoing connection can sit
// on a server's port while the server is down for a Restart; it falls back to
// one chosen by the kernel.
func reservePort() (int, error) {
	lo := ephemeralLow()
	for i := 0; i < 50; i++ {
		port := 0
		if i < 40 && lo > 20000 {
			port = 15000 + rand.IntN(lo-15000)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if claimPort(port) {
			return port, nil
		}
	}
	return 0, errors.New("mariadb: no free loopback port found")
}

func releasePort(port int) {
	ports.Lock()
	delete(ports.used, port)
	ports.Unlock()
}

// ephemeralLow returns the first port of the kernel's ephemeral range, or 0 if
// it is unknown.
func ephemeralLow() int {
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
