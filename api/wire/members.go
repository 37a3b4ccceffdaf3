package wire

// Members answers GET /v1/cluster/members, which any user may call: the
// cluster's live nodes as the node that answered sees them, so that a
// client given one node's address learns where else to go when that node
// fails.
type Members struct {
	// Node is the name of the node that answered.
	Node string `json:"node"`
	// Members are the live nodes (gossip sees them alive or merely
	// suspected), the one that answered included, by name.
	Members []Member `json:"members"`
}

// Member is one live node of Members.
type Member struct {
	// Name is the node's --name.
	Name string `json:"name"`
	// URL is the base URL of the node's HTTP API, "http://host:port", or
	// "https://host:port" when the cluster serves it over TLS (every node
	// alike).
	URL string `json:"url"`
}
