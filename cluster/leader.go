package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/braid-cdc/braid/raftstore"
)

// leaderTick is how often the Raft leader reconciles: it adds live nodes
// missing from the Raft configuration and moves destinations (see plan).
// Membership changes wake it at once.
const leaderTick = 500 * time.Millisecond

// orphanAfter is how long an owner must be gone from the live members
// before its destinations move. A crashed node is gone for good, and this
// adds a second to its takeover (the leader wakes for it, not a tick
// later); but when a cut-off node comes back, its stale view can make the
// others believe a live node dead for a moment (memberlist takes a
// "dead" gossip until the node refutes it), and its destinations must not
// move for that.
const orphanAfter = time.Second

// leaderLoop runs the leader's duties on whichever node is leader.
func (n *Node) leaderLoop(ctx context.Context) {
	t := time.NewTicker(leaderTick)
	defer t.Stop()
	dead := map[string]time.Time{} // reapDead's
	gone := map[string]time.Time{} // assign's: since when an owner is not live
	// graced fires when the first owner gone only just has been gone for
	// orphanAfter, so that its destinations move then, not a tick later.
	graced := time.NewTimer(0)
	defer graced.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-graced.C:
		case <-n.ms.changes():
		}
		if !n.store.IsLeader() {
			clear(dead)
			clear(gone)
			continue
		}
		n.addVoters(ctx)
		n.reapDead(ctx, dead)
		if wait := n.assign(ctx, gone); wait > 0 {
			graced.Reset(wait)
		}
	}
}

// addVoters adds live nodes that are not in the Raft configuration (a node
// joining an existing cluster) as voters.
func (n *Node) addVoters(ctx context.Context) {
	servers, err := n.store.Servers()
	if err != nil {
		return
	}
	for _, m := range n.ms.members() {
		if slices.ContainsFunc(servers, func(s raftstore.Server) bool { return s.ID == m.Name }) || m.RaftAddr == "" {
			continue
		}
		if err := n.proveMember(ctx, m); err != nil {
			n.log.Warn("not adding a gossip member to raft: it did not prove its name on its raft port", "node", m.Name, "raft", m.RaftAddr, "err", err)
			continue
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := n.store.AddVoter(actx, m.Name, m.RaftAddr)
		cancel()
		if err != nil {
			n.log.Warn("could not add node to raft", "node", m.Name, "raft", m.RaftAddr, "err", err)
			continue
		}
		n.log.Info("added node to raft", "node", m.Name, "raft", m.RaftAddr)
	}
}

// assign applies plan's moves, each conditional on the epoch it read;
// gone holds since when each owner not live has been gone (orphanAfter).
// It returns how long until the first owner kept for now has been gone
// for orphanAfter (0: none is).
func (n *Node) assign(ctx context.Context, gone map[string]time.Time) (wait time.Duration) {
	var dests []string
	for _, d := range n.store.Destinations() {
		dests = append(dests, d.Spec.Name)
	}
	current := map[string]owned{}
	for _, a := range n.store.Assignments() {
		current[a.Destination] = owned{Owner: a.Owner, Epoch: a.Epoch}
	}
	var live []string
	for _, m := range n.ms.members() {
		live = append(live, m.Name)
	}
	now := time.Now()
	var missing []string
	for _, o := range current {
		if o.Owner == "" || slices.Contains(live, o.Owner) {
			delete(gone, o.Owner)
			continue
		}
		if _, ok := gone[o.Owner]; !ok {
			gone[o.Owner] = now
		}
		if left := orphanAfter - now.Sub(gone[o.Owner]); left > 0 && !slices.Contains(missing, o.Owner) {
			missing = append(missing, o.Owner)
			if wait == 0 || left < wait {
				wait = left
			}
		}
	}
	for _, mv := range plan(dests, current, live, missing) {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		epoch, err := n.store.AssignIf(actx, mv.Dest, mv.To, mv.Epoch)
		cancel()
		if err != nil {
			n.log.Warn("assignment failed", "dest", mv.Dest, "to", mv.To, "err", err)
			continue
		}
		n.log.Info("destination assigned", "dest", mv.Dest, "from", mv.From, "to", mv.To, "epoch", epoch)
	}
	return wait
}
