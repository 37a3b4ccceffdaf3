package cluster

import (
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
)

// nodeOverhead is the memory a node needs besides its destinations: Raft
// and bolt's buffers, gossip, the HTTP and canal servers, the readers'
// schema state. Measured idle: about 24 MiB of RSS.
const nodeOverhead = 64 << 20

// memoryLimit keeps the Go runtime's soft memory limit at what the node's
// destinations may hold (their stores, queues and read-ahead, see
// group.MemoryBound) plus nodeOverhead. Without it the collector lets the
// heap grow to twice what is live before collecting (GOGC=100), so a node
// with full stores would use about twice its bounds; with it, the
// collector works harder as the heap nears the limit instead. A GOMEMLIMIT
// set in the environment wins.
type memoryLimit struct {
	mu    sync.Mutex
	bound int64
	log   *slog.Logger
}

// add changes the destinations' total by delta and sets the limit.
func (m *memoryLimit) add(delta int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bound += delta
	limit := m.bound + nodeOverhead
	debug.SetMemoryLimit(limit)
	if m.log != nil {
		m.log.Debug("memory limit", "MiB", limit>>20)
	}
}
