package cluster

import (
	"fmt"
	"reflect"
	"testing"
)

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dests   []string
		current map[string]owned
		live    []string
		missing []string
		want    []move
	}{
		{name: "no live node: nothing", dests: []string{"a"}, want: nil},
		{name: "new destinations spread by load, ties by name",
			dests: []string{"a", "b", "c", "d"}, live: []string{"n2", "n1", "n3"},
			want: []move{{Dest: "a", To: "n1"}, {Dest: "b", To: "n2"}, {Dest: "c", To: "n3"}, {Dest: "d", To: "n1"}}},
		{name: "a dead owner's destinations go to the idlest live nodes",
			dests:   []string{"a", "b", "c", "d"},
			current: map[string]owned{"a": {"n1", 5}, "b": {"n2", 6}, "c": {"n3", 7}, "d": {"n1", 8}},
			live:    []string{"n2", "n3"},
			want:    []move{{Dest: "a", From: "n1", To: "n2", Epoch: 5}, {Dest: "d", From: "n1", To: "n3", Epoch: 8}}},
		{name: "a node gone only just keeps its destinations for now",
			dests:   []string{"a", "b", "c"},
			current: map[string]owned{"a": {"n1", 5}, "b": {"n2", 6}, "c": {"n3", 7}},
			live:    []string{"n1", "n3"}, missing: []string{"n2"},
			want: nil},
		{name: "an idle node takes one of the busiest's",
			dests:   []string{"a", "b", "c"},
			current: map[string]owned{"a": {"n1", 1}, "b": {"n1", 2}, "c": {"n2", 3}},
			live:    []string{"n1", "n2", "n3"},
			want:    []move{{Dest: "b", From: "n1", To: "n3", Epoch: 2}}},
		{name: "a returning node takes one destination a round",
			dests:   []string{"a", "b", "c", "d"},
			current: map[string]owned{"a": {"n1", 1}, "b": {"n1", 2}, "c": {"n2", 3}, "d": {"n2", 4}},
			live:    []string{"n1", "n2", "n3"},
			want:    []move{{Dest: "b", From: "n1", To: "n3", Epoch: 2}}},
		{name: "within one of each other: nothing moves",
			dests:   []string{"a", "b", "c"},
			current: map[string]owned{"a": {"n1", 1}, "b": {"n1", 2}, "c": {"n2", 3}},
			live:    []string{"n1", "n2"},
			want:    nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := plan(tc.dests, tc.current, tc.live, tc.missing)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPlanConverges applies plans until there is nothing left to do: every
// destination ends on a live node and loads differ by at most one.
func TestPlanConverges(t *testing.T) {
	for n := 1; n <= 4; n++ {
		for d := 0; d <= 9; d++ {
			var dests []string
			current := map[string]owned{}
			for i := range d {
				name := fmt.Sprintf("d%d", i)
				dests = append(dests, name)
				current[name] = owned{Owner: "n1", Epoch: uint64(i + 1)} // all on n1
			}
			live := []string{"n1"} // and n nodes join it
			for i := range n {
				live = append(live, fmt.Sprintf("n%d", i+2))
			}
			for round := 0; ; round++ {
				moves := plan(dests, current, live, nil)
				if len(moves) == 0 {
					break
				}
				if round > 2*d+2 {
					t.Fatalf("%d nodes, %d destinations: no fixed point after %d rounds", n, d, round)
				}
				for _, m := range moves {
					current[m.Dest] = owned{Owner: m.To, Epoch: current[m.Dest].Epoch + 100}
				}
			}
			load := map[string]int{}
			for _, o := range current {
				load[o.Owner]++
			}
			lo, hi := d, 0
			for _, node := range live {
				lo, hi = min(lo, load[node]), max(hi, load[node])
			}
			if hi-lo > 1 {
				t.Errorf("%d nodes, %d destinations: loads %v", n+1, d, load)
			}
		}
	}
}
