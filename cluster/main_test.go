package cluster_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// stopped Node must stop its Raft store, its gossip, its servers and every
// destination it ran, and clustertest its proxies and transports.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
