// Package cluster will run destinations on a three-node braid cluster:
// membership through memberlist, assignment of destinations to live nodes by
// the Raft leader, ownership fencing by epoch, and routing of consumers to a
// destination's owner.
//
// Not built yet: see issue 6.
package cluster
