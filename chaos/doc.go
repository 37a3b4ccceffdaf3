// Package chaos runs a whole braid deployment on this machine under a fault
// schedule drawn from a seed, and checks from outside that the stream, the
// consumers and the sinks keep braid's promises (`make chaos`, issue 45).
//
// A run (Run) starts three MariaDB sources, each a primary with a GTID
// replica behind a proxy standing in for a virtual IP, each holding two
// shard schemas (shop_0 … shop_5, table orders), a three-node `braid
// server` cluster with TLS, a gossip key and users, whose Raft and gossip
// ports sit behind proxies of the run (links), and one destination `shop` that routes
// the shard tables to shop.orders, with `snapshot: initial`, `shard_ddl:
// pessimistic` and sinks into MariaDB (3306, exactly once), PostgreSQL
// (5432, exactly once), Redis (6379), Kafka (a kfake process) and
// RabbitMQ (5672, at least once), each in a database, key prefix or vhost
// of the run's own and reached through a TCP proxy the run controls. A
// writer commits transactions on every source and keeps a ledger of each
// committed change; two consumers read the stream under client ids of
// their own, one over the native API, one over the canal protocol. Then
// the schedule (Plan) runs: nodes killed, stopped, restarted and cut off
// from the other nodes (the owner, the Raft leader, a follower), sources
// restarted and failed over to their replica, targets cut off, the
// Kafka broker stopped, killed and restarted on its data,
// a consumer that stops reading, ALTERs of every shard table one by one,
// a TRUNCATE, bursts of large transactions. At the end the writer stops,
// the sinks catch up, and the invariants (Check) are checked, the
// documented bounds among them (a node's memory, the time to follow a
// failover: bounds.go). A setup that fails half-way stops every process
// it started and its error names the step.
//
// Every change the writer makes is identifiable in the stream: ids are
// unique over the run (the shard schema in the high digits), and every
// write gives its row a version v unique over the run, so a row change is
// "I id v", "U id v" (v after) or "D id v" (v before) wherever it shows.
//
// # Invariants
//
//   - Plan is a pure function of its seed and duration: the same pair
//     gives the same schedule, which is printed before anything starts.
//   - Check is a pure function of what the run observed (Observation):
//     the tests plant each kind of fault in an Observation and see it
//     reported by its invariant's name.
//   - A failed run keeps its directory: every node's, source's and
//     consumer's log, the schedule and the report.
//
// # Concurrency
//
// Run owns every goroutine it starts (writer per source, consumers,
// fault executor, proxies) and waits for them before it returns.
package chaos
