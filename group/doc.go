// Package group reads many sources as one destination: a reader per source
// (binlog.Reader), routing of shard tables to logical tables (Router), and
// the merge of their transactions into one stream (Merger, Destination):
// canal's GroupEventParser and GroupEventSink, done right.
//
// Merger is the pure core: per source it is told the next transaction's
// commit time (Offer) and how far the source has promised not to go back
// (Watermark), and it names the next source to emit (Next). Destination is
// the shell around it: it runs the readers, keeps a bounded queue per source,
// turns replication heartbeats and transactions of no selected table into
// watermarks (the heartbeat's arrival time, the transaction's commit time,
// minus max_clock_skew), assigns seq and keeps the Cursor.
//
// In the data path (binlog → group → stream → flat/api) this is the one
// place events are merged, numbered and named: the merge loop stamps each
// table version, and each DDL, with its logical names (the spec's route:)
// before the first event carrying it is emitted, so the layers above read
// names from the event and never call back into the Router.
//
// ShardDDLState is the merge of shard DDL (spec shard_ddl) as a pure
// state machine: which logical DDL goes out, once, and which shard
// tables' rows wait. The merge drives it (shardddl.go): held rows are
// left out and, when a lock releases, re-read from the binlog and emitted
// right after the DDL that released them; the state rides in the cursor.
//
// What a replay or a new owner needs to emit the same stream, a
// Destination keeps through Config.Keep, a Keeper: the operators'
// shard-DDL decisions before they apply and the placements of snapshot
// chunks and late transactions before they go out, and the losses of
// transactions an operator accepted (AcceptLost, lost.go) before the
// source goes on past one (FileKeeper, MemKeeper here;
// raftstore.FencedKeeper in a cluster). The Keeper also keeps the
// clients' cursors, which package destination saves.
//
// # Invariants
//
//   - Keys are the commit time in µs made monotone per source
//     (key = max(previous key of the source, commit time)), ties broken by
//     the source's index. In strict order the output keys never decrease, so
//     the merged order is a pure function of the sources' binlogs. The
//     commit time is one every server of a source agrees on (MySQL's
//     original_commit_timestamp, MariaDB's event-header time, which
//     replicas keep), and no position enters a key or a tie: a source's
//     history read from its primary or from a replica is merged alike.
//   - A transaction is emitted whole (EventBegin, EventRows…, EventCommit, or
//     one EventDDL) and never interleaved with another; each source's
//     transactions come in binlog order.
//   - A shard-DDL lock's held rows come right after the DDL that releases
//     it (or an operator's decision), in their merge order: the one
//     change to the merged order. The lock state is part of the cursor
//     and a function of the binlogs and the decisions kept, so a replay
//     emits the same stream with the same seqs.
//   - seq increases by one per transaction emitted. A Destination started
//     from a Cursor emits exactly what the first run emitted after it, with
//     the same seqs (strict order): the watermarks that let a transaction
//     out ahead of a late one are not in the binlogs, so a late one is
//     kept (placements), a restart counts what went out before its cursor
//     (Merger.Restore), and up to the furthest cursor known
//     (Config.Reached) a source goes no further than it went then.
//   - In strict order a source that neither sends nor heartbeats holds the
//     stream back, reported in the log; it is never ordered around. A
//     transaction arriving below a watermark already promised (a source clock
//     off by more than max_clock_skew) goes out at once and is counted
//     (Destination.Late).
//   - A table version's logical names are stamped once, before any event
//     that carries it leaves the merge, and never change afterwards. They
//     are stamped on the merge's own copy of the version, which the rows
//     carry out: the version a reader handed out stays the reader's, never
//     written by the merge (its schema model reads it on its goroutine).
//   - In per-source order transactions go as they come; each source's order
//     is still exact and seq dense, but a replay may interleave the sources
//     differently, so consumers de-duplicate by source position there.
//
// # Files
//
// The merge: destination.go (Config, New, Run), merge.go (the loop and
// its steps), emit.go (a transaction out, stamped), queue.go (a source's
// bounded queue), merger.go (the order), placements.go (the log of
// chunks and late transactions, and their replay), order.go (which
// source each recent point took, for replays beside the live run),
// stats.go. The
// initial snapshot: snapshot.go (overview, per-source state),
// snapshot_gate.go (live changes filtered and chunks emitted at their
// boundary), snapshot_copy.go (the goroutine that selects chunks),
// fold.go (a chunk's window folded into its rows), keys.go (integer key
// ranges), snapshot_stats.go. Shard DDL: shardddl_state.go (the pure
// state machine), shardddl.go (the merge's side), shardddl_catchup.go
// (held rows re-read), rename.go (RENAMEs move shard tables between
// logical tables; a tool's swap arrives as its ALTER, see
// engine/binlog). The seams: source.go (Sources: readers and snapshot
// connections; grouptest scripts them), clock.go (Clock),
// keeper.go and file_keeper.go (what a destination keeps).
//
// # Concurrency
//
// Goroutines, each with its owner, what it owns, and how it ends:
//
//   - The merge loop (Destination.merge) runs on Run's goroutine, and
//     so does emit. It alone uses the Merger, the Router, the shard-DDL
//     merge (but for Decide and ShardDDL, below), the cursor and the
//     placement replay. It ends when ctx ends, emit or a keeper fails,
//     or a source fails for good; Run then cancels everything below and
//     waits for it (wg.Wait) before returning.
//   - One reader goroutine per source, started by Run: it runs the
//     source's Reader, stamps heartbeats with the clock, passes each
//     event through the source's snapshot gate (sourceSnapshot.pass, if
//     the source has a snapshot) and puts it in the source's queue,
//     whose channel it alone sends on besides the snapshot goroutine,
//     and closes (after setting its error). It ends when Run's ctx ends
//     or the reader fails; before closing the queue it cancels the
//     source's snapshot goroutine and waits for it.
//   - One snapshot goroutine per source with an initial snapshot left
//     (sourceSnapshot.run), started by Run unless ReplayOnly: it owns
//     its SnapshotConn, registers each chunk with the gate, selects it,
//     and may emit it into the queue itself when the reader has passed
//     its high watermark already; it reads the next chunks while earlier
//     ones wait for the reader (see readChunk). It retries a failed connection or
//     chunk with its own backoff (100 ms doubling to 5 s, on the
//     clock). It ends when the snapshot is done or its ctx ends (by the
//     reader goroutine); an error of its own is sent to Run, which
//     cancels the destination and returns it.
//   - One catch-up reader goroutine per source of a shard-DDL catch-up
//     (shardDDL.runCatchUp), started by the merge loop: it reads the
//     held tables again into a small queue of its own. The merge loop
//     cancels and waits for them before the catch-up returns.
//
// Other goroutines may call Stats, Late, ShardDDL, Decide, AcceptLost and Cursor
// (Cursor only from emit or after Run). Decide sends a request to the
// merge loop and waits for its answer; ShardDDL reads a published copy.
//
// Locks and what they guard:
//
//   - Destination.statsMu: the merge's published Stats (the merge loop
//     writes, Stats reads; the readers' own stats are read through
//     Reader.Stats). keptOutOnce closes keptOut, which the snapshot
//     goroutines wait on, once the kept chunks are out, and the merge
//     loop reachedOut once the run is past Config.Reached's point.
//   - OrderLog.mu: the sources a live run took at its recent points (its
//     merge loop writes; its replays' merge loops read, and wait on
//     wake for the next point).
//   - sourceSnapshot.pushMu: held over every push into the source's
//     queue, so that its order is the stream's: by the reader over pass,
//     and by the snapshot goroutine when it emits a chunk itself, which
//     only tries it (the reader, in pass, emits what is due before it
//     lets it go). Taken before mu.
//   - sourceSnapshot.mu: the gate's state (the snapshot progress, the
//     table versions and keys, the boundary, the open transaction, the
//     pending chunks and the recent left-out changes), shared by the
//     reader goroutine (pass, which lets it go while it pushes into the
//     queue) and the snapshot goroutine (readChunk, estimate).
//     awaitRecord, the replay reader's wait for the next kept chunk, lets
//     it go while it waits.
//   - sourceSnapshot.recMu: the source's known placements (recorded),
//     written by the gate and read by the merge loop (filterHeld, for a
//     catch-up); never held while pushing.
//   - Atomics: a queue's bytes (reader puts, merge takes); a snapshot's
//     rows, estimate, start and published stats (read by Stats); the
//     shard-DDL merge's published view (read by ShardDDL).
//   - MemKeeper.mu and FileKeeper.mu: what the keeper holds, and one
//     write at a time.
//
// Merger, Router and ShardDDLState are not safe for concurrent use; the
// Destination uses them from the merge loop only.
package group
