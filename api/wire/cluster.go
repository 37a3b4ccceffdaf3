package wire

import "encoding/json"

// ClusterStatus answers GET /v1/cluster: the cluster's nodes and
// destinations as the node that answered sees them.
type ClusterStatus struct {
	// Node is the name of the node that answered.
	Node string `json:"node"`
	// Leader is the Raft leader's name; "" while there is none (an
	// election, or a node cut off from the others).
	Leader string `json:"leader"`
	// Nodes are every Raft server and every live gossip member, by name.
	Nodes []NodeStatus `json:"nodes"`
	// Destinations are every destination stored in Raft, in the store's
	// order.
	Destinations []DestinationInfo `json:"destinations"`
}

// A node's State in a NodeStatus.
const (
	// NodeAlive: gossip sees the node.
	NodeAlive = "alive"
	// NodeFailed: a Raft server that gossip does not see (down, cut off,
	// or not yet joined).
	NodeFailed = "failed"
)

// A node's Raft role in a NodeStatus.
const (
	RaftLeader   = "leader"
	RaftVoter    = "voter"
	RaftNonvoter = "nonvoter"
)

// NodeStatus is one node of a ClusterStatus: a Raft server, a live gossip
// member, or both.
type NodeStatus struct {
	// Name is the node's --name.
	Name string `json:"name"`
	// State is NodeAlive when gossip sees the node, else NodeFailed.
	State string `json:"state"`
	// Raft is the node's role in the Raft configuration: RaftLeader,
	// RaftVoter or RaftNonvoter; "" when it is not in it (yet).
	Raft string `json:"raft"`
	// RaftAddr is the node's Raft address, "host:port".
	RaftAddr string `json:"raftAddr"`
	// HTTPAddr is the node's HTTP API, "host:port"; missing while gossip
	// does not see the node.
	HTTPAddr string `json:"httpAddr,omitempty"`
	// CanalAddr is the node's canal port, "host:port"; missing while gossip
	// does not see the node, or when it serves none.
	CanalAddr string `json:"canalAddr,omitempty"`
	// Destinations counts the destinations assigned to the node.
	Destinations int `json:"destinations"`
}

// DestinationInfo is a destination as the cluster stores it, with its
// owner and, when the owner answered, its progress: GET
// /v1/destinations/{name}/spec, an entry of ClusterStatus, and the answer
// to POST /v1/destinations (which has only Name and Spec).
type DestinationInfo struct {
	// Name is the destination's name.
	Name string `json:"name"`
	// Owner is the node the Raft leader assigned the destination to; ""
	// while it has none.
	Owner string `json:"owner"`
	// Epoch is the assignment's epoch: it grows with every change of owner,
	// and an owner's writes are fenced by it.
	Epoch uint64 `json:"epoch"`
	// Spec is the destination's spec as stored, with defaults filled in and
	// each `latest` start pinned to the position it had at creation: a
	// JSON object in the form of package spec's Spec, which parses it
	// (wire leaves the spec's shape to its one definition there).
	Spec json.RawMessage `json:"spec"`
	// Seq is the seq of the last transaction the owner's merge emitted (0
	// when the owner did not answer).
	Seq uint64 `json:"seq"`
	// Sources are the owner's SourceStates; missing when it did not answer.
	Sources []SourceState `json:"sources,omitempty"`
	// Clients are the owner's ClientStates; missing when it did not answer
	// or has none.
	Clients []ClientState `json:"clients,omitempty"`
	// StateError says why Seq, Sources and Clients are missing: no owner,
	// an owner not reachable, or its error; "" when it answered.
	StateError string `json:"stateError,omitempty"`
}

// Deleted answers DELETE /v1/destinations/{name}.
type Deleted struct {
	// Deleted is the name of the destination deleted.
	Deleted string `json:"deleted"`
}

// NodeRemoved answers DELETE /v1/cluster/nodes/{name}.
type NodeRemoved struct {
	// Removed is the name of the node taken out of the Raft configuration.
	Removed string `json:"removed"`
	// Voters are the voters left, by name.
	Voters []string `json:"voters"`
}

// Health answers GET /healthz and GET /readyz.
type Health struct {
	// Node is the node that answered.
	Node string `json:"node"`
	// Ready: /healthz, the process serves; /readyz, the node has joined
	// the Raft configuration, knows a leader, and serves every destination
	// it owns. The answer's status is 200 when Ready, else 503.
	Ready bool `json:"ready"`
	// Reasons say why not, one line each.
	Reasons []string `json:"reasons,omitempty"`
}
