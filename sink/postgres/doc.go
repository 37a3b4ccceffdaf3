// Package postgres is the sink that applies a destination's stream to
// PostgreSQL tables (spec sinks: type: postgres), with pgx: each worker's
// transaction checks and advances the worker's checkpoint
// (<meta_database>.sink_checkpoint, a schema of the sink's database) and
// writes its rows, runs of them through COPY (PostgreSQL's bulk path) and
// the rest as pipelined statements, so a restart resumes exactly where
// the target stands.
//
// # Invariants
//
//   - Exactly once (mode: exactly-once, the default). The first statement
//     of a worker's transaction is sink_advance (a function Open makes
//     beside the checkpoint table): it locks the worker's checkpoint row,
//     fails the transaction with sink.ErrBehind if the row is at or past
//     the transaction's first change (another runner applied it), and
//     sets it to its last. The rows follow in the same transaction: one
//     pipeline ending in one Sync (an implicit transaction) when every
//     run goes as statements, else BEGIN, sink_advance and the
//     statements before the first COPY in one pipeline, each COPY, the
//     statements between them pipelined, COMMIT with the last; any
//     failure rolls it back. PostgreSQL commits the lot or nothing. The
//     checkpoint's seq is a bigint: a seq above 2^63-1 is an error (a
//     destination would need to merge a billion transactions a second for
//     three centuries).
//   - No silent loss. INSERT and UPDATE write the full after-image; an
//     UPDATE is an upsert (INSERT ... ON CONFLICT (key) DO UPDATE) whose
//     inserted rows (xmax = 0) are counted missing; an UPDATE that changes
//     the key deletes the old key first (counted missing if absent); a
//     DELETE that deletes less than it was given counts the rest missing.
//     Without an origin column, exactly once, an INSERT (and the new key
//     of a moved row) is a plain INSERT: finding its key fails the
//     transaction, and its changes are applied again a row a statement
//     so the row is named in a *sink.CollisionError. With an origin column,
//     or at least once, it is an upsert whose found rows are counted.
//   - The rows go as sink.Plan's runs (INSERTs, UPDATEs that keep their
//     key, DELETEs of one table version, changes of different keys
//     gathered, each key's in stream order). A run of INSERTs or UPDATEs
//     of 8 changes or more (copyMinRows) goes through COPY: in its binary
//     format when every column of the target is of a type copybin.go
//     encodes (the integers, numeric, the floats, the text types, bytea,
//     json, jsonb, date, timestamp, interval, bit) and every value has an
//     exact encoding there, else in its text format; either way each value
//     reads back as its statement parameter would. INSERTs whose keys are known new (exactly
//     once, the checkpoint's word, and not a snapshot chunk read again)
//     go straight into the target; when one finds its key there, the
//     transaction is rolled back and sent again, its INSERTs upserted
//     (origin column) or a row a statement (a collision, as below).
//     Upserts (UPDATEs; INSERTs at least once, of a snapshot chunk read
//     again, or sent again) go into a staging table, a temporary table of
//     the connection with the target's columns and types (ON COMMIT
//     DELETE ROWS), and are merged with INSERT ... SELECT ... ON CONFLICT
//     (key) DO UPDATE, a piece without a key twice at a time (it affects
//     a row once a statement). The other runs (smaller, DELETEs, moved
//     keys, keyless tables) go as multi-row statements of at most the
//     spec's batch rows, cut where a key would come twice, in a few sizes
//     (the batch, then powers of two) so each connection prepares few
//     statements.
//   - A table without a primary key (nor a unique key the schema model
//     took for one) matches rows by every column: a DELETE deletes one
//     equal row, an UPDATE deletes one equal to the before-image and
//     inserts the after-image.
//   - DDL is transactional in PostgreSQL: exactly once, ApplyDDL locks
//     the checkpoints (ErrBehind if every worker is past the DDL), runs the
//     translated statements and sets every worker's checkpoint, in one
//     transaction. TRUNCATE of a shard table deletes that shard table's
//     rows when origin_column is set and is an error otherwise.
//   - At least once (mode: at-least-once): no checkpoint table is read or
//     written (Checkpoints returns zeros); INSERTs are upserts, UPDATEs and
//     DELETEs idempotent, so a restart re-applies the changes since the
//     sink's cursor (saved after each store batch) harmlessly: each upsert
//     is preceded, in its transaction, by the DELETE of the rows holding
//     one of its unique values under another key (the source moved the
//     value there later, or changed the row's key), which the later change
//     that gave them the value brings back, so the table converges; a DDL runs
//     statement by statement, IF [NOT] EXISTS where PostgreSQL has it,
//     and an error that says it is done already is taken as applied.
//
// # Connection
//
// address, user, password (or password_file, password_env) and database
// of the spec; TLS as libpq's default, sslmode=prefer (TLS when the
// server offers it), and the PG* environment variables (PGSSLMODE,
// PGSSLROOTCERT, PGCONNECT_TIMEOUT, ...) apply as they do to psql.
// Exactly once, Open makes the meta schema, its sink_checkpoint table and
// sink_advance when they are missing (the user needs CREATE on the
// database); once they are there, a user who may only use them (USAGE on
// the schema, SELECT, INSERT, UPDATE on the table, EXECUTE on the
// function) runs a sink. The staging tables need TEMPORARY on the
// database (PUBLIC has it by default); a user without it upserts with
// statements instead.
//
// # Names
//
// A target table is "schema.table" inside the spec's database (spec
// tables:, default the logical name), quoted as written. Column names are
// lower case (MySQL compares them without case, PostgreSQL folds an
// unquoted name to lower case, so a table made by hand matches), as is
// the origin column. A MySQL index name becomes "table_name" (PostgreSQL
// index names are per schema), cut to 63 bytes.
//
// # Tables and types
//
// A target table that does not exist is an error naming it, unless
// create_tables is set: then it is created, at its first row, from the
// logical table's columns (change.Table), with its primary key and unique
// keys (the origin column first in each, as a text column, when
// origin_column is set). A CREATE TABLE in the stream is translated the
// same way, its key names kept. The mapping (MySQL → PostgreSQL):
//
//	tinyint, bool              smallint
//	smallint                   smallint (unsigned: integer)
//	mediumint                  integer
//	int                        integer (unsigned: bigint)
//	bigint                     bigint (unsigned: numeric(20))
//	decimal(p,s)               numeric(p,s)
//	float                      real
//	double                     double precision
//	bit(n)                     bit(n)
//	year                       smallint
//	date                       date
//	datetime(n), timestamp(n)  timestamp(n) without time zone: the wall-clock
//	                           time as the source server's time_zone shows it
//	time(n)                    interval (MySQL's TIME spans ±838 hours)
//	char(n), varchar(n)        varchar(n) (n characters in both)
//	tinytext … longtext        text
//	binary, varbinary, blobs   bytea (as are CHAR/VARCHAR/TEXT of charset binary)
//	geometry types             bytea (MySQL's internal form: SRID + WKB)
//	enum, set                  text (the member names, a set's joined by commas)
//	json                       jsonb
//	uuid, inet4, inet6         text
//
// Values: integers go as integers (an unsigned above 2^63-1 as its
// digits), floats as floats (through COPY, the shortest text that reads
// back as the same float), bytes as bytea (through COPY, its hex form;
// into a column of another type, the bytes as they are), and every other
// value as the text MySQL shows, which PostgreSQL parses for the column's type
// (decimals, dates, times, JSON, ENUM and SET names). A zero date
// (0000-00-00, or a zero month or day) is NULL in a nullable column and
// -infinity in a NOT NULL one. A BIT value is its n binary digits. Text
// holding a NUL character, which MySQL stores and PostgreSQL cannot, stops
// the sink with the server's error.
//
// # DDL
//
// The logical DDL (schema.ShardDDL, names rewritten to the target's) is
// parsed with TiDB's parser and translated: CREATE TABLE (as above);
// DROP TABLE; CREATE/DROP INDEX; ALTER TABLE with ADD COLUMN (type, NULL
// or NOT NULL, a literal or current-time DEFAULT, UNIQUE), DROP COLUMN,
// MODIFY and CHANGE (ALTER COLUMN TYPE ... USING col::type, SET/DROP NOT
// NULL, SET/DROP DEFAULT, RENAME COLUMN), RENAME COLUMN, ALTER COLUMN
// SET/DROP DEFAULT, ADD/DROP INDEX, KEY, UNIQUE and PRIMARY KEY, RENAME
// INDEX; and table options (ENGINE, COMMENT, charsets, ALGORITHM, LOCK),
// which PostgreSQL has nothing of, are dropped. Anything else (RENAME
// TABLE, foreign keys, FULLTEXT, partitions, generated columns' or
// expression defaults) stops the sink with an error naming the DDL and
// saying to set ddl: ignore and change the target by hand. Column
// positions (FIRST, AFTER) are ignored: rows name their columns.
//
// # Concurrency
//
// A Target is the thin client under sink.Keyed, safe for concurrent use
// by its workers: each worker has its own connection (so its statements
// are prepared, and its staging tables made, once on it), Checkpoints and ApplyDDL share another, and
// braid sink verify's Lookup and Sample a third: a sink holds up to
// workers + 2 connections. A worker's transactions come one after
// another. After a DDL the workers' connections are closed, so that
// statements prepared for a column's old type are not used with its new
// one.
package postgres
