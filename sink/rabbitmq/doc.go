// Package rabbitmq is the rabbitmq sink's publisher (issue 22): it sends a
// destination's stream, as canal flat messages in stream order, to one
// durable topic exchange of a RabbitMQ broker, with publisher confirms, so
// that the sink's cursor moves only past messages the broker holds.
//
// Each message goes to the exchange (declared durable, type topic, if
// missing) with the routing key of its logical table (spec key
// routing_key, default {database}.{table}, the names escaped: names.go);
// its body is the flat message's JSON as `braid capture` prints it,
// content type application/json, persistent, message_id "dest:seq:n" and
// headers seq (int64) and source. With queues: per-table the publisher
// declares, the first time it meets a routing key, a durable queue of
// that name (QueueName) with x-single-active-consumer (a standby consumer
// takes over in order) and binds it with the key.
//
// # Invariants
//
//   - Publish sends its messages in order on one channel in confirm mode,
//     all of them before it waits, and returns nil only once the broker has
//     acked every one and returned none: sink.Ordered acks a store batch
//     only then, so the cursor never passes a message the broker does not
//     hold.
//   - Every message is mandatory. An unroutable one (no queue bound for
//     its key) is returned by the broker before it is acked, and Publish
//     looks for a return before it counts each ack, so a returned message
//     is an error that stops the batch, never a message acked and lost. A
//     nack, a closed channel or connection are errors too; the publisher
//     drops its connection after any error and dials again at the next
//     Publish, which sink.Ordered calls with the messages since its last
//     ack.
//   - A retry in the same process does not publish again a message the
//     broker confirmed (the publisher remembers the last); the sink.Runner
//     retries with backoff, so a sink stopped by a return goes on by
//     itself once a queue is bound, without flooding its queues.
//   - At least once. A restart after a crash (or a retry of a message sent
//     and not confirmed) publishes again the messages after the sink's
//     cursor that the broker may already hold. They carry the same message_id ("dest:seq:n": the seq of their
//     transaction and their place in it, the same on every run), so a
//     consumer de-duplicates by message_id, or by the seq header, which
//     never decreases in a queue but for such a replay.
//
// # Concurrency
//
// A Publisher's Publish is called by one goroutine at a time
// (sink.Ordered's); Stats and Close are safe to call from others, and
// Close makes a Publish that waits for confirms return an error. Canceling Publish's
// context ends it even inside a write the broker holds back (its flow
// control, connection.blocked, under a resource alarm): the publisher
// closes the socket (a context.AfterFunc; the amqp091-go connection has
// its own reader and heartbeater).
package rabbitmq
