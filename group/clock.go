package group

import "time"

// Clock is the time a destination reads: heartbeats' stamps and
// lateness, the stall log's ticks, the snapshot's retry backoff and the
// windows it keeps left-out changes for. Real, the default, is the
// system's; a test gives a fake one it moves by hand.
type Clock interface {
	Now() time.Time
	// After sends the time on the channel once d has passed.
	After(d time.Duration) <-chan time.Time
	// NewTicker ticks every d until stopped.
	NewTicker(d time.Duration) Ticker
}

// Ticker is a Clock's ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system's clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (realClock) NewTicker(d time.Duration) Ticker       { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }
