package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Murmur2 is Kafka's murmur2, to check it against franz-go's.
var Murmur2 = murmur2

// SetAbandonAfter sets how long a canceled Publish waits for records
// sent, until the test ends.
func SetAbandonAfter(t interface{ Cleanup(func()) }, d time.Duration) {
	old := abandonAfter
	abandonAfter = d
	t.Cleanup(func() { abandonAfter = old })
}

// SetClientOpts adds opts to the options of the producing clients made
// until the test ends, so that it can watch and pace franz-go from inside.
func SetClientOpts(t interface{ Cleanup(func()) }, opts ...kgo.Opt) {
	old := clientOpts
	clientOpts = opts
	t.Cleanup(func() { clientOpts = old })
}
