package cluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/cluster/clustertest"
)

// TestPartitionHealsByItself: a node cut off for longer than gossip keeps
// reaching dead nodes (GossipDeadTime, shortened here from 30 s to 1 s)
// is found again once the partition ends, with nobody calling Join: the
// nodes rejoin the ones they once saw (serf's reconnect). Before, such a
// node stayed out until it was restarted.
func TestPartitionHealsByItself(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.WithConfig(func(cfg *cluster.Config) { cfg.GossipDeadTime = time.Second }))
	n := c.Followers()[0]
	n.Isolate()
	c.WaitFor("the others to declare "+n.Name+" dead", func() (bool, string) {
		for _, o := range c.Connected() {
			if slices.Contains(o.Members(), n.Name) {
				return false, o.Name + " still sees " + n.Name
			}
		}
		return len(n.Members()) == 1, n.Name + " still sees others"
	})
	time.Sleep(3 * time.Second) // well past GossipDeadTime: memberlist alone gives up
	began := time.Now()
	n.Reconnect()
	t.Logf("%s found again %v after the partition ended", n.Name, time.Since(began))
	c.EnsureSame()
}
