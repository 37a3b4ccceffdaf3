// Package client is the one Go client of braid's HTTP API (package
// api/native, and a cluster node's admin endpoints; every shape in package
// api/wire): it lists destinations, shows their state, creates, shows and
// deletes them and reads the cluster's status (admin.go), and consumes a
// destination's stream of flat messages under a client id, acking as it
// goes and resuming after a dropped connection, at the same node or any
// other of the cluster's. The braid CLI and the test harnesses use it for
// every call.
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
// # Nodes
//
// New takes one node's base URL or several, comma-separated. Any node
// serves any destination (it redirects to the owner). Stream learns the
// cluster's live nodes from the nodes it knows (GET /v1/cluster/members,
// which any user may call), before its first connection and again at
// every reconnect, and moves on to the next node it knows when the one in
// use does not serve: one node's URL is enough to fail over to any node
// of the cluster. The nodes given are always kept, what was learned is
// replaced by each answer, and a learned node is taken only with the
// scheme of the node that named it (members.go). Nodes lists them;
// Members asks for them at once.
//
// # Where a stream starts
//
// A client id new to the destination starts where WithFrom says:
// earliest, latest, seq:N or time:RFC3339 (default: the destination's
// consumers.start); a client id that has a cursor on the server goes on
// from it. WithEphemeral makes a client id of which the server keeps no
// cursor, forgotten when its stream ends (braid tail without --client-id):
// once a node served it, each reconnect asks the next node for the
// transaction after the last one handled whole (from=seq:N), since that
// node knows nothing of it.
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
// goroutine and owns two goroutines, one for acks and one that learns the
// cluster's nodes, both stopped before it returns. The nodes a Client
// knows, and the one in use, are shared by its calls.
package client
