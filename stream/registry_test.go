package stream_test

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/stream"
)

// TestSinkLagSeconds: a sink that has applied the head has no lag; one
// behind it lags by the age of the last transaction it applied; one that
// has applied nothing yet shows none rather than the age of the epoch.
func TestSinkLagSeconds(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := now.Add(-90 * time.Second)
	for _, c := range []struct {
		sk   stream.SinkStats
		head uint64
		want float64
	}{
		{stream.SinkStats{AppliedSeq: 7, AppliedAt: at}, 7, 0},
		{stream.SinkStats{AppliedSeq: 5, AppliedAt: at}, 7, 90},
		{stream.SinkStats{}, 7, 0},
	} {
		if got := c.sk.LagSeconds(c.head, now); got != c.want {
			t.Errorf("%+v, head %d: lag %v s, want %v", c.sk, c.head, got, c.want)
		}
	}
}
