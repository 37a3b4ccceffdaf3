package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// peak is the most memory a node was seen to hold.
type peak struct {
	rss    int64         // bytes, VmRSS
	anon   int64         // bytes, RssAnon: what memoryBound bounds
	anonAt time.Duration // when anon was seen
}

// sampleMemory keeps each node's peak memory, every second until ctx
// ends.
func (r *runState) sampleMemory(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range r.dep.cluster.Nodes {
			pid := n.PID()
			if pid == 0 || !n.Running() {
				continue
			}
			rss, anon := procMemory(pid)
			if rss == 0 {
				continue
			}
			r.peakMu.Lock()
			p := r.peaks[n.Name]
			if p == nil {
				p = &peak{}
				r.peaks[n.Name] = p
			}
			p.rss = max(p.rss, rss)
			if anon > p.anon {
				p.anon, p.anonAt = anon, r.clock()
			}
			r.peakMu.Unlock()
		}
	}
}

// memory is each node's peak against its bound, for the checks.
func (r *runState) memory() []Memory {
	r.peakMu.Lock()
	defer r.peakMu.Unlock()
	var out []Memory
	for name, p := range r.peaks {
		out = append(out, Memory{Node: name, Peak: p.anon, At: p.anonAt, Bound: memoryBound})
	}
	slices.SortFunc(out, func(a, b Memory) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// procMemory is a process's resident memory (VmRSS) and the anonymous
// part of it (RssAnon), in bytes; 0 if unknown.
func procMemory(pid int) (rss, anon int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "RssAnon:":
			anon = kb << 10
		}
	}
	return rss, anon
}
