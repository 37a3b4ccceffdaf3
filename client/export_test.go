package client

import "testing"

// SetStreamBuffer makes streams read n bytes at a time until t ends.
func SetStreamBuffer(t testing.TB, n int) {
	old := streamBuffer
	streamBuffer = n
	t.Cleanup(func() { streamBuffer = old })
}
