// Package verify compares a sink's target with the sources (braid sink
// verify): random rows of each logical table's shard tables are looked
// up in the target, and random rows of the target table are looked up at
// the sources, every column compared as text; and it finds which shard
// tables hold a key (Holders), so that a collision error names both
// writers.
//
// The sources are read through their own connections (the spec's
// addresses and users, never the replication stream); the shard tables
// of a logical table are those the spec's table filter selects and its
// route rules rename to it (spec.TableFilter, group.Router), listed
// from each source's information_schema. A target implements Target
// (sink/mysql does; sink/postgres may).
//
// How rows are drawn: N of each logical table at the sources, spread
// over its shard tables (each shard table in a random order asks for
// its share of what is left, so an empty one gives its share to the
// others), and N from the target table. Within one table the draw is
// mysql.SampleRows' (random points of an integer primary key, read by
// index seeks; ORDER BY RAND() only for a table without such a key).
//
// # Invariants
//
//   - A difference is reported only if it persists: the rows that differ
//     in the first pass are read again (sources and target) after the
//     sink's applied seq has reached the destination's head seq of that
//     moment, up to three times. A change the sink had not applied yet is
//     therefore not a difference; one that stays different is. When the
//     sink does not reach the head in time (it is stopped, or behind),
//     the report says so (Settled false) and keeps what it has. With no
//     stream to wait for (Config.Progress nil: braid sink verify -f, run
//     where no server is), the target is compared once, where it stands.
//   - Nothing is written: the sources and the target are only read.
//   - No secret and no row of data goes to the log; the report holds the
//     rows' keys and differing values, which is what it is for.
//
// # Concurrency
//
// Run and Holders open their own connections to the sources and close
// them before they return; they may run at the same time as the sink and
// as each other. A Target is used by one Run at a time.
package verify
