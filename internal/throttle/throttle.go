// Package throttle keeps the log lines of something a client may repeat
// at will (a failed login under a name of its choosing) from flooding a
// node's log: one line per key and window, a few in all, and a count of
// the lines left out.
//
// # Concurrency
//
// A *Log is safe for concurrent use.
package throttle

import (
	"sync"
	"time"
)

// Log decides which of a stream of events of the same kind get a line.
// The zero Log lets nothing through; make one with New.
type Log struct {
	window time.Duration
	burst  int

	mu         sync.Mutex
	windowAt   time.Time
	lines      int
	keys       map[string]bool // at most burst
	suppressed int
}

// New returns a Log that lets through, per window, the first event of
// each key and burst lines in all.
func New(window time.Duration, burst int) *Log {
	return &Log{window: window, burst: burst, keys: map[string]bool{}}
}

// Allow reports whether the event of key at now gets a line, and how
// many events got none since the last line that was let through.
func (l *Log) Allow(key string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.windowAt) >= l.window {
		l.windowAt, l.lines = now, 0
		clear(l.keys)
	}
	if l.lines >= l.burst || l.keys[key] {
		l.suppressed++
		return false, 0
	}
	l.lines++
	l.keys[key] = true
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
