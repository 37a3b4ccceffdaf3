package group

import (
	"container/heap"
	"fmt"
	"math"
)

// Key orders transactions across the sources of a destination: commit time
// in microseconds, made monotone per source, then the source's index.
type Key struct {
	Time   int64
	Source int
}

// Less reports whether k comes before o.
func (k Key) Less(o Key) bool {
	if k.Time != o.Time {
		return k.Time < o.Time
	}
	return k.Source < o.Source
}

func (k Key) String() string { return fmt.Sprintf("%d/%d", k.Time, k.Source) }

// Never is a watermark time no commit reaches: a source that has ended.
const Never = math.MaxInt64

// Merger decides the order in which the sources' transactions go out. It is
// pure: it holds no transactions (the caller keeps them in per-source
// queues), reads no clock and does no I/O. For each source the caller says
// what the source's next transaction is (Offer) and what no later
// transaction can precede (Watermark); Next names the source whose offered
// transaction goes next, and Done consumes it.
//
// In strict order a transaction goes only when every other source has either
// offered one with a larger key or promised, by its watermark, that it will
// not offer a smaller one. The output is then sorted by key whatever the
// order of the calls: a pure function of the sources' transactions. In
// per-source order the smallest offered key goes at once.
//
// A Merger is not safe for concurrent use.
type Merger struct {
	strict bool
	last   []int64 // per source: the last key time offered (keys are monotone)
	wm     []int64 // per source: no later key time below this
	head   []*Key  // per source: the offered transaction's key, if any
	heap   keyHeap // the offered keys
	out    Key     // the last key that went out
	outAny bool
	late   int
	under  int
	// hold marks sources that bound nothing for now (see Hold).
	hold []bool
	// withdrawn marks sources whose offered transaction was taken back
	// (Withdraw): offered again, it is not counted again.
	withdrawn []bool
}

// NewMerger returns a merger of n sources. strict selects commit-time order
// across sources; otherwise each source's transactions go as they come.
func NewMerger(n int, strict bool) *Merger {
	m := &Merger{strict: strict, last: make([]int64, n), wm: make([]int64, n), head: make([]*Key, n), hold: make([]bool, n), withdrawn: make([]bool, n)}
	for i := range m.last {
		m.last[i] = math.MinInt64
		m.wm[i] = math.MinInt64
	}
	return m
}

// Restore sets source src's last key time, as saved in a cursor, so keys
// computed after a restart equal those of the first run. That key went
// out before the cursor: a transaction offered below it after the
// restart is late (Behind) as it would have been in the first run, where
// the others' watermarks let it out ahead of a transaction that came
// only after the restart.
func (m *Merger) Restore(src int, last int64) {
	m.last[src] = last
	if last == math.MinInt64 {
		return // the source had sent nothing
	}
	if k := (Key{Time: last, Source: src}); !m.outAny || m.out.Less(k) {
		m.out, m.outAny = k, true
	}
}

// Last returns source src's last key time, to be saved in a cursor.
func (m *Merger) Last(src int) int64 { return m.last[src] }

// Offer says that source src's next transaction committed at commit (µs)
// and returns its key: the commit time, raised to the source's previous key
// so a source's keys never decrease (a clock stepped back cannot reorder a
// source). The source must not have an offered transaction already.
func (m *Merger) Offer(src int, commit int64) Key { return m.offer(src, commit, true) }

// OfferMarker offers source src's marker transaction (change.Event.Lost):
// its key is the source's last, where the source continued; it may be
// below keys out already (the source waited for an operator), which is
// no clock's fault and not counted as late or undercut.
func (m *Merger) OfferMarker(src int) Key { return m.offer(src, math.MinInt64, false) }

func (m *Merger) offer(src int, commit int64, count bool) Key {
	if m.head[src] != nil {
		panic(fmt.Sprintf("group: source %d offered twice", src))
	}
	t := max(commit, m.last[src])
	m.last[src] = t
	k := Key{Time: t, Source: src}
	if m.withdrawn[src] {
		count, m.withdrawn[src] = false, false // counted when first offered
	}
	if count && m.strict && t < m.wm[src] {
		m.under++
	}
	if count && m.Behind(k) {
		// The source's clock ran further behind braid's than the
		// watermark allowed: it goes out at once, out of order, and is
		// counted. (Per-source order promises no order across sources,
		// so nothing there is late.)
		m.late++
	}
	m.head[src] = &k
	heap.Push(&m.heap, k)
	return k
}

// Hold says whether source src's next transactions may wait (on) while
// the others' go: the source then bounds nothing, as if its watermark
// were Never. The merge holds a source whose queue is headed by a
// snapshot chunk that goes out at a later point of the stream: what the
// others emit until then went out before it the first time.
func (m *Merger) Hold(src int, on bool) { m.hold[src] = on }

// Watermark says that source src will offer no transaction committed
// before t (µs); Never when the source has ended. Watermarks only rise.
func (m *Merger) Watermark(src int, t int64) {
	m.wm[src] = max(m.wm[src], t)
}

// Next returns the source whose offered transaction goes next, if one may
// go now.
func (m *Merger) Next() (src int, key Key, ok bool) {
	if m.heap.Len() == 0 {
		return -1, Key{}, false
	}
	k := m.heap[0]
	if m.strict {
		for j := range m.head {
			if j == k.Source || m.head[j] != nil || m.hold[j] {
				continue // an offered key is at least k: the heap says so
			}
			// j's next key is at least (max(wm, last), j).
			if !k.Less(Key{Time: max(m.wm[j], m.last[j]), Source: j}) {
				return -1, Key{}, false
			}
		}
	}
	return k.Source, k, true
}

// Done consumes source src's offered transaction, which Next returned.
func (m *Merger) Done(src int) {
	k := m.head[src]
	if k == nil {
		panic(fmt.Sprintf("group: source %d has nothing offered", src))
	}
	m.Withdraw(src)
	m.withdrawn[src] = false // went out, not taken back
	if !m.outAny || m.out.Less(*k) {
		m.out, m.outAny = *k, true
	}
}

// Offered reports whether source src has an offered transaction, and
// its key.
func (m *Merger) Offered(src int) (Key, bool) {
	if k := m.head[src]; k != nil {
		return *k, true
	}
	return Key{}, false
}

// Withdraw takes back source src's offered transaction, which goes out
// at another point (a late one a replay learns of after offering it):
// the source's last key stays, so offered again it gets the same key.
func (m *Merger) Withdraw(src int) {
	if m.head[src] == nil {
		return
	}
	m.withdrawn[src] = true
	for i, h := range m.heap {
		if h.Source == src {
			heap.Remove(&m.heap, i)
			break
		}
	}
	m.head[src] = nil
}

// Behind reports whether key k, offered, is below a key that went out
// already: a late transaction, in strict order.
func (m *Merger) Behind(k Key) bool { return m.strict && m.outAny && k.Less(m.out) }

// Undercut counts transactions offered, in strict order, below their own
// source's watermark: the source promised too much (a clock behind by
// more than the skew allowed, a stale heartbeat). Each could have gone
// out late; those the others' keys had passed did (Late).
func (m *Merger) Undercut() int { return m.under }

// Late counts transactions offered, in strict order, below a key that had
// already gone out.
func (m *Merger) Late() int { return m.late }

// Waiting returns the sources strict order waits for: those without an
// offered transaction whose watermark is below the smallest offered key.
func (m *Merger) Waiting() []int {
	if !m.strict || m.heap.Len() == 0 {
		return nil
	}
	k := m.heap[0]
	var w []int
	for j := range m.head {
		if j != k.Source && m.head[j] == nil && !m.hold[j] && !k.Less(Key{Time: max(m.wm[j], m.last[j]), Source: j}) {
			w = append(w, j)
		}
	}
	return w
}

// keyHeap is a min-heap of keys.
type keyHeap []Key

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return h[i].Less(h[j]) }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(Key)) }
func (h *keyHeap) Pop() any {
	old := *h
	k := old[len(old)-1]
	*h = old[:len(old)-1]
	return k
}
