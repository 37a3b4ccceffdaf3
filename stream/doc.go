// Package stream holds a destination's merged stream for its consumers: the
// bounded Store between the merge and the readers (each client id with its
// own batches, acks and cursor mark), the Pipeline that runs a
// group.Destination into a Store, and the Registry of the destinations a
// node serves, which the canal and native servers look them up in.
//
// In the data path (binlog → group → stream → flat/api) the store is where
// a merged event waits, typed and named, until every consumer has read it;
// it hands the same *change.Event to every reader, which formats it for
// its protocol (package flat, api/canal).
//
// # Consumers
//
// A client id starts where it asks (Store.Open: earliest, latest, seq:N,
// time:T; canal clients, which cannot ask, at the spec's consumers.start).
// One whose start is older than the store holds is served by a replay
// reader: a private Pipeline from the nearest cursor the store knows (nil:
// the destination's start cursor, group.StartCursorID, which the first run
// from the spec's start keeps with each source's schema there; without
// one, the spec's pinned start), with server ids of its own, into a
// small store of its own. By determinism its seqs are everyone's; once it
// has caught up with what the main store holds, it rejoins it at a
// transaction boundary (when the replay has read up to the store, the
// store keeps what comes next for the client, so that it rejoins under a
// steady load too). A serving pipeline (PipelineConfig.Serve) applies
// the spec's policy every 250 ms (Store.Maintain): a store full for a
// second names the client ids holding it (Stats.BlockedBy, a warning); one
// holding it for consumers.detach_after is detached (its cursor stays; it
// holds nothing; a replay serves it when it reads again); one unseen for
// consumers.expire_after is dropped.
//
// # Invariants
//
//   - The store is bounded in events and bytes; when it is full, Put waits
//     (backpressure reaching the sources); nothing is dropped.
//   - A replay hands its client no transaction past the main store's
//     floor: nothing the destination's live run has not emitted (a replay
//     reader may read what the live reader never did, before a source
//     failover that lost it). Nor, at a seq where the live run's LOST
//     marker went out, anything but that marker: a replay that read
//     there a transaction the live reader never did is ended with
//     ErrReplayDiverged before it (the next read replays from the
//     client's cursor).
//   - An event stays until every attached (or pinned) client id has acked it; a
//     client's Mark is the cursor after the last transaction it acked whole.
//     A client that acked inside a transaction ahead of its consumer
//     (Store.AckAhead) is served again from its Mark at its next Rollback,
//     by a replay reader: the transaction whole, never its rest alone.
//   - A client is handed every transaction after its start exactly once
//     per read of it (a rollback or a new stream hands the un-acked ones
//     again), whether the store or a replay serves it.
//   - One client never holds the others for longer than detach_after
//     while another client is attached and reading.
//
// # Concurrency
//
// Store and Registry are safe for concurrent use. A Pipeline owns the
// goroutine that runs its destination; Close stops it and waits.
package stream
