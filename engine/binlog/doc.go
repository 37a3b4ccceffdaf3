// Package binlog reads one MySQL/MariaDB source: the replica connection
// (go-mysql's BinlogSyncer, MariaDB or MySQL flavor, reading raw events that
// braid parses itself: payload.go), the live schema loaded
// at the start, row decoding into package change's model, and reconnects
// that replay from the last boundary.
//
// A Reader connects to one server as a replica and emits change.Events:
// EventBegin, EventRows (the row changes of one binlog rows event),
// EventCommit; EventDDL for schema changes; EventProgress for transactions
// without a selected row; EventHeartbeat while the server is idle (Stale
// when more binlog came right behind it: sent a while ago). Rows of
// tables outside the spec's table filter are never decoded; the row images
// of the common column types stay as the binlog wrote them (change.Images),
// formatted straight from their bytes and decoded to Values only when a
// consumer asks.
//
// Column names come from the table-map event when the server logs them
// (binlog_row_metadata=FULL), else from a schema.Tracker: the schema at the
// start position plus every DDL read since, versioned by position. Rows
// written before an ALTER are labelled with the columns of their time,
// never with the live schema. A live table whose SHOW CREATE TABLE the
// model cannot parse (MariaDB's PERIOD FOR, system versioning) is built
// from information_schema instead (schema_columns.go).
//
// MySQL 8 and 9 sources: a compressed transaction (TRANSACTION_PAYLOAD,
// binlog_transaction_compression=ON) is unwrapped and its events read as
// any others, at the payload's positions (payload.go); a
// PARTIAL_UPDATE_ROWS event's JSON diffs are applied to the before image
// (change.SplitPartialRows); GTIDs are "uuid:n" or "uuid:tag:n", and a
// transaction's commit time is its original_commit_timestamp in µs
// (gtid8.go). Binary JSON and VECTOR values are shown as MySQL prints them.
//
// Before it streams, a reader checks its source (Check, check.go): the
// flavor, version and each setting braid relies on (log_bin,
// binlog_format, binlog_row_image, binlog_row_metadata, MySQL's
// binlog_row_value_options, binlog_transaction_compression and gtid_mode,
// server_id, binlog_checksum, the user's privileges), each ok, a warning
// (honoured with a consequence: a MINIMAL or NOBLOB row image gives
// partial images, which the stream carries as they are) or a problem that
// stops the source with one line naming the setting and what to change.
// CheckAll runs it on every source at once so that a command prints every
// problem together. CheckAndHold does so for a destination's readers
// about to start (braid capture) and holds each checked connection in
// the package's pool (held.go), by address: a reader of the very spec
// checked starts on it, the settings read, instead of dialling and
// asking again. Once the checks have decided the start position,
// the first binlog connection (connect, register, dump request) is
// opened beside the rest of the start (the GTID state there, the
// schema); a start the schema read moves after all is connected again
// at the new position. Statements follow the version the server announced:
// its end of binlog is SHOW BINARY LOG STATUS on MySQL 8.2+ (8.4 removed
// SHOW MASTER STATUS), SHOW BINLOG STATUS on MariaDB 10.5.2+; type names
// are spelled as the server prints them (MySQL 8.0.19+: int, not
// int(11)). A source's tls block makes every connection to it, the
// binlog's and the queries', use TLS (then mysqlauth's guard, which reads
// the authentication in clear, gives way to the certificate check).
//
// A source is a set of servers behind one address that a failover moves
// (failover.go, gtid_mysql.go): every boundary event carries the source's
// GTID state there (MariaDB: the last GTID of each domain; MySQL: the
// executed set, tags included, printed only when a cursor is saved) and
// the server whose binlog its position is in, which the cursor keeps. On
// every connect the reader asks who answers (server_id, host:port and
// log_bin_basename; MySQL's server_uuid): the same server is resumed by
// file:pos; another MariaDB server in gtid_strict_mode, or MySQL server
// with gtid_mode=ON, by GTID (slave_connect_state, COM_BINLOG_DUMP_GTID),
// once it holds the cursor's state (a lagging one is waited for, with a
// line every 10 s) and has purged nothing after it (else the source
// stops, naming the purged GTIDs); transactions it sends that were
// emitted already are dropped by GTID. Anything else (no GTID state,
// strict mode or gtid_mode off) stops the source with one line saying
// why and what to do. Each switch is one
// log line (old and new server, why, how long) and counted in Stats.
//
// A writable server that lacks transactions braid emitted (a promoted
// replica: an asynchronous failover lost them) is waited on, the loss
// named (Stats.Lost, Loss), until an operator accepts it (AcceptLoss,
// or Config.Accepted for a loss accepted in an earlier run): the reader
// then goes on there from the GTID state the server holds of braid's and
// emits first a marker transaction naming the lost GTIDs
// (change.Event.Lost), a boundary with no position whose GTID state a
// resume starts from (lost.go).
//
// A source's address may list its servers (servers.go): the reader
// reads one at a time, the first listed that answers and is of the kind
// the spec's read_from prefers (a writable primary, or a read_only
// replica; else the first that answers). A server it loses is retried
// for failover_after; then the list is tried in order, the lost one
// last, and the first that passes the checks above is read (a lagging
// one is waited for up to failover_after, one that purged what braid
// needs or whose settings braid cannot read is refused, named in one
// line, and the next tried). The reader stays on the server it switched
// to until it loses that one.
//
// Online schema changes (Config.OnlineDDL, spec online_ddl): the helper
// tables of gh-ost and pt-online-schema-change are modelled but never
// selected, so their rows and DDL are never emitted; the swap that
// renames a shadow copy to its table goes out as the DDL the tool ran on
// the copy, rewritten to the table (onlineddl.go).
//
// A row change travels down the house once: this package reads and decodes
// it into a change.Event; package group merges it with the other sources'
// and gives it its seq; package stream holds it for its consumers; package
// flat (native API, braid capture) or api/canal formats it for each reader.
//
// # Invariants
//
//   - Events of one transaction come contiguously: Begin, Rows, Commit. A
//     transaction is never split across a reconnect: after a lost connection
//     the reader reads again from the last boundary (the last EventCommit,
//     EventDDL or EventProgress position) and suppresses what it had already
//     emitted, so nothing is lost and nothing is emitted twice.
//   - Positions only move forward; an EventCommit's Pos is a boundary a new
//     Reader can Resume from.
//   - A row whose column count differs from the schema known at its position
//     is an error naming the table and position, never a silent mislabel.
//   - A row of a selected table is never dropped for want of its schema:
//     without one (and without FULL row metadata naming its columns) the
//     reader stops with one line naming the source, the table, why and
//     what to do.
//   - No event is skipped unread: a type braid does not know (or an XA
//     PREPARE, an INCIDENT, statement-based LOAD DATA) and a rows event it
//     cannot decode stop the source with one line naming the event's type
//     and position and what to do; the types it reads past on purpose are
//     listed in events.go (ignoredEvents).
//   - A position never points inside a transaction payload: its events
//     take the payload's start and end.
//   - The replica server_id is the spec's, or derived from the destination
//     and source names (spec.DeriveServerID); never random.
//   - A streaming Reader's spec names one address, the server it reads
//     (of a list, written only by Run's goroutine, under statsMu);
//     every binlog connection and query goes to it.
//   - A held connection (CheckAndHold) goes to one reader at most, one
//     of exactly the spec it was checked for (server_id and password
//     included), within heldFor (5 s) of the check; one no reader took
//     is closed then, or at the check's release, never left open.
//
// # Concurrency
//
// Reader.Run owns one goroutine's worth of work and calls emit from it, one
// event at a time; go-mysql's reading goroutine parses the events ahead of
// it (eventParser, which shares only its queue and the Reader's settings
// fixed before streaming). A Reader is used by one Run at a time. Stats,
// Loss and AcceptLoss are safe to call from any goroutine while it runs.
// The pool of held connections is safe for concurrent use: the check's
// goroutines put, readers take, its timers and the release drop.
package binlog
