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
// share a Redis: the sink writes nothing outside it (and two sinks'
// prefixes must not be prefixes of each other).
//
// The sink keeps keys of its own under {prefix}braid:sink:, and a version
// key beside each row ({key}:seq, below). Names and values come from
// whoever writes to a shard, so a row key is escaped to stay out of both:
// one that would start, after the prefix, with "braid:sink:" or "~" gets
// a "~" there ({table}:{pk} of table braid and key sink:shop.cache:0 is
// ~braid:sink:shop.cache:0), and one that would end with ":seq" or "~"
// gets a "~" at its end (t:5:seq~). Every other key is as the template
// spells it, and KeyFor escapes as the sink does.
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
//     absent or older than the change's (seq, then index, as numbers:
//     any uint64 compares exactly): applying a change twice, or an older
//     one after a newer, changes nothing. INSERT and UPDATE write the full
//     after-image (hash: DEL, then HSET, so that a dropped column's field
//     goes) and the live version (a SET, which drops a tombstone's TTL);
//     DELETE deletes the value and leaves the tombstone; an UPDATE that
//     changes the key does both, the old key under the tombstone.
//     Counted: Applied, the row changes written; Upserts, the INSERTs
//     whose key had a live version (a value the sink wrote, of an older
//     change); Missing, the UPDATEs whose key had no live version (never
//     written, or deleted; the after-image is written all the same), and
//     the DELETEs (and the old key of a moving UPDATE) whose value was
//     not there. An UPDATE's existence is read from the versions: a value
//     Redis evicted still counts as there; a DELETE's from its DEL.
//   - One transaction an Apply. A worker's changes go as transactions of
//     at most 2,048 changes (an Apply's, usually all of them), each in
//     two round trips on a connection of its own: WATCH of the worker's
//     checkpoint, {prefix}braid:sink:{dest}.{sink}:{worker} ("seq:idx"), GET of
//     it and MGET of the versions of the keys the changes touch; then,
//     the versions compared in Go (a key's later change in the
//     transaction sees its earlier one), MULTI, the writes of each key's
//     last state (DELs, HSETs, MSETs of json values and live versions,
//     a SET ... PX of each tombstone), the checkpoint's SET, EXEC. A
//     statement (MGET, MSET, DEL) carries the keys of at most the spec's
//     batch changes. The rows and the checkpoint move together: none of
//     those commands can fail alone, and Redis refuses a whole EXEC (out
//     of memory, say), so a transaction is applied whole or not at all,
//     and an error leaves the checkpoint where it was (the runner
//     applies from it again, and the versions find what was applied
//     before). A transaction runs only if the checkpoint is before its
//     first change (sink.ErrBehind otherwise: another runner applied
//     it), and EXEC runs nothing if the checkpoint was written since the
//     WATCH (ErrBehind: another runner is applying).
//   - Versions read, not watched. A transaction reads its keys' versions
//     before its EXEC without watching them (WATCH of n keys costs Redis
//     7.0 n squared). They cannot go stale in between: every write of a
//     key is a transaction that moves a checkpoint past the change, and
//     a newer change of a key is written only once the checkpoint of the
//     worker applying the older one is past it (on the same worker, by
//     its own transaction; on another, because sink's Causality makes
//     the newer change wait for that transaction; another runner has the
//     same workers and the same checkpoint keys). So a transaction that
//     read a key's version before a newer change of it was written finds
//     its worker's checkpoint past its first change (ErrBehind), or
//     written since its WATCH (EXEC runs nothing). Hence what is not
//     supported below: writers of one key that no checkpoint orders.
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
//   - Redis Cluster: a transaction names keys of many hash slots, which a
//     cluster refuses. Use one Redis (or its replicas, read only).
//   - Keys the checkpoints do not order (see Versions read, not
//     watched): two sinks, or two logical tables (a template without
//     {table}), whose keys meet; or two runners of one sink with
//     different workers at once. The later write of a key may then be
//     the older change.
//   - Two shard tables writing one key: the key holds the later change's
//     row (an INSERT that finds a value is counted in Upserts), and a
//     DELETE of either deletes it; there is no origin column.
//   - mode: at-least-once changes nothing: the checkpoints are written
//     either way, and the versions make every apply idempotent.
//
// # Verify
//
// Target implements sink/verify's Target: Lookup builds a key from the
// source's key text and reads its value; Sample SCANs the logical
// table's key pattern. A column a value lacks (a hash's NULL, a column
// added after the row was written) is NULL, by the table's columns that
// the sink keeps in {prefix}braid:sink:{dest}.{sink}:columns:{database}.{table}. A binary column's value is compared as canal's
// text of it (each byte a character), which equals MySQL's only for
// ASCII bytes.
//
// # Cost
//
// Each change reads one key (its version, in an MGET) and writes two
// (value and version, in an MSET), in statements of many keys, with no
// Lua: BenchmarkRedisSink measures redis-server at about 2.5 µs a json
// INSERT (MGET 0.5, MSET 1.9; Redis's commandstats) against 1.4 µs a
// plain SET of the same key and value, and the sink at 0.5 to 0.6 times
// as many rows a second as a plain pipelined SET loop writes keys. A Lua
// script a transaction, which this replaced, took 4.5 µs a change (Lua copies
// every argument in and out; a script that only MSETs value and version
// took 3.2) and reached 0.3 to 0.4 times. In memory, each row kept costs
// a second key, its version (a deleted row's tombstone until it
// expires).
//
// # Concurrency
//
// A Target is safe for concurrent use: the runner's workers, ApplyDDL and
// verify share go-redis's pool of connections (workers + 2, at least 10),
// each transaction on one of them from its WATCH to its EXEC.
package redis
