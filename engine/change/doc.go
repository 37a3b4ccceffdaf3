// Package change is braid's change model: Event (a transaction's begin,
// rows, commit, a DDL, progress, a heartbeat), RowChange, Table and Column,
// Position, Value; and the text of values: every function that appends a
// column value as text (canal's string form, plain or as a JSON string)
// lives here, once, so that every output format shows a value the same way.
//
// A RowChange keeps its row images as the binlog wrote them (Images, for
// the common column types) or as go-mysql decoded them, and converts them
// only when asked: AppendText, AppendJSON and, for raw images,
// RawOffsets with AppendRawText format a value straight from its bytes;
// Before and After decode Values. A Codec knows how to read one table
// version's values (built by package binlog from the table map).
//
// MySQLGTIDSet is a MySQL GTID set, tagged GTIDs (8.3+) included: its
// text (parse, normal form), its binary encoding (COM_BINLOG_DUMP_GTID,
// PREVIOUS_GTIDS), Add, Union, Minus and Contains; go-mysql's knows no
// tags. MySQLExecuted is such a set as a reader grows it, a transaction at
// a time without allocating; GTIDState is a source's GTID state at a
// boundary (MariaDB's position, or a MySQLExecuted snapshot printed only
// when a cursor is saved).
//
// SchemaSnapshot is the serialized form of a source's schema history
// (package schema), carried by an Event after a DDL so that a cursor at
// that boundary holds the schema of its time.
//
// # Invariants
//
//   - An Event and what it points to are read-only once emitted; a
//     RowChange is safe for concurrent readers.
//   - Text from raw images and from go-mysql's decoded values is the same,
//     byte for byte (tested against go-mysql on a real server), for every
//     type but MySQL's binary JSON and VECTOR, which braid always reads
//     raw: their text is what MySQL prints (SELECT, VECTOR_TO_STRING),
//     which go-mysql's is not.
//   - A PARTIAL_UPDATE_ROWS event's after images are whole: its JSON
//     diffs are applied to the before images when the event is split
//     (SplitPartialRows), never left for a reader to apply.
//   - Value text is valid UTF-8: columns of other charsets are converted,
//     binary values shown as ISO-8859-1 text, as canal does.
//
// # Concurrency
//
// Everything here is immutable once built, except ZoneClock, which belongs
// to one Codec's reader goroutine.
package change
