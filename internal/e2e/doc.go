// Package e2e holds braid's process-level kill and failover tests: they
// start real `braid server` processes (internal/localcluster, from a
// binary built once in TestMain by internal/testutil/braidproc), kill
// them (SIGKILL, SIGSTOP) under a write load, and check from outside, as
// a user would (the CLI, the HTTP and canal protocols, the sinks'
// targets), that the stream goes on with nothing lost or repeated.
//
// What is here: the owner's failover with native and canal consumers,
// the fencing of a stalled owner, rebalancing, the Kafka and Redis sinks
// surviving their owner's kills, and dead voters taken out of Raft. The
// tests of braid's commands against a live cluster stay in cmd/braid,
// beside the commands they run in-process; the failover benchmark stays
// in bench, beside the peers it is measured against.
//
// The package has no code outside its tests.
package e2e
