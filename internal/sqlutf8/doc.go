// Package sqlutf8 opens the SQL sessions braid uses so that their text is
// UTF-8 whatever the server's defaults: utf8mb4 on MySQL and MariaDB,
// client_encoding UTF8 on PostgreSQL. Every connection braid opens to a
// source or a target is made (or configured) here, one helper per driver,
// so that no caller can forget.
//
// Why it matters: a session's character set decides how the server
// converts the names and values it sends and receives. go-mysql v1.14 asks
// in its handshake for collation 255 (utf8mb4_0900_ai_ci), which MariaDB
// does not know; MariaDB then silently gives the session its server
// default, latin1 unless configured, and a table named 名前 comes back as
// ?? (SHOW CREATE TABLE of it fails), a value 名前ü😀 as ??\ufffd?. A shard
// user who can create a table could so stop every destination that
// selects its schema, and every value outside latin1 was corrupted.
//
// # Invariants
//
//   - A go-mysql connection from Connect, or a binlog connection configured
//     with SetNames, has character_set_client, _connection and _results
//     utf8mb4: the handshake asks for utf8mb4_general_ci (id 45, known to
//     MySQL 5.5.3+ and every MariaDB), and SET NAMES utf8mb4 follows it, for
//     servers that ignore the client's handshake charset
//     (skip-character-set-client-handshake) or change it in init_connect.
//   - A go-sql-driver pool configured by MySQLDriver sends SET NAMES utf8mb4
//     COLLATE utf8mb4_general_ci on every new connection.
//   - A pgx configuration passed through Postgres has client_encoding UTF8,
//     which overrides a role's or database's own default.
//
// # Concurrency
//
// The functions keep no state; they are safe for concurrent use.
package sqlutf8
