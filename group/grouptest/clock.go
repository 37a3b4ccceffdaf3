// Package grouptest runs a group.Destination on scripted sources and a
// fake clock: no server, no sleep. Sources (group.Sources) serves each
// source's events as a test appends them, and replays them from a
// cursor's position to a restarted destination or a shard-DDL catch-up,
// as a binlog would; Clock (group.Clock) moves only when the test says.
// A Log also holds its tables' rows, which a snapshot connection serves
// in key order by chunks, one at a time when held (Log.Step), failing
// when told (Log.FailChunks).
// It is for testing group's logic (the merge's order, lateness,
// placements, shard-DDL locks, the snapshot's gate, fold, backoff and
// replay); what a server does (decoding, schema, reconnects, the
// snapshot's SQL) is tested against a real mariadbd.
package grouptest

import (
	"sync"
	"time"

	"github.com/braid-cdc/braid/group"
)

// Clock is a group.Clock that moves only on Advance. Safe for
// concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
}

type waiter struct {
	d      time.Duration
	at     time.Time
	every  time.Duration // 0: once (After)
	ch     chan time.Time
	closed bool
}

var _ group.Clock = (*Clock)(nil)

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now implements group.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After implements group.Clock.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	return c.add(d, 0).ch
}

// NewTicker implements group.Clock.
func (c *Clock) NewTicker(d time.Duration) group.Ticker {
	return &ticker{c: c, w: c.add(d, d)}
}

func (c *Clock) add(d, every time.Duration) *waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &waiter{d: d, at: c.now.Add(d), every: every, ch: make(chan time.Time, 1)}
	if d <= 0 {
		w.ch <- c.now
		if every == 0 {
			return w
		}
		w.at = c.now.Add(every)
	}
	c.waiters = append(c.waiters, w)
	return w
}

// Timers is how many timers of duration d (After) wait: a test moves the
// clock once the code it tests waits.
func (c *Clock) Timers(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.waiters {
		if !w.closed && w.every == 0 && w.d == d {
			n++
		}
	}
	return n
}

// Advance moves the clock on by d and fires the timers and tickers due
// (a ticker whose tick was not taken drops the next, as time.Ticker does).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.closed {
			continue
		}
		for !w.at.After(c.now) {
			select {
			case w.ch <- c.now:
			default:
			}
			if w.every == 0 {
				w.closed = true
				break
			}
			w.at = w.at.Add(w.every)
		}
		if !w.closed {
			kept = append(kept, w)
		}
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

type ticker struct {
	c *Clock
	w *waiter
}

func (t *ticker) C() <-chan time.Time { return t.w.ch }

func (t *ticker) Stop() {
	t.c.mu.Lock()
	t.w.closed = true
	t.c.mu.Unlock()
}
