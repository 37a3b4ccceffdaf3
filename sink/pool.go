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

// pool is a runner's workers and what each was handed: a worker takes
// every change handed to it since it last took (up to maxTake) and
// applies them as one transaction, so a busy target gets bigger
// transactions. Counts, not change lists, say what is applied: worker w's
// first handed[w] changes were handed, its first applied[w] applied.
type pool struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   [][]Change
	ready   []int // how many of each queue a worker may take (wake)
	handed  []uint64
	applied []uint64
	err     error // the first failure; every wait ends with it
	cancel  context.CancelFunc
}

// newPool returns the pool of n workers; its first failure calls cancel,
// which ends the workers' transactions and the runner's waits.
func newPool(workers int, cancel context.CancelFunc) *pool {
	p := &pool{queue: make([][]Change, workers), ready: make([]int, workers), handed: make([]uint64, workers), applied: make([]uint64, workers), cancel: cancel}
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
		n := min(p.ready[w], maxTake)
		take := p.queue[w][:n:n]
		if n == len(p.queue[w]) {
			p.queue[w] = make([]Change, 0, n) // the next share is likely as big
		} else {
			p.queue[w] = p.queue[w][n:]
		}
		p.ready[w] -= n
		p.mu.Unlock()

		err := apply(ctx, take)

		p.mu.Lock()
		if err != nil {
			p.failLocked(err)
		} else {
			p.applied[w] += uint64(len(take))
			p.cond.Broadcast()
		}
		p.mu.Unlock()
	}
}

// hand gives worker w change c, to be taken once woken, and returns its
// ticket.
func (p *pool) hand(w int, c Change) Ticket {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue[w] = append(p.queue[w], c)
	p.handed[w]++
	return Ticket{w, p.handed[w]}
}

// wake lets the workers take what they were handed. Until then they
// wait, however often they are woken, so that a worker's transaction is
// its share of a whole store batch, not the few changes handed before it
// looked.
func (p *pool) wake() {
	p.mu.Lock()
	p.wakeLocked()
	p.mu.Unlock()
}

func (p *pool) wakeLocked() {
	for w := range p.queue {
		p.ready[w] = len(p.queue[w])
	}
	p.cond.Broadcast()
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
