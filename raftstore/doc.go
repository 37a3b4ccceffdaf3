// Package raftstore keeps braid's shared state — destinations, their
// owner and ownership epoch, consumer cursors, schema histories and
// shard-DDL decisions — in a state machine replicated with hashicorp/raft
// across the cluster's nodes.
//
// A Store is one node: raft-boltdb/v2 (one bolt file, raft.db, fsync on
// every append) as log and stable store behind a 512-entry log cache, file
// snapshots in snapshots/, and a TCP transport on the node's raft port,
// all under Config.DataDir. Open starts it; Bootstrap makes a new cluster
// (on one node, or on every node with the same server list); AddVoter and
// RemoveServer change membership on the leader; a node opened again on its
// data directory rejoins and catches up (HadState says so).
//
// # State and commands
//
//   - Destinations: an spec.Spec, given its defaults and validated by
//     spec.Spec.Validate before it reaches the log, stored as canonical
//     YAML (the spec's own serialized form, which spec.Parse reads
//     back), with a Version: the Raft index of its create or last update.
//   - Assignments: each destination's owner node and epoch. The epoch is
//     the Raft index of the assignment, so it grows with every assignment
//     (even to the same owner) and never repeats, across destinations and
//     across deleting and re-creating one.
//   - Cursors, per (destination, client id): the group.Cursor of the
//     client's last acknowledged transaction, written in batches by the
//     destination's owner (SaveCursors, FencedCursors), whole: each
//     source's file:pos with its GTID state and the server it was read
//     from, so a new owner that finds another server behind a source's
//     address (a failover) resumes there by GTID.
//   - Schema histories, per (destination, source): each SourceCursor's
//     change.SchemaSnapshot is stored once per distinct content, named by a
//     hash from the cursors, and dropped when no cursor names it. A batch
//     carries a history's bytes only when the store lacks it, so steady
//     cursor traffic carries hashes, not schemas. Cursor returns the cursor
//     with its histories, so a new owner decodes old binlog with the
//     columns of that time; SchemaHistory lists what is held for a source.
//   - Shard-DDL decisions, per destination: the group.DDLDecision of each
//     operator's decision about a lock, in the order made, appended one
//     per entry by the destination's owner (SaveDecision), so that a new
//     owner applies them at the same points (Decisions).
//
// A command in the log is a version byte (1), a type byte, then the type's
// fields as varints and length-prefixed strings (command.go). A node that
// meets another version or an unknown type answers that entry with
// ErrBadCommand and changes nothing, it never panics; so a new command
// version may only be written once every node runs a braid that reads it.
// Apply never validates a spec again, so a later braid's stricter rules
// cannot make an old log unreplayable. A snapshot is a version byte and
// the whole state as JSON; Restore replaces the whole state.
//
// # Invariants
//
//   - Fencing: a cursor batch carries its writer's destination and epoch
//     and is applied only if that epoch is the destination's current one
//     and the destination has an owner; otherwise the whole batch is
//     rejected with ErrStaleEpoch (ErrNotFound if the destination was
//     deleted). FencedCursors then refuses every later Save: the deposed
//     owner stops. A decision (SaveDecision) is fenced the same way.
//     AssignIf gives the planner the same check on epochs.
//   - A cursor never moves backwards: an update with a lower seq than the
//     stored cursor is skipped (SaveResult.Skipped).
//   - A batch is all or nothing, and a cursor never names a schema history
//     the store does not hold (ErrUnknownSchema; SaveCursors retries with
//     every history attached).
//   - Every node applies the same commands in the same order to the same
//     state and gets the same results: the state machine (state.go) is a
//     plain value with no clock, goroutine, randomness or I/O.
//   - The log does not grow without bound: Raft snapshots after
//     SnapshotThreshold entries (checked every SnapshotInterval) and
//     keeps TrailingLogs entries behind the snapshot.
//
// # Reads
//
// Destinations, Destination, Assignment, Assignments, Cursor, Cursors,
// SchemaHistory and Decisions read this node's state: they never block,
// and on a follower they may be stale by the entries in flight
// (milliseconds; up to 2×CommitTimeout when the cluster is idle; unbounded
// on a node cut off from the leader). Use them for listings, status and routing hints.
//
// Reads that must be current use one of:
//
//   - Consistent(ctx), then the local read: linearizable. On the leader a
//     read index — a barrier through the log once per term, then a round
//     of heartbeats (VerifyLeader) per call; on a follower the leader's
//     read index fetched over the raft port, then a wait until this node
//     has applied it. Who owns what, before acting on it, is read this way.
//   - OwnedCursor(ctx, dest, client, epoch) (and FencedCursors.Load): the
//     cursor at takeover, on any node and without asking the leader. It
//     waits until this node has applied the assignment (index = epoch) and
//     checks the epoch is still current: since only the holder of the
//     current epoch can change cursors, nothing newer can exist elsewhere.
//
// # Writes on a follower
//
// Every write (and Consistent) works on every node: a follower forwards
// the encoded command to the leader over the leader's raft port (a
// connection starting with 'F'; Raft's own connections start with 'R') and
// returns the leader's result, errors included, as if it ran locally.
// While there is no leader, or the leader changes or cannot be dialed
// before the request was sent, it waits and retries until the context (by
// default ApplyTimeout) ends. With Config.NoForward a follower instead
// refuses with a *NotLeaderError naming the leader's id and Raft address
// (errors.Is(err, ErrNotLeader)), for a caller that forwards by itself.
// Membership changes (AddVoter, RemoveServer) are not forwarded. A write
// whose leader is lost before its outcome is known returns an error saying
// so: it may still have been committed.
//
// # Timeouts
//
// Defaults suit one LAN or one machine: HeartbeatTimeout and
// ElectionTimeout 500ms and LeaderLeaseTimeout 250ms (hashicorp/raft's
// 1s/1s/500ms halved), so a dead leader is replaced in about 1–2 s (the
// tests measure under 1 s on loopback); CommitTimeout 20ms, so an idle
// follower learns of commits within 40ms. The tests keep these defaults
// and stay stable under -race on two cores.
//
// # Cursor batching
//
// The owner of a destination keeps what it keeps through FencedKeeper
// (Store.Keeper), braid's group.Keeper for the cluster (group.FileKeeper
// is braid capture's): decisions and placements one entry each, cursors
// through FencedCursors (Store.CursorStore), whose Save keeps the
// latest cursor per client and never blocks; every DefaultCursorInterval
// (500ms) the pending cursors go out as one Raft entry; Close flushes.
// The interval comes from BenchmarkRaftCursors (bench/raftstore_test.go),
// three nodes in one process on a shared two-core machine, 48 writers at
// once, over five runs: one cursor per entry commits 1,800–3,500
// updates/s (p50 12–20ms, p99 25–110ms); batches of 100 cursors
// 57,000–100,000 updates/s (p50 40–75ms, p99 105–260ms, at saturation).
// The cost model it fits, 290–570µs of cluster time per entry plus 6–14µs
// per cursor, puts 100 destinations with 10 moving clients each at 19–34%
// of that cluster at 200ms and 7.5–14% at 500ms. The rule is the
// shortest interval within a 15% budget, which was 500ms in every run; a
// cursor is then at most interval + p99 (0.6–0.8s) old in the store,
// which is how much of the stream a crash or failover makes consumers see
// again (they drop seq <= last seen). 500ms is also braid capture's file
// cursor period. The entry cost dominates: at 1,000 destinations a
// per-node batch (one entry for all the destinations a node owns) would be
// the next step.
//
// # Concurrency
//
// Store and FencedCursors are safe for concurrent use. A Store owns its
// goroutines (hashicorp/raft's, the listener, one per accepted
// connection); Shutdown stops them all, closes every connection and the
// bolt file, and can be followed by Open on the same data directory.
// Each FencedCursors owns one flushing goroutine, stopped by Close or by
// the Store's Shutdown. Raft applies commands on its own goroutine; reads
// take a read lock on the state and copy out what they return.
package raftstore
