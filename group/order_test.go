package group

import (
	"sync"
	"testing"
)

// TestOrderLogConcurrentReads: a replay reads the live run's points while
// the merge takes more (took is lock-free): every source At returns is
// the one taken at that point, never one a later point wrote over it,
// however far behind the reader is.
func TestOrderLogConcurrentReads(t *testing.T) {
	l := newOrderLog(nil)
	const points = 3 * orderLogPoints
	srcOf := func(p uint64) int { return int(p % 7) }
	var wg sync.WaitGroup
	wg.Go(func() {
		for p := uint64(0); p < points; p++ {
			l.took(p, srcOf(p))
		}
		l.end()
	})
	for range 2 {
		wg.Go(func() {
			for {
				next := l.next.Load()
				// The oldest point the log may still hold, and one the
				// merge is about to write over.
				for _, p := range []uint64{next - min(next, orderLogPoints-1), next - min(next, orderLogPoints)} {
					if src, _ := l.At(p); src >= 0 && src != srcOf(p) {
						t.Errorf("At(%d) = %d, want %d (next %d)", p, src, srcOf(p), next)
						return
					}
				}
				if l.ended.Load() {
					return
				}
			}
		})
	}
	wg.Wait()
	if src, ahead := l.At(points - 1); src != srcOf(points-1) || ahead {
		t.Fatalf("At(last) = %d, %v; want %d", src, ahead, srcOf(points-1))
	}
	if src, ahead := l.At(points); src != -1 || ahead {
		t.Fatalf("At(past an ended run) = %d, %v; want -1, false", src, ahead)
	}
	if src, _ := l.At(points - orderLogPoints); src != -1 {
		t.Fatalf("At(a point written over) = %d, want -1", src)
	}
}

// TestOrderLogTakenWakes: a replay waiting for a point wakes when the
// merge takes it, and at once for one taken already or a run ended.
func TestOrderLogTakenWakes(t *testing.T) {
	l := newOrderLog(&Cursor{Taken: 10})
	w := l.taken(10)
	select {
	case <-w:
		t.Fatal("woken before point 10 was taken")
	default:
	}
	l.took(10, 1)
	<-w
	<-l.taken(10)
	w = l.taken(12)
	l.took(11, 0)
	select {
	case <-l.taken(12):
		t.Fatal("point 12 taken with next 12")
	default:
	}
	l.end()
	<-w
}
