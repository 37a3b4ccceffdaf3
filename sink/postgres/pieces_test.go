package postgres

import (
	"fmt"
	"slices"
	"testing"

	"github.com/braid-cdc/braid/sink"
)

// TestPieces: a run is cut into statements of max rows, then powers of
// two, and never two changes of one key in a statement (ON CONFLICT DO
// UPDATE affects a row once a statement).
func TestPieces(t *testing.T) {
	run := func(keys ...string) []sink.Change {
		var cs []sink.Change
		for _, k := range keys {
			cs = append(cs, sink.Change{PK: k})
		}
		return cs
	}
	sizes := func(ps [][]sink.Change) []int {
		var out []int
		for _, p := range ps {
			out = append(out, len(p))
		}
		return out
	}
	many := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprint(i))
		}
		return out
	}
	for _, c := range []struct {
		keys []string
		max  int
		want []int
	}{
		{many(1), 100, []int{1}},
		{many(7), 100, []int{4, 2, 1}},
		{many(100), 100, []int{100}},
		{many(237), 100, []int{100, 100, 32, 4, 1}},
		{[]string{"a", "b", "a", "c"}, 100, []int{2, 2}},         // a twice: cut before the second
		{[]string{"a", "a", "a"}, 100, []int{1, 1, 1}},           // one row updated three times
		{[]string{"a", "b", "c", "a", "d"}, 100, []int{2, 2, 1}}, // a, b | c, a | d
	} {
		if got := sizes(pieces(run(c.keys...), c.max)); !slices.Equal(got, c.want) {
			t.Errorf("pieces of %d keys %v, max %d: %v, want %v", len(c.keys), c.keys[:min(5, len(c.keys))], c.max, got, c.want)
		}
	}
}
