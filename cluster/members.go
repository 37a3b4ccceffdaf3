package cluster

import (
	"net/http"

	"github.com/braid-cdc/braid/api/wire"
)

// liveMembers serves GET /v1/cluster/members: the base URLs of the live
// nodes' HTTP APIs, this one's included. Any user may ask (GET
// /v1/cluster, which also names destinations and owners, needs an admin):
// a consumer given one node's address learns from it where to fail over
// to. A node that gossip still sees while it fails is listed until it is
// declared dead; the client tries it and moves on.
func (n *Node) liveMembers(w http.ResponseWriter, r *http.Request) {
	scheme := n.httpScheme()
	out := wire.Members{Node: n.cfg.Name, Members: []wire.Member{}}
	for _, m := range n.ms.members() {
		if m.HTTPAddr == "" {
			continue
		}
		out.Members = append(out.Members, wire.Member{Name: m.Name, URL: scheme + "://" + m.HTTPAddr})
	}
	writeJSON(w, http.StatusOK, out)
}
