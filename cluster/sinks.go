package cluster

import (
	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/sink/sinkrun"
)

// sinkAdmin is the native API's way to the running sinks of a
// destination this node runs (nil when it runs none of dest): a sink's
// detail and braid sink verify are answered by the owner, where the
// sinks and the sources' passwords are.
func (n *Node) sinkAdmin(dest string) native.SinkAdmin {
	if s, ok := n.sinks.Load(dest); ok {
		return s.(*sinkrun.Set)
	}
	return nil
}
