// Package mysqlbinlog writes binlog events byte for byte as MySQL 8.0, 8.4
// and 9.x servers write them: binlog v4 framing with CRC32 checksums, the
// control events (FORMAT_DESCRIPTION, PREVIOUS_GTIDS, GTID, GTID_TAGGED_LOG,
// ANONYMOUS_GTID, QUERY, XID, ROTATE, HEARTBEAT_V2, STOP), TABLE_MAP with
// the optional metadata of binlog_row_metadata MINIMAL and FULL, the v2
// rows events and PARTIAL_UPDATE_ROWS (JSON diffs), TRANSACTION_PAYLOAD
// (zstd), and MySQL's binary JSON.
//
// It exists so that tests can serve a MySQL source without a MySQL server
// (none can be installed where braid's tests run). Each encoder is checked
// against bytes captured from real servers (samples_test.go), so a test
// that reads what this package writes reads what MySQL writes.
//
// The encoders are pure functions from a logical event to bytes: no clock,
// no randomness, no I/O. File strings events together and keeps the
// positions a server would write in each header.
//
// Above them, Write turns a Workload (tables described once as TableDef,
// then transactions of DDL or row statements) into what a MySQL 8.4
// server serving it would have: the binlog files, the position and GTID
// of each transaction, the rows of SHOW BINLOG EVENTS, and each table's
// SHOW CREATE TABLE and information_schema rows. A transaction with an
// Origin is one the server applied as a replica (log_replica_updates): it
// is logged under the origin's GTID and server_id with the origin's
// original_commit_timestamp, so two workloads can hold one history as a
// primary and its replica would, under different UUIDs, files and offsets.
//
// # Invariants
//
//   - Every event body is exactly what the named server version writes for
//     the same logical event; fields a test does not set take the value the
//     server writes by default, never a placeholder.
//   - File positions are consistent: each header's log_pos is the offset
//     of the byte after the event, as in a real binlog file; events inside
//     a TRANSACTION_PAYLOAD carry no checksum, as MySQL writes them.
//   - A value that the column cannot hold (a string longer than the
//     column, an ENUM member that does not exist) is an error, never
//     silently truncated.
//
// # Concurrency
//
// The encoders and Write are safe for concurrent use; a File is not.
package mysqlbinlog
