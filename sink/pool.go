package sink

import (
	"context"
	"errors"
	"sync"
)

// maxTake bounds a worker's transaction: the changes it takes at once.
// Big enough that a commit's cost is small beside its rows; small enough
// that store batches are acked while the stream is read on: with 16384,
// a run took the whole store's worth into transactions, the sources
// waited for a store that emptied all at once, and the rate swung from
// 21,000 to 50,000 rows/s between like runs (bench/sink_test.go).
const maxTake = 2048

// pool is a Keyed Apply's workers and what each was handed: a worker takes
// every change handed to it since it last took (up to maxTake) and
// applies them as one transaction, so a busy target gets bigger
// transactions. Counts, not change lists, say what is applied: worker w's
// first handed[w] changes were handed, its first applied[w] applied.
type pool struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   [][]*block // each worker's, oldest first
	ready   []int      // how many of each queue a worker may take (wake)
	handed  []uint64
	applied []uint64
	free    [][]Change // blocks applied, to be filled again
	err     error      // the first failure; every wait ends with it
	cancel  context.CancelFunc

	// Apply's, outside mu: what it handed each worker since it last
	// queued them (flush: one lock a store batch, not one a change), and
	// how many it has handed each in all.
	stage  [][]Change
	staged []uint64
}

// A block holds up to maxTake changes of a worker's queue, the first
// taken of them taken. A queue is a list of blocks, not one slice: a
// store batch can hand a worker hundreds of thousands of changes, and
// growing one slice to hold them copied it again and again (a tenth of
// Apply's time).
type block struct {
	changes []Change
	taken   int
}

// newPool returns the pool of n workers; its first failure calls cancel,
// which ends the workers' transactions and Apply's waits.
func newPool(workers int, cancel context.CancelFunc) *pool {
	p := &pool{queue: make([][]*block, workers), ready: make([]int, workers), handed: make([]uint64, workers), applied: make([]uint64, workers), cancel: cancel,
		stage: make([][]Change, workers), staged: make([]uint64, workers)}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// work is worker w's loop: apply what it is handed until the pool fails
// (or ctx ends, which apply reports).
func (p *pool) work(ctx context.Context, w int, apply func(context.Context, []Change) error) {
	for {
		p.mu.Lock()
		for p.ready[w] == 0 && p.err == nil {
			p.cond.Wait()
		}
		if p.err != nil {
			p.mu.Unlock()
			return
		}
		// What is ready of the oldest block: a transaction of less than
		// maxTake where a block ends, or where wake left off.
		head := p.queue[w][0]
		at := head.taken
		n := min(p.ready[w], len(head.changes)-at)
		take := head.changes[at : at+n : at+n]
		head.taken += n
		done := head.taken == maxTake
		if done {
			p.queue[w] = p.queue[w][1:]
		}
		p.ready[w] -= n
		p.mu.Unlock()

		err := apply(ctx, take)
		clear(take) // let go of the rows

		p.mu.Lock()
		if err != nil {
			p.failLocked(err)
		} else {
			p.applied[w] += uint64(len(take))
			p.cond.Broadcast()
		}
		if done && len(p.free) < 2*len(p.queue) {
			p.free = append(p.free, head.changes[:0])
		}
		p.mu.Unlock()
	}
}

// hand gives worker w change c, to be queued at the next flush and taken
// once woken, and returns its ticket. Only Apply hands.
func (p *pool) hand(w int, c Change) Ticket {
	p.stage[w] = append(p.stage[w], c)
	p.staged[w]++
	return Ticket{w, p.staged[w]}
}

// flush queues what Apply handed.
func (p *pool) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w, cs := range p.stage {
		for _, c := range cs {
			q := p.queue[w]
			if len(q) == 0 || len(q[len(q)-1].changes) == maxTake {
				b := &block{}
				if k := len(p.free); k > 0 {
					b.changes, p.free = p.free[k-1], p.free[:k-1]
				} else {
					b.changes = make([]Change, 0, maxTake)
				}
				q = append(q, b)
				p.queue[w] = q
			}
			last := q[len(q)-1]
			last.changes = append(last.changes, c)
		}
		p.handed[w] += uint64(len(cs))
		clear(cs)
		p.stage[w] = cs[:0]
	}
}

// wake lets the workers take what they were handed. Until then they
// wait, however often they are woken, so that a worker's transaction is
// its share of a whole store batch, not the few changes handed before it
// looked. Only Apply wakes.
func (p *pool) wake() {
	p.flush()
	p.mu.Lock()
	p.wakeLocked()
	p.mu.Unlock()
}

func (p *pool) wakeLocked() {
	for w, q := range p.queue {
		p.ready[w] = 0
		for _, b := range q {
			p.ready[w] += len(b.changes) - b.taken
		}
	}
	p.cond.Broadcast()
}

// waitHanded is wait for Apply, which may have handed what it waits
// for.
func (p *pool) waitHanded(ts ...Ticket) error {
	p.flush()
	return p.wait(ts...)
}

// wait waits until every ticket of ts is applied, or the pool fails.
func (p *pool) wait(ts ...Ticket) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeLocked() // what is handed may be what is waited for
	for _, t := range ts {
		for p.applied[t.Worker] < t.N && p.err == nil {
			p.cond.Wait()
		}
	}
	return p.err
}

// drain waits until every change handed is applied.
func (p *pool) drain() error {
	p.flush()
	p.mu.Lock()
	ts := make([]Ticket, len(p.handed))
	for w, n := range p.handed {
		ts[w] = Ticket{w, n}
	}
	p.mu.Unlock()
	return p.wait(ts...)
}

// counts returns copies of handed and applied.
func (p *pool) counts() (handed, applied []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]uint64(nil), p.handed...), append([]uint64(nil), p.applied...)
}

// fail ends the pool with err (the first failure wins).
func (p *pool) fail(err error) {
	p.mu.Lock()
	p.failLocked(err)
	p.mu.Unlock()
}

func (p *pool) failLocked(err error) {
	if p.err == nil {
		p.err = err
		p.cancel()
	}
	p.cond.Broadcast()
}

// failed returns the pool's failure, if any.
func (p *pool) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// errStopped ends a pool whose runner returns.
var errStopped = errors.New("sink runner stopped")
