package native

import (
	"net/http"
	"time"
)

// SetTimeouts shortens the servers' bounds for a test; restore undoes it.
func SetTimeouts(readHeader, read, idle time.Duration) (restore func()) {
	h, r, i := readHeaderTimeout, readTimeout, idleTimeout
	readHeaderTimeout, readTimeout, idleTimeout = readHeader, read, idle
	return func() { readHeaderTimeout, readTimeout, idleTimeout = h, r, i }
}

// ClientStates counts the client states h keeps.
func ClientStates(h http.Handler) int {
	hd := h.(*handler)
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return len(hd.clients)
}
