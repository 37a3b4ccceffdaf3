package group

import (
	"sync"
	"sync/atomic"
)

// orderLogPoints is how many recent points an OrderLog remembers: a
// replay further behind than that finds its points decided long before
// and follows the placements alone.
const orderLogPoints = 1 << 16

// OrderLog remembers which source a destination's merge took at each of
// its recent points (Cursor.Taken before the transaction). A replay
// reader beside the live run (Config.LiveOrder) follows it: its merge
// may read a source further than the live run has, and take there a
// transaction the live run, which a watermark let past that source, will
// take only later, late, and keep as such only then. Safe for concurrent
// use: the live run's merge writes it, replays read it.
type OrderLog struct {
	// start is the cursor the run resumed from (nil: the sources'
	// start): a replay goes no further than the run went then, up to
	// its point (Config.Reached), and follows the log after it.
	start *Cursor
	from  uint64 // the first point this run took

	// The merge's side is lock-free, as it runs once a transaction:
	// took stores the slot, then next, then looks at waiting; a replay
	// that waits sets waiting, then looks at next again (taken), so one
	// of them sees the other.
	next  atomic.Uint64  // the point the merge takes next
	ended atomic.Bool    // the run ended: it takes no more points
	srcs  []atomic.Int32 // srcs[p % orderLogPoints]: the source taken at point p

	waiting atomic.Bool // a replay waits on wake
	mu      sync.Mutex
	// wake, made when a replay waits for a point, is closed when the
	// merge takes the next.
	wake chan struct{}
}

func newOrderLog(start *Cursor) *OrderLog {
	l := &OrderLog{start: start, srcs: make([]atomic.Int32, orderLogPoints)}
	if start != nil {
		l.from = start.Taken
		l.next.Store(start.Taken)
	}
	return l
}

// end notes that the run ended: a replay waiting for a point it will
// never take goes on by the placements alone.
func (l *OrderLog) end() {
	l.ended.Store(true)
	l.wakeAll()
}

// took notes that the merge took source src's transaction at point p.
func (l *OrderLog) took(p uint64, src int) {
	l.srcs[p%orderLogPoints].Store(int32(src))
	l.next.Store(p + 1)
	if l.waiting.Load() {
		l.wakeAll()
	}
}

// wakeAll wakes the replays waiting for a point.
func (l *OrderLog) wakeAll() {
	l.mu.Lock()
	l.waiting.Store(false)
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
	l.mu.Unlock()
}

// taken returns a channel closed once the merge has taken point p (or
// sooner, on any point taken: the caller looks at At again).
func (l *OrderLog) taken(p uint64) <-chan struct{} {
	if l.ended.Load() || p < l.next.Load() {
		return closed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	l.waiting.Store(true)
	if l.ended.Load() || p < l.next.Load() {
		return closed // took or end ran before it could see waiting
	}
	return l.wake
}

// closed is a channel closed from the start.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// At returns the source the merge took at point p; ahead when it has not
// taken p yet; src -1 when p is older than the log remembers (or than
// the run, which started from a later cursor), or the run ended first.
func (l *OrderLog) At(p uint64) (src int, ahead bool) {
	ended := l.ended.Load() // before next: once ended, next is the last
	next := l.next.Load()
	switch {
	case p >= next && ended:
		return -1, false
	case p >= next:
		return -1, true
	case p < l.from || next-p >= orderLogPoints:
		return -1, false
	}
	src = int(l.srcs[p%orderLogPoints].Load())
	// took stores point p+orderLogPoints's source in p's slot before it
	// moves next past it: once next has come that far, src may be its.
	if l.next.Load()-p >= orderLogPoints {
		return -1, false
	}
	return src, false
}
