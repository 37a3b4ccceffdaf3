package main

import (
	"fmt"
	"net"
	"strconv"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
)

// The demo's braid server child processes are braidproc.Nodes (made in
// startNodes), each reporting its exit on the demo's deaths channel.

// startNode runs node n, or runs it again on its data directory, joining
// the demo's other nodes.
func (d *demo) startNode(n *braidproc.Node) error {
	var join []string
	for _, o := range d.nodes {
		if o != n {
			join = append(join, net.JoinHostPort("127.0.0.1", strconv.Itoa(o.GossipPort)))
		}
	}
	if err := n.Start(d.bin, join); err != nil {
		return fmt.Errorf("starting node %s: %w", n.Name, err)
	}
	return nil
}
