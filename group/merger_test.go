package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestMergerDatadriven runs the scripts in testdata/merger: each case says
// why it matters. Commands:
//
//	init n=3 strict=true
//	offer src=0 commit=100      prints the key
//	wm src=1 t=110              t may be "never"
//	next                        prints the source that may go, or whom it waits for
//	done src=0
//	drain                       next+done until nothing may go; prints each key
func TestMergerDatadriven(t *testing.T) {
	datadriven.RunTest(t, "testdata/merger", func(t *testing.T, d *datadriven.TestData) string {
		return runMergerCmd(t, d)
	})
}

var ddMerger *Merger

func runMergerCmd(t *testing.T, d *datadriven.TestData) string {
	arg := func(name string) int64 {
		var s string
		d.ScanArgs(t, name, &s)
		if s == "never" {
			return Never
		}
		var v int64
		fmt.Sscan(s, &v)
		return v
	}
	switch d.Cmd {
	case "init":
		var n int
		strict := true
		d.ScanArgs(t, "n", &n)
		if d.HasArg("strict") {
			d.ScanArgs(t, "strict", &strict)
		}
		ddMerger = NewMerger(n, strict)
		return ""
	case "offer":
		return ddMerger.Offer(int(arg("src")), arg("commit")).String()
	case "wm":
		ddMerger.Watermark(int(arg("src")), arg("t"))
		return ""
	case "next":
		if src, k, ok := ddMerger.Next(); ok {
			return fmt.Sprintf("go %d (%s)", src, k)
		}
		return fmt.Sprintf("wait for %v", ddMerger.Waiting())
	case "done":
		ddMerger.Done(int(arg("src")))
		return ""
	case "drain":
		var out []string
		for {
			src, k, ok := ddMerger.Next()
			if !ok {
				break
			}
			ddMerger.Done(src)
			out = append(out, k.String())
		}
		if w := ddMerger.Waiting(); len(w) > 0 {
			out = append(out, fmt.Sprintf("wait for %v", w))
		}
		if ddMerger.Late() > 0 {
			out = append(out, fmt.Sprintf("late %d", ddMerger.Late()))
		}
		return strings.Join(out, "\n")
	}
	t.Fatalf("unknown command %s", d.Cmd)
	return ""
}

// TestMergerRandomized checks the contract on random inputs: however the
// offers, watermarks and decisions interleave, strict order emits every
// transaction exactly once, each source's in its order, and all sorted by
// key — the same output a dumb reference (a stable sort) gives. Inputs
// include equal commit times, clocks stepping back, long and empty sources.
func TestMergerRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for iter := 0; iter < 500; iter++ {
		n := 1 + rng.IntN(5)
		commits := make([][]int64, n)
		for s := range commits {
			length := rng.IntN(30)
			if rng.IntN(5) == 0 {
				length = 0 // an empty source
			}
			c := int64(rng.IntN(20))
			for range length {
				c += int64(rng.IntN(5)) - 1 // steps of -1..3: equal and backward times
				commits[s] = append(commits[s], c)
			}
		}
		want := reference(commits)
		for _, strict := range []bool{true, false} {
			got := simulate(rng, commits, strict)
			if strict && !slices.Equal(got, want) {
				t.Fatalf("seed %d iter %d: strict output\n%v\nwant\n%v\ninputs %v", seed, iter, got, want, commits)
			}
			if !strict {
				// per-source: every transaction once, each source in order.
				perSource := make([][]Key, n)
				for _, k := range got {
					perSource[k.Source] = append(perSource[k.Source], k)
				}
				for s := range perSource {
					var ws []Key
					for _, k := range want {
						if k.Source == s {
							ws = append(ws, k)
						}
					}
					if !slices.Equal(perSource[s], ws) {
						t.Fatalf("seed %d iter %d: per-source order of source %d: %v want %v", seed, iter, s, perSource[s], ws)
					}
				}
			}
		}
	}
}

// reference computes the merged order directly: monotone keys per source,
// then a stable sort by key.
func reference(commits [][]int64) []Key {
	var all []Key
	for s, cs := range commits {
		last := int64(-1 << 62)
		for _, c := range cs {
			last = max(last, c)
			all = append(all, Key{Time: last, Source: s})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Less(all[j]) })
	return all
}

// simulate feeds the merger in a random interleaving: sources offer their
// next transaction at random moments, publish random valid watermarks (never
// above their next commit time), and the consumer asks for decisions at
// random moments.
func simulate(rng *rand.Rand, commits [][]int64, strict bool) []Key {
	n := len(commits)
	m := NewMerger(n, strict)
	next := make([]int, n)     // next transaction index per source
	offered := make([]bool, n) // has an offer outstanding
	var out []Key
	total := 0
	for _, cs := range commits {
		total += len(cs)
	}
	for steps := 0; len(out) < total; steps++ {
		if steps > 100000 {
			panic("no progress")
		}
		s := rng.IntN(n)
		switch rng.IntN(3) {
		case 0: // the source offers its next transaction
			if !offered[s] && next[s] < len(commits[s]) {
				m.Offer(s, commits[s][next[s]])
				offered[s] = true
			}
		case 1: // the source publishes a watermark no higher than its future
			if next[s] >= len(commits[s]) {
				m.Watermark(s, Never)
			} else if !offered[s] {
				lo := commits[s][next[s]]
				for _, c := range commits[s][next[s]:] {
					lo = min(lo, c)
				}
				m.Watermark(s, lo-int64(rng.IntN(3)))
			}
		case 2: // the consumer takes what may go
			if src, k, ok := m.Next(); ok {
				m.Done(src)
				out = append(out, k)
				offered[src] = false
				next[src]++
			}
		}
	}
	return out
}

// TestMergerWithdrawCountsOnce: a transaction offered below a key out
// (late), taken back (Withdraw: a replay learnt it goes out at another
// point) and offered again is counted late once, and its key is the
// same.
func TestMergerWithdrawCountsOnce(t *testing.T) {
	m := NewMerger(2, true)
	m.Watermark(0, 100)
	m.Offer(1, 50)
	if src, _, ok := m.Next(); !ok || src != 1 {
		t.Fatalf("Next = %d, %v; want source 1", src, ok)
	}
	m.Done(1)
	k := m.Offer(0, 40) // below (50, 1): late
	m.Withdraw(0)
	if again := m.Offer(0, 40); again != k || m.Late() != 1 {
		t.Errorf("offered again: key %v (first %v), %d late; want the same key, 1 late", again, k, m.Late())
	}
}
