// Package e2e holds braid's process-level kill and failover tests: they
// start real `braid server` processes (internal/localcluster, from a
// binary built once in TestMain by internal/testutil/braidproc), kill
// them (SIGKILL, SIGSTOP) under a write load, and check from outside, as
// a user would (the CLI, the HTTP and canal protocols, the sinks'
// targets), that the stream goes on with nothing lost or repeated.
//
// What is here: the owner's failover with native and canal consumers
// (failover_test.go, consumer_test.go, tail_test.go), the fencing of a
// stalled owner, rebalancing, a shard-DDL lock across a kill
// (ddl_test.go), dead voters taken out of Raft (voters_test.go), the
// sinks surviving kills of braid capture and of a cluster's owner (MySQL
// and PostgreSQL with the replay audit, Kafka, RabbitMQ, Redis:
// sink_*_test.go, capture_*_test.go), the initial snapshot resuming
// after kills (snapshot_test.go), and a destination with a MySQL sink
// across a source's failover behind a virtual IP, its owner SIGKILLed
// during it or not (source_failover_test.go), and online schema changes
// (gh-ost's steps, the real pt-online-schema-change) half done when the
// owner or braid capture is SIGKILLed (onlineddl_test.go). The tests of braid's commands against a
// live cluster or an in-process capture stay in cmd/braid, beside the
// commands they run in-process; the failover benchmark stays in bench,
// beside the peers it is measured against.
//
// The cluster harness (a Cluster of Nodes, its owner, status and waits)
// is internal/testutil/nodes, shared with cmd/braid's tests: here it runs
// the commands with the built binary (cli in harness_test.go), there
// in-process.
//
// The package has no code outside its tests.
package e2e
