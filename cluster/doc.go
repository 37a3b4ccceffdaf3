// Package cluster runs destinations on a braid cluster: each node (Node,
// started by `braid server`) is a member of the gossip that tells which
// nodes are alive (memberlist, membership.go) and of the Raft group that
// stores destinations, ownership and cursors (package raftstore).
//
// While a node is the Raft leader it assigns every destination to one live
// node (plan.go: fewest first, a dead node's destinations moved at once, a
// returning node given one a round until loads differ by at most one),
// each assignment with a new epoch and conditional on the epoch it
// replaces. Every node runs the destinations assigned to it (owner.go):
// from the slowest consumer's cursor, with consumers' cursors written to
// Raft fenced by its epoch, and hands events out only under a lease it
// renews with linearizable reads; a new owner serves only a lease after
// taking over. The HTTP API (http.go) stores and lists destinations on any
// node and redirects a destination's state and stream to its owner; the
// canal server relays canal clients to the owner.
//
// # Invariants
//
//   - At most one node serves a destination at any moment: an owner serves
//     only within Lease of a read that found it the owner, and a successor
//     only Lease after its assignment, which came after that read.
//   - A deposed owner's cursor writes are refused (raftstore's epoch
//     fencing), so cursors never move back to an older owner's view.
//   - A takeover starts at or before every consumer's cursor: nothing a
//     consumer has not acked is lost, and what it had comes again with the
//     same seqs, which consumers drop.
//   - A node that may lag (just restarted, cut off) never says a
//     destination is unknown without a linearizable read.
package cluster
