// Package schema keeps each source's schema history by position: the
// tables' columns and keys as of any point of the binlog, from the schema
// loaded at the start plus every DDL read since, lexed and parsed with
// TiDB's parser (Tracker). Snapshot and Restore carry a history with a
// cursor, as a change.SchemaSnapshot.
//
// ShardDDL turns a shard table's DDL into its logical table's (names
// rewritten through a route, the text otherwise as written) with a
// canonical key, equal for equivalent statements of different shards: the
// comparison merging shard DDL (group) rests on.
//
// # Invariants
//
//   - A table's versions have strictly increasing positions; TableAt(pos)
//     is the version in force at pos, so rows written before an ALTER are
//     labelled with the columns of their time.
//   - ApplyDDL is idempotent by position: a restored tracker never applies
//     a DDL twice.
//   - A DDL that does not fit the model (it drops a column the model lacks,
//     adds one it has) is ErrDDLMismatch, never a silent guess.
//
// # Concurrency
//
// A Tracker is not safe for concurrent use: it belongs to one binlog
// Reader's goroutine. The *change.Table values it hands out are never
// modified afterwards (a DDL makes a new version).
package schema
