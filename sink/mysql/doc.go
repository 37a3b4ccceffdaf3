// Package mysql is the sink that applies a destination's stream to MySQL
// or MariaDB tables (spec sinks: type: mysql), with go-sql-driver: each
// worker transaction writes its rows and the worker's checkpoint
// (<meta_database>.sink_checkpoint, a row per destination, sink and
// worker) before it commits, so a restart resumes exactly where the
// target stands. Into MariaDB from MariaDB it replays the binlog's row
// events in BINLOG statements (replay.go), as a replica applies them;
// elsewhere, and whenever a row is not as a replica expects it, it writes
// SQL statements: multi-row INSERTs, upserts and DELETEs whose affected
// rows it checks, or a row at a time.
//
// Its Target is the thin client under sink.Keyed: Keyed decides which
// worker applies which change and when; the Target applies what it is
// handed. The files are cut as sink/postgres's: mysql.go (Open, the
// checkpoints read), apply.go (a worker's transaction), statements.go
// (the SQL of a run), ddl.go (ApplyDDL), types.go (a target table
// created from the logical table's columns), checkpoint.go (the
// checkpoint table and its migration), verify.go (braid sink verify's
// reads), and replay.go, which only this target has.
//
// # Invariants
//
//   - Exactly once (mode: exactly-once, the default). A worker's
//     transaction first claims its checkpoint row (claim): an UPDATE moves
//     it to the last change's point only if it is before the first; a row
//     at or past it means another runner applied the changes, and the
//     transaction applies nothing (sink.ErrBehind). Then the rows, and one
//     COMMIT of the lot. The row stays locked until then, so of two
//     runners (an owner, and a former one not yet fenced) one applies and
//     the other finds it behind.
//   - Replaying is only ever a faster way to the same result. A rows event
//     that finds a row other than a replica expects (1062 on an INSERT,
//     1032 on an UPDATE or DELETE), or any other error, rolls the
//     transaction back; it is applied again as SQL statements, which count
//     the upsert or the missing row or name a collision. A change is
//     replayed only when its images are the binlog's and the target
//     table's columns are the source table's (replay.go says which).
//   - No silent loss. INSERT and UPDATE write the full after-image; an
//     UPDATE whose row is missing is an upsert of it and is counted
//     missing; an UPDATE that changes the key deletes the old key first.
//     Without an origin column, exactly once, an INSERT that finds its key
//     fails the transaction, which is applied again a row at a time so the
//     row is named in a *sink.CollisionError. A change whose after image
//     leaves columns out is applied only by replaying (it changes only the
//     columns it holds), else it is a sink.PartialImageError.
//   - The rows go as sink.Plan's runs, each as statements of at most the
//     spec's batch rows (batch means that, and only that).
//   - A DDL is never run as the shard wrote it: it is parsed under the
//     sql_mode its session had, checked and restored with the target's
//     names (schema.TargetDDLs); one it will not rebuild stops the sink
//     with a line naming it (sink.ErrDDLRefused). Its sessions run in the
//     server's sql_mode less the modes that change how text reads
//     (pinnedSQLMode), so the restored text means what its parse said.
//     MySQL commits a DDL by itself, so the checkpoints follow it: a crash
//     between the two runs it again, and an error that says it is done
//     already is taken as applied. A DDL that every checkpoint is past is
//     not applied (sink.ErrBehind).
//   - At least once (mode: at-least-once): no checkpoint table is read or
//     written; INSERTs and UPDATEs are REPLACEs of the after-image, DELETEs
//     idempotent, so a restart re-applies the changes since the sink's
//     cursor harmlessly: a change applied again that finds one of its
//     unique values on another row (the source moved it there later, or
//     changed the row's key) deletes that row, which the later change
//     that gave it the value brings back, so the table converges.
//
// # Concurrency
//
// A Target is safe for concurrent use by sink.Keyed's workers: each calls
// Apply with its own worker number, and no two calls share a worker.
// Connections come from one *sql.DB of workers + 2 (Checkpoints,
// ApplyDDL and braid sink verify's Lookup and Sample use the two more),
// and the replay transactions' from a second of as many (replayPool),
// whose sessions read text as binary; nothing but the replay
// transactions (BINLOG statements and an ASCII checkpoint claim) runs on
// it, and turns counts transactions of both.
// When the spec has fewer connections than workers, turns (a channel of
// that many tokens) lets that many worker transactions run on the target
// at once; the others wait for a token with their statements built.
// Apply retries a transaction InnoDB ended over a lock (lockRetries), as
// a replica does. ApplyDDL runs while no Apply does (Keyed drains the
// workers first). What the workers share is read-mostly and safe for
// concurrent use: the statement text cache (stmts), the target tables
// known to exist (tables) and the replay state's fits are sync.Maps; the
// counts, the routing and the replay switch (off) are atomics; the
// BINLOG statement builders come from a sync.Pool.
package mysql
