package kafka

import "time"

// Murmur2 is Kafka's murmur2, to check it against franz-go's.
var Murmur2 = murmur2

// SetAbandonAfter sets how long a canceled Publish waits for records
// sent, until the test ends.
func SetAbandonAfter(t interface{ Cleanup(func()) }, d time.Duration) {
	old := abandonAfter
	abandonAfter = d
	t.Cleanup(func() { abandonAfter = old })
}
