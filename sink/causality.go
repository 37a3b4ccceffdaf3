package sink

// Causality assigns row changes to workers by their primary key's hash
// (or range) and makes a change wait for the changes on other workers
// that hold one of its keys: TiDB DM's causality, waiting for the one
// worker concerned rather than for all. It is pure and not safe for
// concurrent use.
//
// A primary key's worker is a function of the key, so the changes of one
// primary key go to one worker, which applies them in stream order, and
// need no record. Only the keys a change holds besides its primary key
// (its unique values, the old key of a key-changing UPDATE) can be held
// on two workers: Causality remembers those, each with the last change
// that holds it (its worker, and how many changes that worker had been
// handed through it: a Ticket). A change waits for the ticket of each of
// its keys held on another worker, and a key-changing UPDATE also for
// every change handed so far to its old key's worker, which had the old
// key's earlier changes. Keeping every primary key as well cost the
// runner a sixth of its CPU (bench/sink_test.go), for nothing.
type Causality struct {
	workers int
	held    map[string]Ticket
	last    []uint64 // how many changes each worker had been handed
}

// Ticket is a worker and a count of the changes handed to it.
type Ticket struct {
	Worker int
	N      uint64
}

// NewCausality returns the causality of n workers, nothing held.
func NewCausality(n int) *Causality {
	return &Causality{workers: n, held: map[string]Ticket{}, last: make([]uint64, n)}
}

// Worker is the worker of primary key pk by its hash (RouteByKey): a
// pure function of it, so a restart routes each change where it went
// before.
func (c *Causality) Worker(pk string) int {
	return c.WorkerOf(routeHash(pk))
}

// WorkerOf is the worker of a change whose Route is route.
func (c *Causality) WorkerOf(route uint32) int {
	return int(route % uint32(c.workers))
}

// Routing is how a sink's workers split the keys. It must not change
// while a target holds checkpoints: a change would be skipped by the
// checkpoint of a worker that never had it.
type Routing int

const (
	// RouteByKey: a change goes to the worker of its primary key's hash.
	// Checkpoints written before braid had routings are read this way.
	RouteByKey Routing = iota
	// RouteByRange: a change whose primary key is one integer goes to
	// the worker of its range of RangeKeys keys (in its shard table,
	// with an origin column), others by their key's hash. A B-tree then
	// gets runs of neighbouring keys from one transaction: keys spread
	// over 16 workers split pages half full, and cost MariaDB a third
	// more CPU a row (bench/sink_test.go).
	RouteByRange
	// RouteByWideRange is RouteByRange with ranges of WideRangeKeys
	// keys, a new sink's: where two workers' ranges meet, their
	// transactions commit in either order, and the later one's rows go
	// into the middle of pages the other filled, which splits them half
	// full. A secondary key of ~700 entries a page (the benchmark's
	// order_items.order_id) met another range at every page or two, and
	// ended 0.63 full against the serial replica's 0.88, for 0.6 µs more
	// of the target's CPU a row change; ranges 16 times as wide left it
	// 0.83 full, the target at 0.8-0.9x the replica's CPU a row. Its
	// WorkersRow says so to an older braid too (WorkersRowSeq).
	RouteByWideRange
)

// RangeKeys is how many neighbouring integer keys share a worker under
// RouteByRange, WideRangeKeys under RouteByWideRange.
const (
	RangeKeys     = 1 << rangeShift
	WideRangeKeys = 1 << wideRangeShift
)

const (
	rangeShift     = 10
	wideRangeShift = 14
)

// shift is how many low bits of an integer key its range leaves out, or
// 0 when r does not route by range.
func (r Routing) shift() int {
	switch r {
	case RouteByRange:
		return rangeShift
	case RouteByWideRange:
		return wideRangeShift
	}
	return 0
}

// routeHash is FNV-1a of s.
func routeHash[T string | []byte](s T) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Waits returns what change ch, for worker w, must wait for: the tickets
// of its keys held on other workers, and of a key-changing UPDATE's old
// key's worker (the caller skips those already applied).
func (c *Causality) Waits(w int, ch *Change) []Ticket {
	var out []Ticket
	if ch.Moved {
		if ow := c.WorkerOf(ch.OldRoute); ow != w && c.last[ow] > 0 {
			out = append(out, Ticket{ow, c.last[ow]})
		}
	}
	if len(c.held) == 0 {
		return out
	}
	for i := -1; i < len(ch.Others); i++ {
		k := ch.PK
		if i >= 0 {
			k = ch.Others[i]
		}
		if t, ok := c.held[k]; ok && t.Worker != w {
			out = append(out, t)
		}
	}
	return out
}

// Hold records that ch was handed to worker w as its n'th.
func (c *Causality) Hold(w int, n uint64, ch *Change) {
	c.last[w] = n
	for _, k := range ch.Others {
		c.held[k] = Ticket{w, n}
	}
}

// Len is how many keys are held.
func (c *Causality) Len() int { return len(c.held) }

// Prune forgets the keys whose change is applied: applied[w] is how many
// of worker w's changes are.
func (c *Causality) Prune(applied []uint64) {
	for k, t := range c.held {
		if t.N <= applied[t.Worker] {
			delete(c.held, k)
		}
	}
}
