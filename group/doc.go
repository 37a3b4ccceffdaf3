// Package group reads many sources as one destination: a reader per source
// (binlog.Reader), routing of shard tables to logical tables (Router), and
// the merge of their transactions into one stream (Merger, Destination):
// canal's GroupEventParser and GroupEventSink, done right.
//
// Merger is the pure core: per source it is told the next transaction's
// commit time (Offer) and how far the source has promised not to go back
// (Watermark), and it names the next source to emit (Next). Destination is
// the shell around it: it runs the readers, keeps a bounded queue per source,
// turns replication heartbeats into watermarks (the heartbeat's arrival time
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
// # Invariants
//
//   - Keys are the commit time in µs made monotone per source
//     (key = max(previous key of the source, commit time)), ties broken by
//     the source's index. In strict order the output keys never decrease, so
//     the merged order is a pure function of the sources' binlogs.
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
//     the same seqs (strict order).
//   - In strict order a source that neither sends nor heartbeats holds the
//     stream back, reported in the log; it is never ordered around. A
//     transaction arriving below a watermark already promised (a source clock
//     off by more than max_clock_skew) goes out at once and is counted
//     (Destination.Late).
//   - A table version's logical names are stamped once, before any event
//     that carries it leaves the merge, and never change afterwards.
//   - In per-source order transactions go as they come; each source's order
//     is still exact and seq dense, but a replay may interleave the sources
//     differently, so consumers de-duplicate by source position there.
//
// # Concurrency
//
// Destination.Run owns one goroutine per source (its reader) and the merge
// loop on its own goroutine, and waits for all of them before returning.
// Merger and Router are not safe for concurrent use; the Destination uses
// them from the merge loop only.
package group
