package mariadb

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"

	"github.com/braid-cdc/braid/internal/ports"
)

// ErrPortInUse reports that a server could not listen on its port because
// something else already does. Launch wraps it only for an explicit
// Options.Port (with a free port chosen by Launch it tries another), Restart
// only after waiting a few seconds for the port to come free.
var ErrPortInUse = errors.New("mariadb: port in use")

// claimed hands out loopback TCP ports, never the same one twice to servers of
// this process that are alive at the same time.
var claimed = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// claimPort reserves a port chosen by the caller; it reports false if a
// server of this process already has it.
func claimPort(port int) bool {
	claimed.Lock()
	defer claimed.Unlock()
	if claimed.used[port] {
		return false
	}
	claimed.used[port] = true
	return true
}

// reservePort returns a port that was free a moment ago. It prefers ports
// below the kernel's ephemeral range, so that no outgoing connection can sit
// on a server's port while the server is down for a Restart; it falls back to
// one chosen by the kernel.
func reservePort() (int, error) {
	lo := ports.EphemeralLow()
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
	claimed.Lock()
	delete(claimed.used, port)
	claimed.Unlock()
}
