// Package flat encodes a destination's merged stream for its readers:
// canal's flat messages as JSON lines (what `braid capture` prints and
// Flink reads as canal-json), the same messages in braid's binary encoding
// (BinaryMessage), and the parallel writer that formats a batch on several
// goroutines (Writer.WriteEvents). It reads events only through package
// change's exported API, and keeps its own per-table caches (column keys).
//
// # Invariants
//
//   - Messages keep a table's column order; values are change's text.
//   - A message holds only the columns its row image holds (MINIMAL and
//     NOBLOB images leave some out): JSON's null, and the binary
//     encoding's NULL cell, are SQL NULL, never a column left out.
//   - Each transaction with rows, and each DDL, takes the next seq; a run of
//     more than MaxRows rows is split into messages of the same seq.
//   - WriteEvents writes the same messages in the same order as Write.
//
// # Concurrency
//
// A Writer is not safe for concurrent use; WriteEvents starts and waits
// for its own goroutines.
package flat
