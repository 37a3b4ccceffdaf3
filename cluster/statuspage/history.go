package statuspage

import (
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/wire"
)

// Defaults of a History: a sample every 5 s for 10 min, 120 a source.
const (
	DefaultEvery  = 5 * time.Second
	DefaultWindow = 10 * time.Minute
)

// History keeps each destination's per-source lag over a recent window,
// so that a page loaded now can show the last minutes. Time comes in as
// values: History reads no clock, and the same Adds give the same
// Series.
type History struct {
	every, window time.Duration

	mu    sync.Mutex
	dests map[string][]point // by destination, oldest first
}

// point is one destination's sources' lags at one moment.
type point struct {
	at   time.Time
	lags []sourceLag // in the state's source order
}

type sourceLag struct {
	source string
	lagMs  *int64
}

// NewHistory keeps a sample about every `every` for `window` (zero: the
// defaults).
func NewHistory(every, window time.Duration) *History {
	if every <= 0 {
		every = DefaultEvery
	}
	if window <= 0 {
		window = DefaultWindow
	}
	return &History{every: every, window: window, dests: map[string][]point{}}
}

// Every is the sampling interval.
func (h *History) Every() time.Duration { return h.every }

// Window is how far back History keeps samples.
func (h *History) Window() time.Duration { return h.window }

// Add records the lag of each of dest's sources at `at` and drops its
// samples older than the window. It records nothing and reports false
// when dest's newest sample is less than half an interval before `at`
// (or after it).
func (h *History) Add(dest string, at time.Time, sources []wire.SourceState) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	pts := h.dests[dest]
	if n := len(pts); n > 0 && at.Sub(pts[n-1].at) < h.every/2 {
		return false
	}
	p := point{at: at, lags: make([]sourceLag, len(sources))}
	for i, s := range sources {
		p.lags[i] = sourceLag{source: s.Name}
		// How far reading trails the source: 0 for an idle one, however
		// old its last commit; missing while it was never read.
		if s.Connected || s.BehindMs > 0 || s.LagMs != nil {
			v := s.BehindMs
			p.lags[i].lagMs = &v
		}
	}
	pts = append(pts, p)
	first := 0
	for first < len(pts) && pts[first].at.Before(at.Add(-h.window)) {
		first++
	}
	h.dests[dest] = pts[:copy(pts, pts[first:])]
	return true
}

// Keep forgets every destination not named in keep (deleted ones).
func (h *History) Keep(keep map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.dests {
		if !keep[name] {
			delete(h.dests, name)
		}
	}
}

// Series returns dest's lag history, one series a source in the order of
// its newest sample's sources, each oldest first; an empty slice before
// the first sample. A source missing from a sample has no sample then.
func (h *History) Series(dest string) []wire.LagSeries {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []wire.LagSeries{}
	pts := h.dests[dest]
	if len(pts) == 0 {
		return out
	}
	index := map[string]int{}
	for _, l := range pts[len(pts)-1].lags {
		if _, dup := index[l.source]; !dup {
			index[l.source] = len(out)
			out = append(out, wire.LagSeries{Source: l.source, Samples: []wire.LagSample{}})
		}
	}
	for _, p := range pts {
		for _, l := range p.lags {
			i, ok := index[l.source]
			if !ok {
				continue // a source the destination no longer has
			}
			s := wire.LagSample{Time: p.at}
			if l.lagMs != nil {
				v := *l.lagMs
				s.LagMs = &v
			}
			out[i].Samples = append(out[i].Samples, s)
		}
	}
	return out
}
