// Package kafka is the kafka sink's publisher (issue 22): it produces a
// destination's stream, one row change a record, to Kafka topics with an
// idempotent franz-go producer, and finds in the topics themselves what
// they already hold, so that neither a retry nor a crash writes a message
// twice.
//
// Each message carries one row (MaxRows 1), or is a DDL. Its record goes
// to the topic of its logical table (spec key topic, a template of
// {database} and {table}, default {database}.{table}; a name without them
// is one topic for every table), with:
//
//   - key: the JSON array of the row's primary-key values as text, in
//     canal's string form, NULL as null (["1001"]; see Key): the after
//     image's for an INSERT or UPDATE, the before image's for a DELETE. A
//     DDL's key is its logical table, "database.table". An UPDATE that
//     changes the primary key comes as the old key's DELETE and the new
//     key's INSERT (sink.Ordered splits it for a publisher of MaxRows 1), so
//     every change of a key is on that key's partition.
//   - value: the canal flat message's JSON, as `braid capture` prints it,
//     which Flink reads as canal-json.
//   - headers: seq (the transaction's seq, decimal), n (the message's
//     place in its transaction, from 0) and source.
//   - partition: chosen here, before producing, as Kafka's default
//     partitioner would (murmur2 of the key, modulo the topic's
//     partitions), so that all changes of one key go to one partition in
//     stream order and the publisher knows where each record lands.
//
// A topic is looked up the first time a message for it comes, asking for
// its metadata with auto-creation allowed: brokers set to create topics
// (auto.create.topics.enable) create it with their default partitions;
// others answer that it is missing, which is an error (ErrNoTopic) that
// says to create it. The publisher never creates topics itself: how many
// partitions a topic has is the operator's choice.
//
// # Invariants
//
//   - One writer per partition, in stream order. sink.Ordered hands
//     messages over in stream order from one goroutine, and a retry starts
//     again at a transaction's first message, so a message's (seq, n) is
//     the same on every run. The producer is idempotent: the brokers keep
//     each partition's records in the order produced, without duplicates
//     from its retries, and fail a record only when it was never written.
//     So each partition holds a prefix, in (seq, n) order, of what was sent
//     to it.
//   - Exactly once. Before it first writes to a topic (on start, and
//     again after any failed Publish) the publisher reads the last record
//     of each of its partitions and takes its seq and n headers. A message
//     at or before its partition's last is already there (by the prefix
//     invariant) and is skipped; one after it is produced. A restart from
//     a cursor behind what was produced, after a crash or an error,
//     therefore writes nothing twice and skips nothing.
//   - Publish returns nil only once every record it produced is acked by
//     the in-sync replicas; sink.Ordered acks a store batch only then, so the
//     cursor never passes a message the topic does not hold. After an
//     error Publish waits for every record's outcome before it returns, so
//     nothing is still on its way when the partition ends are read again
//     (by a new client, with a producer ID of its own).
//   - No record is written past a failed one of its partition. Publish
//     flushes a chunk only once franz-go has put every record of it in its
//     partition's buffer (manual flushing; a new client holds a topic's
//     records until the topic's metadata comes, and would otherwise send
//     the first ones alone): a batch the brokers fail makes franz-go fail
//     every buffered record of that partition after it, and Publish
//     produces no further chunk after a failure. A sequence the brokers lost
//     (OUT_OF_ORDER_SEQUENCE) fails the records rather than sending them
//     again out of order. Should a record still be written past a failed
//     one, Publish returns ErrGap, then and at every later call, and the
//     sink stops rather than lose the failed one silently.
//
// What the exactly-once guarantee assumes: the sink alone writes its
// topics (a last record without seq and n headers is an error); a topic's
// partition count does not change while records of the stream may still be
// published again (a key then maps to another partition, and its
// partition's end no longer says what was written); retention has not
// emptied a partition of every record (an empty partition is read as
// holding nothing); and a crashed process's last produce requests have
// reached the brokers, and been replicated, before the sink starts again
// (they have, in the seconds a restart takes).
//
// # Concurrency
//
// A Publisher's Publish is called by one goroutine at a time
// (sink.Ordered's); Stats, Skipped and Close are safe to call from
// others, and Close makes a Publish blocked on the brokers return. A Publish whose
// context ends fails the records not yet sent at once and waits for
// those sent; if the brokers have not answered for them 10 s later it
// closes its client, which fails them (a broker that had read one may
// still write it: the next Publish reads the partition ends again).
// Publish waits on a goroutine of its own, which it ends before it
// returns. The franz-go client runs its
// own goroutines, stopped by Close; reading partition ends uses a
// short-lived consumer client, closed before it returns.
package kafka
