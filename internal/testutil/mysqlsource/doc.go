// Package mysqlsource is a MySQL 8.0, 8.4 or 9.x server for tests: braid's
// reader connects to it as to a real MySQL source, reads its settings and
// schema, and dumps binlog files that a test gives as bytes. No MySQL
// binary can be installed where braid's tests run (Debian ships MariaDB
// only), so the MySQL-flavoured tests talk to this server, built on
// go-mysql's server package, and the binlog bytes come from an encoder
// checked against real servers' bytes (package mysqlbinlog beside it).
//
//	src := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
//	src.AddFile("binlog.000001", fileBytes)       // magic, FORMAT_DESCRIPTION, ...
//	src.PutTable("shop", mysqlsource.Table{Name: "orders", Create: "CREATE TABLE ..."})
//	// point a spec.Source at src.Addr() (user root, no password)
//	src.Append(moreEvents)                        // a live tail: dumps waiting get them
//	src.SetVariable("binlog_row_image", "MINIMAL") // to test a refusal
//	src.Unknown()                                 // statements it could not answer
//
// Most tests write their binlog with package mysqlbinlog and serve it with
// Serve (a whole workload) or Feed (a Writer's transactions as they come),
// which fill the catalog from the workload's tables too (workload.go).
// History serves one GTID history from several servers, a primary and
// replicas with their own uuids, file names and offsets, for failover
// tests (history.go). StartVector serves the one VECTOR table the SQL
// sinks' tests share (vector.go).
//
// # What it serves
//
//   - The handshake of the version (its version string, collation
//     utf8mb4_0900_ai_ci, TLS offered with a certificate from a test CA:
//     CAPEM, ClientTLS), caching_sha2_password (fast authentication from
//     the server's cache, full authentication over TLS or with the RSA
//     key) and mysql_native_password where the version has it (8.0; 8.4
//     after EnableNativePassword; never 9.x). The cache starts warm, as on
//     a server the users have logged in to (Config.ColdAuthCache,
//     FlushAuthCache). require_secure_transport=ON refuses clients
//     without TLS (error 3159); TLSFiles writes the CA and a client
//     certificate for a spec's tls settings.
//   - COM_REGISTER_SLAVE; COM_BINLOG_DUMP from file:pos and
//     COM_BINLOG_DUMP_GTID from a GTID set, classic or tagged (uuid:tag:n,
//     8.3+), parsed by the server itself; heartbeats at the period the
//     replica sets in @source_heartbeat_period / @master_heartbeat_period
//     (v2 when the dump flags ask); MySQL's error 1236, worded as the
//     version words it, for a missing or purged file, a position before 4,
//     past the end or inside an event, purged GTIDs, more GTIDs of the
//     server's uuid than it executed, GTID_MODE off, a replica that did
//     not declare itself checksum-aware; the dump's connection closes
//     after its error, as MySQL's does.
//   - The statements braid and go-mysql send, answered from the version's
//     system variables (SetVariable), the binlog files and a Catalog:
//     SELECT of variables and expressions, SELECTs of information_schema
//     (SCHEMATA, TABLES, COLUMNS, STATISTICS, KEY_COLUMN_USAGE,
//     CHECK_CONSTRAINTS, COLLATIONS) and of catalog tables (WHERE, joins,
//     ORDER BY, LIMIT: braid's snapshot chunks), SET (system and user
//     variables, NAMES), SHOW MASTER STATUS (8.0-8.3; error 1064 on 8.4+),
//     SHOW BINARY LOG STATUS (8.2+; error 1064 before; MariaDB's SHOW
//     BINLOG STATUS is 1064 everywhere), SHOW BINARY LOGS, SHOW BINLOG
//     EVENTS, SHOW [GLOBAL] VARIABLES [LIKE | WHERE], SHOW [GLOBAL]
//     STATUS [LIKE] (no rows: it keeps no counters), SHOW CREATE TABLE,
//     SHOW [FULL] COLUMNS and SHOW INDEX (go-mysql's schema package),
//     SHOW DATABASES, SHOW TABLES, SHOW REPLICAS, SHOW SLAVE HOSTS (8.0;
//     it and SHOW SLAVE STATUS are 1064 on 8.4+),
//     SHOW GRANTS (from User.Grants, which the server enforces: REPLICATION
//     SLAVE for a dump, REPLICATION CLIENT for the binlog list and status,
//     error 1227 otherwise),
//     KILL, USE, PURGE BINARY LOGS TO, prepared statements. Anything else
//     is answered with error 1235 (not supported) and recorded: Unknown.
//
// # What it does not do
//
//   - It executes nothing: an INSERT or a DDL sent to it is an unknown
//     statement. The binlog and the catalog change only when the test
//     changes them (AddFile, Append, PutTable), and nothing checks that
//     the two agree.
//   - Only what the tests need of SQL is there: no GROUP BY, subqueries,
//     views, or collation-aware comparison (names compare byte-wise,
//     as with lower_case_table_names=0).
//   - SHOW BINLOG EVENTS lists a TRANSACTION_PAYLOAD as one event, as
//     mysqlbinlog's Binlog.Events does (the test checks the two agree on
//     every row of a workload); Info is written for the events braid
//     reads (Query with its "use" and DDL xid, GTID, XID, ROTATE, table
//     maps and rows, payloads) and empty for the rest.
//   - Semi-synchronous replication, binlog encryption and the compressed
//     protocol are absent.
//
// # Invariants
//
//   - A file's bytes are only ever appended to; every event the server
//     sends is whole and as the test gave it, except the FORMAT_DESCRIPTION
//     (in-use flag cleared, created 0 past the file's start, checksum
//     recomputed, as mysqlbinlog.DumpFormatDescription) and the events the
//     server makes up (ROTATE, HEARTBEAT), whose checksum follows the
//     algorithm MySQL's Binlog_sender would use.
//   - A GTID dump sends no transaction whose GTID the replica named.
//   - Close ends every connection and waits for every goroutine.
//
// # Concurrency
//
// Server's methods are safe for concurrent use, also while clients are
// connected; each connection is served by a goroutine of its own.
package mysqlsource
