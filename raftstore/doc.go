// Package raftstore will keep braid's shared state in a Raft log replicated
// with hashicorp/raft: destinations, ownership epochs, consumer cursors and
// schema history.
//
// Not built yet: see issue 5.
package raftstore
