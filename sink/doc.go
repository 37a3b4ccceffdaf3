// Package sink applies a destination's stream to targets: each sink is a
// consumer of the destination's store with a client id of its own
// ("sink:NAME"), running where the destination runs.
//
// Everything above this package holds a sink as one interface, Sink, and
// runs it with a Runner. A Sink is one of two engines over a thin target
// client, as cockroach's changefeeds put one batching engine over each
// sink's client:
//
//   - Keyed (keyed.go, pool.go, causality.go, keys.go) applies row changes
//     in parallel, by key, exactly once, to a Target: sink/mysql,
//     sink/postgres, sink/redis. A Target only applies what it is handed,
//     in a transaction that also writes the worker's checkpoint.
//   - Ordered (ordered.go) publishes the stream in order, as canal flat
//     messages, to a Publisher: sink/rabbitmq, sink/kafka.
//
// Package sinkrun opens the Sink a spec entry asks for (the one place
// that knows every target type) and starts a destination's sinks;
// sink/verify compares a target with the sources.
//
// # Invariants
//
//   - Exactly once (Keyed). Row changes go to the workers by their key
//     (Causality: its primary key's hash, or its range's); each worker
//     applies its changes in stream order, in transactions that also
//     write the worker's checkpoint (the last Point it applied). A change
//     is handed out iff its point is after its worker's checkpoint, so a
//     restart from any cursor at or before the checkpoints applies nothing
//     twice and skips nothing. A key's worker depends on the count of
//     workers and on the routing, so both are kept beside the checkpoints
//     (WorkersChanged, Routing) and never change under them.
//   - Causality (TiDB DM's, per worker). A change one of whose keys
//     (primary, unique, or the old key of a key-changing UPDATE) is held by
//     a change on another worker waits until that worker has applied it.
//     A DDL waits for every worker, and is applied alone.
//   - Within a worker's transaction a target may reorder changes of
//     different keys into runs (Plan); changes of one key keep their order.
//   - Fencing. A target checks, in the transaction that applies a worker's
//     changes, that its checkpoint is still before the first of them
//     (ErrBehind if not), so two runners (an owner, and a former one not
//     yet fenced) never apply a change twice.
//   - Ordered: a Publisher is handed each store batch's messages in stream
//     order, one call at a time; the batch is acked once its messages are
//     confirmed (Publish returned, or, for a Stager, the Commit after its
//     Stage) and the batch ends a transaction, so a retry restarts a
//     transaction at its first message and each message keeps its id
//     (seq, n). At least once; consumers de-duplicate by it.
//   - The cursor moves only past applied work. A store batch is acked
//     (Feed.Ack) only once every change in it is committed at the target,
//     or confirmed, in the order the batches were handed out; the sink's
//     cursor (the store's mark) is saved (Feed.Save) after that, so it is
//     never ahead of the checkpoints.
//   - A change the target cannot apply faithfully stops the sink with an
//     error that says why, never a silent write: a partial row image
//     (PartialImageError; Keyed and Ordered alike, as a message holds
//     whole rows and would carry the columns left out as null), a key two shard tables write (CollisionError),
//     a DDL a SQL target will not run (ErrDDLRefused, which stops the
//     runner until its spec changes rather than retrying).
//
// # Concurrency
//
// A Runner's Run owns one goroutine: it calls its Sink's Apply, and when
// Apply fails it logs, backs off, rolls its store client back to the last
// acked batch and calls Apply again with a new Feed. Run returns once ctx
// ends; Applied and Progress may be called from any goroutine (mu guards
// what they read, which Feed.Ack writes).
//
// Keyed.Apply runs on Run's goroutine and starts, for one Apply, one
// goroutine per worker and an acker, and waits for them before it
// returns. Apply's own goroutine reads store batches, computes each
// change's keys (keyer) and worker (Causality: Apply's alone, unlocked),
// and hands the change to its worker (pool.hand, into a stage only it
// touches); at the end of a store batch it queues what it handed
// (pool.wake) and sends the batch to the acker. A worker takes what was
// queued for it since its last transaction, up to maxTake changes, and
// calls Target.Apply with it: a Target's Apply runs on up to workers
// goroutines at once, each with its own worker number, so a Target is
// safe for concurrent use across workers. The acker waits until every
// worker has applied what the batch handed it, then acks and saves. The
// pool's mutex guards the queues and the handed and applied counts; its
// cond wakes workers, waits for tickets (Causality) and the acker. The
// first error fails the pool, cancels the workers' context and ends
// every wait; Apply returns it. A DDL is applied on Apply's goroutine
// once every worker has drained.
//
// Ordered.Apply runs on Run's goroutine alone: it reads a store batch,
// encodes its messages (flat), calls Publisher.Publish (or Stager.Stage,
// and Commit when it is due) and acks, in that order, so a Publisher is
// never called concurrently.
//
// Stats and Checkpoints of a Sink may be called at any time from any
// goroutine (the sink's status, braid sink show), while Apply runs.
package sink
