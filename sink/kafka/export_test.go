package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Murmur2 is Kafka's murmur2, to check it against franz-go's.
var Murmur2 = murmur2

// SetFenceWait sets how long a Publish waits after one was fenced, until
// the test ends.
func SetFenceWait(t interface{ Cleanup(func()) }, d time.Duration) {
	old := fenceWait
	fenceWait = d
	t.Cleanup(func() { fenceWait = old })
}

// SetClientOpts adds opts to the options of the producing clients made
// until the test ends, so that it can watch and pace franz-go from inside.
func SetClientOpts(t interface{ Cleanup(func()) }, opts ...kgo.Opt) {
	old := clientOpts
	clientOpts = opts
	t.Cleanup(func() { clientOpts = old })
}
