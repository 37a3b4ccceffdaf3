// Package clustertest runs a braid cluster inside one test process, for
// fast tests of assignment, leases and fencing: real cluster.Node values
// (real Raft with bolt files in t.TempDir, real memberlist gossip, the
// real HTTP API) on loopback ports from internal/ports, in the spirit of
// hashicorp/raft's testing.go.
//
//	c := clustertest.Start(t, 3)          // formed, gossip meshed, a leader agreed
//	c.Create(specYAML)                    // POST /v1/destinations through a node
//	owner, epoch := c.Owner("shop")       // the nodes agree, and the owner serves
//	owner.Crash()                         // the others see it fail
//	next, _ := c.WaitOwner("shop", func(n *clustertest.Node, e uint64) bool { return n != owner && e > epoch })
//	owner.Restart()
//
// Leader, Followers, EnsureSame, Owner and WaitOwner wait (at most
// Timeout) for the connected nodes — running and not isolated — to agree;
// Node.Raft reads one node's local view, Node.Serving says whether a node
// hands a destination's events out now (its lease holds), Node.Get asks
// its HTTP API without following redirects.
//
// # Cutting a node off
//
// Each node advertises a TCP proxy in front of its Raft port
// (cluster.Config.RaftAdvertise) and runs gossip on a transport that can
// drop everything (cluster.Config.GossipTransport). Isolate cuts both: the
// others see the node fail, and it receives no Raft traffic, so it loses
// its leader and its ownership leases run out while it still runs its
// destinations and answers HTTP. Heal restores both and joins the node's
// gossip to the others' again. The Raft connections a node dials itself
// are not cut (raftstore dials with net.Dial), so the cut is one-way for
// Raft and only a follower can be isolated; Isolate refuses the leader.
// Crash is a cut followed by a stop; Stop is a graceful stop, which tells
// the others at once.
//
// # What it does not cover
//
// Everything here shares one process: one Go runtime, one clock, no
// SIGKILL and no SIGSTOP, and a crash still runs the node's deferred
// clean-ups. Killed and stalled processes, the CLI, the config file and
// the canal relay between nodes are cmd/braid's process-level tests
// (internal/testutil/braidproc). Destinations need real sources: start
// MariaDB with internal/testutil/mysqltest.
//
// # Cleanup and concurrency
//
// Start registers a t.Cleanup that stops every node and waits for the
// harness's goroutines (the proxies, the transports' forwarders), so
// goleak.VerifyTestMain holds for a package that uses it. Start sets
// GOMEMLIMIT=off with t.Setenv, so tests that use it cannot be parallel
// (each node would set the process's memory limit to its own bound). A
// Cluster's and a Node's methods call t.Fatal and must be called from the
// test's goroutine, one at a time. The nodes log to the test's output at
// WithLogLevel (default warn).
package clustertest
