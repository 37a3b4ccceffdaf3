package native

import "time"

// SetTimeouts shortens the servers' bounds for a test; restore undoes it.
func SetTimeouts(readHeader, read, idle time.Duration) (restore func()) {
	h, r, i := readHeaderTimeout, readTimeout, idleTimeout
	readHeaderTimeout, readTimeout, idleTimeout = readHeader, read, idle
	return func() { readHeaderTimeout, readTimeout, idleTimeout = h, r, i }
}
