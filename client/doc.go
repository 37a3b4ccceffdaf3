// Package client is the one Go client of braid's HTTP API (package
// api/native, and a cluster node's admin endpoints; every shape in package
// api/wire): it lists destinations, shows their state, creates, shows and
// deletes them and reads the cluster's status (admin.go), and consumes a
// destination's stream of flat messages under a client id, acking as it
// goes and resuming after a dropped connection. The braid CLI and the test
// harnesses use it for every call.
//
//	c, err := client.New("http://127.0.0.1:8081")
//	err = c.Stream(ctx, "shop", "billing", func(m client.Message) error {
//		return apply(m) // an error stops the stream; it is returned
//	})
//
// Streams come in braid's binary encoding of the flat messages, which the
// client decodes at a fraction of the JSON's cost; WithJSONLines asks for
// the NDJSON lines instead, for a consumer that keeps the server's JSON
// text (Message.Raw, MessageView.Raw).
//
// Stream decodes each row into a map. A consumer that must keep up with a
// fast stream reads the values in place instead, by row and column, with
// StreamViews (several times less CPU per row; the views are valid until
// the handler returns):
//
//	err = c.StreamViews(ctx, "shop", "billing", func(v *client.MessageView) error {
//		id := v.ColumnIndex("id")
//		for r := range v.Rows() {
//			val, ok := v.Value(r, id) // ok is false for NULL
//			...
//		}
//		return nil
//	})
//
// # Delivery
//
// Stream (and StreamViews) hands each message to handle once, in stream
// order, across reconnects. Every message carries its transaction's seq; a transaction
// with several tables or kinds of change, or more rows than fit one
// message, is several messages with the same seq. Stream keeps the last
// seq whose transaction was handled completely (known when a message of a
// higher seq arrives, or when the server sends a checkpoint for it) and how
// many messages of the transaction in progress it handled. After a
// reconnect the server sends again what was not acked: messages of
// complete transactions are dropped by seq, and the first messages of the
// transaction in progress by count (the server renders a transaction into
// the same messages every time).
//
// Acks go to the server by seq, every AckInterval, AckMessages messages or
// AckBytes bytes of them, before each reconnect and when Stream returns;
// they only ever cover complete transactions. A new process that starts
// Stream with the same client id receives again what the last one handled
// but did not ack; WithResumeAfter(seq) tells it the last seq the
// application made durable, so that those messages are dropped too.
//
// # Concurrency
//
// A Client is safe for concurrent use. Stream runs handle on the calling
// goroutine and owns one goroutine for acks, stopped before it returns.
package client
