// Package redis is the sink that keeps a destination's rows in Redis as a
// cache (spec sinks: type: redis), with go-redis: each row at the key of
// the spec's template (default "{table}:{pk}"), every write guarded by
// the version of the change that made it, so that a replay of the stream
// or a cache reader's backfill never puts an older row over a newer one.
//
// # Keys and values
//
// The key template's {database} and {table} are the logical table's
// schema and name, {pk} its primary-key values (every column's, for a
// table without one) in the table's column order, joined by ":", each as
// the text MySQL returns for it (42, 1.50, 2026-01-02 03:04:05, abc; a
// binary column's bytes as they are), so that a reader that has a row's
// key from MySQL finds it (KeyFor). Put a prefix before the first "{" to
// share a Redis: the sink writes nothing outside it.
//
// A value is the row's after-image as `braid capture` prints it in a
// flat message's data (canal's text of each value, valid UTF-8): with
// format: json a string holding the JSON object column → string, null
// for NULL; with format: hash a hash of a field per column, a NULL
// column having no field.
//
// Beside each key is its version key, {key}:seq: "seq:idx", the seq of
// the change's transaction and the change's index in it (change.RowChange.
// Index), for the change that wrote the value; or a tombstone, "d" and
// the version, of the change that deleted it, which expires after
// tombstone_ttl (default 1h). A live version has no TTL.
//
// # Invariants
//
//   - Version guard. A change is applied only if its key's version is
//     absent or older than the change's (seqs are compared exactly, by
//     length and then digits, since Lua's numbers are doubles): applying
//     a change twice, or an older one after a newer, changes nothing.
//     INSERT and UPDATE write the full after-image (hash: DEL, then HSET,
//     so that a dropped column's field goes) and the live version; DELETE
//     deletes the value and leaves the tombstone; an UPDATE that changes
//     the key does both, the old key under the tombstone. Counted:
//     Applied, the row changes written; Upserts, the INSERTs whose key
//     had a live version (a value the sink wrote, of an older change);
//     Missing, the UPDATEs whose key had no live version (never written,
//     or deleted; the after-image is written all the same), and the
//     DELETEs (and the old key of a moving UPDATE) whose value was not
//     there. Existence is read from the versions, which one MGET reads
//     for a whole script call: a value Redis evicted still counts as
//     there for an UPDATE.
//   - One script call a run. A worker's changes go as script calls
//     (EVALSHA of applyScript) of at most the spec's batch changes (and
//     at most 1,000), all of an Apply in one pipeline; a call reads its
//     keys' versions with one MGET and writes json values and versions
//     with one MSET. A call is atomic: its rows and the
//     worker's checkpoint, {prefix}braid:sink:{sink}:{worker} ("seq:idx"),
//     move together. The first call of an Apply runs only if the
//     checkpoint is before its first change (sink.ErrBehind otherwise:
//     another runner applied it), every later one only if the checkpoint
//     is where the call before it left it, so that no call applies after
//     one that failed and a checkpoint never passes a change not applied.
//     A script that fails half way (out of memory, say) leaves some rows
//     written and the checkpoint where it was: applied again, they are
//     found applied by their versions. A server that lost its scripts
//     (a restart, SCRIPT FLUSH) fails every call from the first with
//     NOSCRIPT; Apply loads the script and sends those calls again.
//   - Backfill. A cache reader that misses writes the row it read from
//     MySQL with Backfill (BackfillScript), which writes only if the key
//     has no value and its version key is not a tombstone: a row read
//     before an UPDATE finds the UPDATE's value, one read before a DELETE
//     its tombstone, and neither is written. A live version without a
//     value is a value Redis evicted (maxmemory): the backfill writes, and
//     is stale only if the reader's row is older than the evicted value,
//     which an eviction in the moment between the read and the write
//     would take. Choose tombstone_ttl longer than a reader takes between
//     its read and its backfill; a policy that evicts keys with a TTL
//     (volatile-*) may evict tombstones early.
//   - DDL. A cache has no schema: a DDL only moves every worker's
//     checkpoint to it. Values written after an ALTER carry the new
//     columns; the rows not changed since keep the old ones. DROP TABLE
//     leaves the table's keys. A shard table's TRUNCATE cannot be applied
//     (a key does not say which shard table wrote it): it stops the sink
//     with an error saying to delete the logical table's keys, so that
//     readers re-populate them, and to set ddl: ignore to go past it.
//
// # Not supported
//
//   - Redis Cluster: a script call names keys of many hash slots, which a
//     cluster refuses. Use one Redis (or its replicas, read only).
//   - Two shard tables writing one key: the key holds the later change's
//     row (an INSERT that finds a value is counted in Upserts), and a
//     DELETE of either deletes it; there is no origin column.
//   - A {pk} text that ends in ":seq" names a key the sink's version keys
//     would collide with; verify's Sample leaves such keys out.
//   - mode: at-least-once changes nothing: the checkpoints are written
//     either way, and the versions make every apply idempotent.
//
// # Verify
//
// Target implements sink/verify's Target: Lookup builds a key from the
// source's key text and reads its value; Sample SCANs the logical
// table's key pattern. A column a value lacks (a hash's NULL, a column
// added after the row was written) is NULL, by the table's columns that
// the sink keeps in {prefix}braid:sink:{sink}:columns:{database}.{table}. A binary column's value is compared as canal's
// text of it (each byte a character), which equals MySQL's only for
// ASCII bytes.
//
// # Cost
//
// Each change writes two keys (value and version) through Lua, which
// copies every argument in and out: BenchmarkRedisSink measures
// redis-server at about 4 µs a json INSERT against 1.3 µs a plain SET of
// the same key and value (a script that only MSETs value and version,
// unguarded, takes 3.2 µs), so a sink bound by Redis's one thread applies
// roughly 0.4 times as many rows a second as a plain pipelined SET loop
// writes keys. In memory, each row kept costs a second key, its version
// (a deleted row's tombstone until it expires).
//
// # Concurrency
//
// A Target is safe for concurrent use: the runner's workers, ApplyDDL and
// verify share go-redis's pool of connections (workers + 2), each Apply
// on one of them for its pipeline.
package redis
