package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/raftstore"
)

// Removing dead voters. A voter that dies still counts in the quorum:
// with two of three dead the cluster has no leader until one comes back.
// braid cluster remove NODE takes a dead node out at once; the leader
// takes out by itself a node dead for longer than Config.ReapDeadAfter
// once at least minVoters voters are left without it (a replacement has
// joined), as Consul's autopilot cleans up dead servers.

// minVoters is the fewest voters automatic removal leaves: a quorum of
// three survives the loss of one more.
const minVoters = 3

// DefaultReapDeadAfter is Config.ReapDeadAfter's default.
const DefaultReapDeadAfter = 72 * time.Hour

// reapDead removes, on the leader, voters dead for longer than
// ReapDeadAfter while at least minVoters voters stay. dead remembers
// since when the leader has missed each node in gossip; a new leader
// starts counting afresh.
func (n *Node) reapDead(ctx context.Context, dead map[string]time.Time) {
	servers, err := n.store.Servers()
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, m := range n.ms.members() {
		live[m.Name] = true
	}
	now := time.Now()
	voters := 0
	for _, s := range servers {
		if !s.NonVoter {
			voters++
		}
	}
	for name := range dead {
		if live[name] || !slices.ContainsFunc(servers, func(s raftstore.Server) bool { return s.ID == name }) {
			delete(dead, name)
		}
	}
	for _, s := range servers {
		if live[s.ID] || s.ID == n.cfg.Name {
			continue
		}
		since, ok := dead[s.ID]
		if !ok {
			dead[s.ID] = now
			continue
		}
		if now.Sub(since) < n.cfg.ReapDeadAfter || voters-1 < minVoters {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := n.store.RemoveServer(rctx, s.ID)
		cancel()
		if err != nil {
			n.log.Warn("could not remove a dead voter", "node", s.ID, "dead_for", now.Sub(since).Round(time.Second), "err", err)
			continue
		}
		voters--
		delete(dead, s.ID)
		n.ms.forget(s.ID)
		n.log.Info("removed a dead voter from raft", "node", s.ID, "dead_for", now.Sub(since).Round(time.Second),
			"voters_left", voters, "after", n.cfg.ReapDeadAfter)
	}
}

// removeNode serves DELETE /v1/cluster/nodes/{name}: it takes a node that
// gossip does not see out of the Raft configuration, on the leader
// (asked through its node port when this node is not it).
func (n *Node) removeNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := n.ms.member(name); ok {
		writeError(w, http.StatusConflict, "node %s is alive: stop it first (braid cluster remove takes out dead nodes only)", name)
		return
	}
	servers, err := n.store.Servers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	if !slices.ContainsFunc(servers, func(s raftstore.Server) bool { return s.ID == name }) {
		writeError(w, http.StatusNotFound, "node %s is not in the raft configuration: its servers are %s", name, serverNames(servers))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if !n.store.IsLeader() {
		n.removeOnLeader(ctx, w, name)
		return
	}
	if err := n.store.RemoveServer(ctx, name); err != nil {
		writeError(w, http.StatusServiceUnavailable, "node %s not removed: %v", name, err)
		return
	}
	n.ms.forget(name)
	n.log.Info("removed a node from raft", "node", name, "by", userName(r))
	servers, _ = n.store.Servers()
	writeJSON(w, http.StatusOK, wire.NodeRemoved{Removed: name, Voters: voterNames(servers)})
}

// removeOnLeader relays a removal to the leader's node port and its
// answer back.
func (n *Node) removeOnLeader(ctx context.Context, w http.ResponseWriter, name string) {
	_, addr := n.store.Leader()
	if addr == "" {
		writeError(w, http.StatusServiceUnavailable, "node %s not removed: the cluster has no leader now: retry, or remove it on a node that sees the leader", name)
		return
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "http://"+addr+"/v1/cluster/nodes/"+name, nil)
	resp, err := n.peerClient.Do(req)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "node %s not removed: asking the leader at %s: %v", name, addr, err)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func userName(r *http.Request) string {
	if u := requestUser(r); u != nil {
		return u.Name
	}
	return "-"
}

func voterNames(servers []raftstore.Server) []string {
	names := []string{}
	for _, s := range servers {
		if !s.NonVoter {
			names = append(names, s.ID)
		}
	}
	return names
}

func serverNames(servers []raftstore.Server) string {
	return fmt.Sprint(voterNames(servers))
}
