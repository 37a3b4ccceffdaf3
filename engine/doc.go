// Package engine reads one MySQL/MariaDB source: its binlog connection, the
// decoding of row events into braid's change model, the schema history that
// names their columns, and the rendering of changes as canal flat messages.
//
// A Parser connects to one server as a replica (go-mysql's BinlogSyncer,
// MariaDB or MySQL flavor), and emits Events: EventBegin, EventRows (the
// row changes of one binlog rows event), EventCommit; EventDDL for schema changes; EventProgress for
// transactions without a selected row; EventHeartbeat while the server is
// idle. Rows of tables outside the spec's table filter are never decoded;
// the row images of the common column types stay as the binlog wrote them,
// formatted straight from their bytes and decoded to Values only when a
// consumer asks (rowimage.go).
//
// Column names come from the table-map event when the server logs them
// (binlog_row_metadata=FULL), else from a SchemaTracker: the schema at the
// start position plus every DDL read since, parsed with TiDB's parser and
// versioned by position. Rows written before an ALTER are labelled with the
// columns of their time, never with the live schema.
//
// # Invariants
//
//   - Events of one transaction come contiguously: Begin, Rows, Commit. A
//     transaction is never split across a reconnect: after a lost connection
//     the parser reads again from the last boundary (the last EventCommit,
//     EventDDL or EventProgress position) and suppresses what it had already
//     emitted, so nothing is lost and nothing is emitted twice.
//   - Positions only move forward; an EventCommit's Pos is a boundary a new
//     Parser can Resume from.
//   - A row whose column count differs from the schema known at its position
//     is an error naming the table and position, never a silent mislabel.
//   - The replica server_id is the spec's, or derived from the destination
//     and source names (DeriveServerID); never random.
//
// # Concurrency
//
// Parser.Run owns one goroutine's worth of work (go-mysql's reader calls back
// into it) and calls emit from it, one event at a time. A Parser is used by
// one Run at a time. SchemaTracker and FlatWriter are not safe for
// concurrent use; TableFilter is read-only after CompileTableFilter.
package engine
