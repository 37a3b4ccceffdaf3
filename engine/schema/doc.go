// Package schema keeps each source's schema history by position: the
// tables' columns and keys as of any point of the binlog, from the schema
// loaded at the start plus every DDL read since, lexed and parsed with
// TiDB's parser (Tracker). Snapshot and Restore carry a history with a
// cursor, as a change.SchemaSnapshot.
//
// The tracker also follows online schema changes (OnlineRules,
// onlineddl.go): per table, the shadow copy a tool created and the DDL
// run on it, kept in the snapshot until the swap hands it out
// (OnlineSwaps) as the table's own; a shadow dropped without a swap is
// forgotten.
//
// ShardDDL turns a shard table's DDL into its logical table's (names
// rewritten through a route, the text otherwise as written) with a
// canonical key, equal for equivalent statements of different shards: the
// comparison merging shard DDL (group) rests on.
//
// TargetDDLs rebuilds a DDL for a SQL target: parsed, checked against
// what a shard's writer may make a target run, renamed to the target's
// tables and restored from the parsed form (target.go); QuoteString is
// the one MySQL string literal braid writes.
//
// Every parse of DDL text takes the sql_mode the statement ran under
// (SQLMode, from its query event): the same text is another statement
// under NO_BACKSLASH_ESCAPES or ANSI_QUOTES.
//
// # Invariants
//
//   - A table's versions have strictly increasing positions; TableAt(pos)
//     is the version in force at pos, so rows written before an ALTER are
//     labelled with the columns of their time.
//   - ApplyDDL is idempotent by position: a restored tracker never applies
//     a DDL twice.
//   - Text a target runs is never a shard's text: TargetDDL.Text is
//     restored from the parse, with names in backquotes and every string
//     escaped for the default sql_mode.
//   - A migration's DDL is recorded once, by position (with ApplyDDL's
//     idempotence), and handed out once, at the swap's position.
//   - A DDL that does not fit the model (it drops a column the model lacks,
//     adds one it has) is ErrDDLMismatch, never a silent guess.
//   - A DDL that acts on a table and changes nothing the model keeps (ADD
//     FULLTEXT INDEX, ENGINE=) makes no version; Kept names the table, so
//     the DDL still goes out.
//
// # Concurrency
//
// A Tracker is not safe for concurrent use: it belongs to one binlog
// Reader's goroutine. The *change.Table values it hands out are never
// modified afterwards (a DDL makes a new version), by the tracker or by
// whoever holds them: the tracker reads them, every field, when it
// compares a DDL's result with the version in force, so a holder that
// would add to one (package group's logical names) copies it first.
package schema
