// Package conformance is the one test suite every sink target runs
// (sink/mysql, sink/postgres, sink/redis, sink/rabbitmq, sink/kafka): each
// case a subtest, each built the way braid builds a sink, from a
// spec.Sink through sink/sinkrun (Prepare, a stream.Pipeline, Start), over
// shard tables of a real MariaDB server the suite starts
// (internal/testutil/mysqltest).
//
// Each case failed on a bug planted by hand (run, then reverted):
//
//	apply:     the runner skipping the 4th row change of every transaction (sink/keyed.go); postgres: rows differ
//	workers:   the worker-count check of SQL checkpoints dropped (sink/checkpoint.go); postgres: no refusal
//	partial:   the runner's partial-image refusal dropped (sink/keyed.go); postgres: no error, columns NULL
//	           and Ordered's (sink/ordered.go); rabbitmq, kafka: no error, the update published with its columns null
//	collision: the collision error's holder look-up dropped (sink/runner.go); mysql: the error names one writer
//	once:      every fifth transaction's records produced twice (sink/kafka/kafka.go); kafka: a message twice
//	           at least once, the unique-value DELETE before an upsert dropped (sink/postgres), or ON DUPLICATE KEY UPDATE for REPLACE (sink/mysql): a duplicate key
//	replay:    the checkpoints read at start ignored (sink/keyed.go); mysql: the stream read again applied
//	restart:   the message after a partition's last taken as written on a restart (sink/kafka/ends.go); kafka: one lost
//	lease:     the Feed's wait for Runner.Live dropped, or its look after Get (sink/runner.go); rabbitmq, mysql: applied while fenced
//
// A target package runs it from a test file of its own:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{New: newPlace, Cannot: ...})
//	}
//
// where the harness says how to make a place of the target for one case
// (a database, a vhost, a key prefix, a Kafka cluster; removed when the
// case ends), how to read back what it holds as rows (and, for a sink that
// publishes, as messages), and what the target does by design. A case the
// target cannot do is declared in Harness.Cannot with why, and skipped
// saying so: no case is skipped silently.
//
// # Invariants
//
//   - Every case runs in databases of its own on the suite's server
//     (<case>_0, <case>_1) merged to the logical table <case>.orders, and
//     in a place of the target of its own.
//   - Rows compare in a canonical form (a DECIMAL as an exact fraction, a
//     DATETIME(6) with six digits, JSON re-encoded, NULL as ∅), so that a
//     target's own rendering of a value compares equal to the source's.
//   - A sink is never built by hand: the suite writes a spec.Spec with the
//     harness's spec.Sink in it and runs it through sink/sinkrun, with the
//     defaults production applies.
//
// # Concurrency
//
// Run and the harness's functions are called from the goroutine running
// the test; the sinks run on the goroutines sink/sinkrun starts, stopped when
// each case ends.
package conformance
