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

// leaderLoop runs the leader's duties on whichever node is leader.
func (n *Node) leaderLoop(ctx context.Context) {
	t := time.NewTicker(leaderTick)
	defer t.Stop()
	dead := map[string]time.Time{} // reapDead's
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.ms.changes():
		}
		if !n.store.IsLeader() {
			clear(dead)
			continue
		}
		n.addVoters(ctx)
		n.reapDead(ctx, dead)
		n.assign(ctx)
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

// assign applies plan's moves, each conditional on the epoch it read.
func (n *Node) assign(ctx context.Context) {
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
	for _, mv := range plan(dests, current, live) {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		epoch, err := n.store.AssignIf(actx, mv.Dest, mv.To, mv.Epoch)
		cancel()
		if err != nil {
			n.log.Warn("assignment failed", "dest", mv.Dest, "to", mv.To, "err", err)
			continue
		}
		n.log.Info("destination assigned", "dest", mv.Dest, "from", mv.From, "to", mv.To, "epoch", epoch)
	}
}
