// Package stream holds a destination's merged stream for its consumers: the
// bounded Store between the merge and the readers (each client id with its
// own batches, acks and cursor mark), the Pipeline that runs a
// group.Destination into a Store, and the Registry of the destinations a
// node serves, which the canal and native servers look them up in.
//
// In the data path (binlog → group → stream → flat/api) the store is where
// a merged event waits, typed and named, until every consumer has read it;
// it hands the same *change.Event to every reader, which formats it for
// its protocol (package flat, api/canal).
//
// # Invariants
//
//   - The store is bounded in events and bytes; when it is full, Put waits
//     (backpressure reaching the sources); nothing is dropped.
//   - An event stays until every subscribed client id has acked it; a
//     client's Mark is the cursor after the last transaction it acked whole.
//
// # Concurrency
//
// Store and Registry are safe for concurrent use. A Pipeline owns the
// goroutine that runs its destination; Close stops it and waits.
package stream
