// Package kafka is the kafka sink's publisher (issue 22): it produces a
// destination's stream, one row change a record, to Kafka topics in
// transactions of a franz-go transactional producer, and finds in the
// topics themselves what they already hold committed, so that neither a
// retry, nor a crash, nor a former owner of the destination that goes on
// after a new one took over writes a message twice for a read_committed
// consumer.
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
//   - One producer at a time. The producer's transactional ID is the
//     sink's, the same on every node (TransactionalID: destination and
//     sink name). The first Publish of a client (after Open, and after an
//     error) initializes its producer ID, which fences every earlier
//     producer of the ID: the brokers abort its open transaction and
//     refuse its produce requests and commits from then on. So from the
//     moment a producer is initialized until another is, only its commits
//     change what the topics hold committed. Open alone fences nothing
//     (braid sink verify opens the sink to look at it).
//   - One writer per partition, in stream order. sink.Ordered hands
//     messages over in stream order from one goroutine, and a retry starts
//     again at a transaction's first message, so a message's (seq, n) is
//     the same on every run. Stage produces its records in the producer's
//     open transaction, which Commit commits (sink.Ordered stages many
//     store batches, as a sink.Stager, and commits every
//     sink.StageBatches of them, after sink.StageFor, or when the stream
//     has nothing more ready; Publish is Stage then Commit; a transaction
//     reaching chunk records is committed on the way), only once every
//     record of it is acked; a transaction with a failed record is never
//     committed (the next producer aborts it). So each partition holds
//     committed a prefix, in (seq, n) order, of what was sent to it.
//   - Exactly once, for a read_committed consumer. After making its
//     producer, and before it first writes to a topic, the publisher
//     reads the last committed record of each of the topic's partitions
//     (reading back from the last stable offset, past transaction markers
//     and aborted records) and takes its seq and n headers. A message at
//     or before its partition's last is already there (by the prefix
//     invariant) and is skipped; one after it is produced. By the first
//     invariant nothing changes what is committed behind the publisher's
//     back until it is fenced, so a restart from a cursor behind what was
//     committed, after a crash, an error or a takeover by another node,
//     writes nothing twice and skips nothing. What the sink resumes from
//     (the partitions' last records) is committed in the same transaction
//     as the messages: it is the messages.
//   - A fenced publisher stops. A Publish whose producer was fenced
//     returns ErrFenced (its transaction is aborted: nothing of it is
//     committed), and the next Publish waits fenceWait (30 s) before it
//     makes a producer again: time for a node that lost the destination
//     to learn it (within its lease) and stop the sink, so that a former
//     owner that was paused (SIGSTOP) never takes the sink back. Should it
//     (a node cut off from the cluster but not from Kafka runs on), the
//     two take turns, every 30 s, and each still reads what is committed
//     before it writes: slow, never a duplicate.
//   - Publish (and Commit) returns nil only once every record produced
//     (staged) is committed (acked by the in-sync replicas); sink.Ordered
//     acks a store batch only then, so the cursor never passes a message
//     the topic does not hold. After an error the publisher drops its
//     client; the next Stage makes a new producer (which aborts the open
//     transaction) and reads the partition ends again.
//
// What the exactly-once guarantee assumes: consumers read with
// isolation.level=read_committed (a read_uncommitted one also sees the
// records of aborted transactions: a retry's, or a fenced owner's); the
// sink alone writes its topics (a last record without seq and n headers
// is an error); a topic's partition count does not change while records
// of the stream may still be published again (a key then maps to another
// partition, and its partition's end no longer says what was written);
// and retention has not emptied a partition of every record (an empty
// partition is read as holding nothing). A transaction the brokers abort
// at its timeout (franz-go's default, 40 s; a transaction of up to 8192
// records, committed within about sink.StageFor, takes far less) fails its commit as a fenced one does,
// and costs a fenceWait.
//
// # Concurrency
//
// A Publisher's Publish, Stage and Commit are called by one goroutine at a
// time (sink.Ordered's); Stats, Skipped and Close are safe to call from
// others, and Close makes a Publish blocked on the brokers return. A
// Publish whose context ends closes its client, which fails the records
// on their way, and returns: its transaction is not committed, and the
// next producer aborts it. Publish waits for a transaction's records on
// a goroutine of its own, which it ends before it returns. The franz-go
// client runs its own goroutines, stopped by Close; reading partition
// ends uses a short-lived read_committed consumer client, closed before
// it returns.
package kafka
