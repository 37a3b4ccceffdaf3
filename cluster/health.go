package cluster

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/raftstore"
)

// Health endpoints, for load balancers and orchestrators; they need no
// credential and tell nothing but the node's own state.
//
//	GET /healthz   200 while the process serves HTTP
//	GET /readyz    200 once the node is in the Raft configuration, knows
//	               a leader and serves every destination it owns; else 503
//	               with the reasons

func (n *Node) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.Health{Node: n.cfg.Name, Ready: true})
}

func (n *Node) readyz(w http.ResponseWriter, r *http.Request) {
	h := wire.Health{Node: n.cfg.Name, Reasons: n.notReady()}
	h.Ready = len(h.Reasons) == 0
	status := http.StatusOK
	if !h.Ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}

// notReady says why the node is not ready; none when it is.
func (n *Node) notReady() []string {
	var why []string
	servers, err := n.store.Servers()
	switch {
	case err != nil:
		why = append(why, fmt.Sprintf("raft configuration unknown: %v", err))
	case !slices.ContainsFunc(servers, func(s raftstore.Server) bool { return s.ID == n.cfg.Name }):
		why = append(why, "not in the raft configuration yet: joining")
	}
	if id, _ := n.store.Leader(); id == "" {
		why = append(why, "no raft leader known")
	}
	for _, a := range n.store.Assignments() {
		if a.Owner != n.cfg.Name {
			continue
		}
		if err := n.Serving(a.Destination); err != nil {
			why = append(why, fmt.Sprintf("destination %s: %v", a.Destination, err))
		}
	}
	return why
}
