// Package destination runs one destination: its clients subscribed from
// the cursors it keeps, the pipeline that merges its sources into a store
// (stream), its sinks (sink/sinkrun), what servers serve (stream.Served),
// and the saving of every client's cursor, around a body of the caller's:
// braid capture prints or serves, a cluster node's owner renews its lease.
// What differs between them is where the destination keeps its cursors,
// decisions and placements, a group.Keeper: a file, memory or Raft.
//
// # Invariants
//
//   - A client's kept cursor never runs ahead of what it acked: Run keeps
//     the mark of the last batch a client acked whole (stream.ClientStats.Mark).
//   - The cursors of Config.Own are the body's to keep, never Run's (a
//     printer keeps what it wrote, which its acks run ahead of).
//   - A client gone from the store (unsubscribed, dropped, expired) has
//     its kept cursor forgotten, or the next run would hold the stream
//     for it.
//
// # Concurrency
//
// Run owns the pipeline's goroutines (stream), one goroutine per sink
// (sinkrun) and one that saves cursors every Config.KeepEvery; all have
// stopped when it returns. The body runs on Run's goroutine; its context
// ends when Run's does or when a cursor cannot be kept (a fenced owner).
package destination
