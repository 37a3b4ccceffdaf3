package cluster

import (
	"slices"
	"strings"
)

// move is one change of owner the Raft leader makes: Dest goes to To;
// Epoch is the assignment's epoch it replaces (the write is conditional on
// it, so two leaders' plans cannot both apply).
type move struct {
	Dest, From, To string
	Epoch          uint64
}

// owned is a destination's current assignment.
type owned struct {
	Owner string
	Epoch uint64
}

// plan decides the leader's next moves: every destination without a live
// owner goes to the live node running the fewest (ties by name), then, if
// the busiest live node runs two or more destinations more than the
// idlest, one of its destinations moves there (one a round, so a node
// that comes back takes its share gradually, one short handover at a
// time). A destination whose owner is in missing (gone from the live
// nodes, but only just) stays where it is for now. It is pure: the same
// inputs give the same moves.
func plan(dests []string, current map[string]owned, live, missing []string) []move {
	if len(live) == 0 {
		return nil
	}
	live = slices.Sorted(slices.Values(live))
	load := map[string][]string{} // live node → its destinations
	for _, n := range live {
		load[n] = nil
	}
	var orphans []string
	for _, d := range slices.Sorted(slices.Values(dests)) {
		o := current[d]
		if _, ok := load[o.Owner]; ok && o.Owner != "" {
			load[o.Owner] = append(load[o.Owner], d)
		} else if !slices.Contains(missing, o.Owner) || o.Owner == "" {
			orphans = append(orphans, d)
		}
	}
	idlest := func() string {
		best := live[0]
		for _, n := range live[1:] {
			if len(load[n]) < len(load[best]) {
				best = n
			}
		}
		return best
	}
	var moves []move
	for _, d := range orphans {
		to := idlest()
		moves = append(moves, move{Dest: d, From: current[d].Owner, To: to, Epoch: current[d].Epoch})
		load[to] = append(load[to], d)
	}
	busiest := live[0]
	for _, n := range live[1:] {
		if len(load[n]) > len(load[busiest]) {
			busiest = n
		}
	}
	if to := idlest(); len(load[busiest])-len(load[to]) > 1 {
		// The busiest node's last destination by name moves.
		ds := load[busiest]
		slices.SortFunc(ds, strings.Compare)
		d := ds[len(ds)-1]
		moves = append(moves, move{Dest: d, From: busiest, To: to, Epoch: current[d].Epoch})
	}
	return moves
}
