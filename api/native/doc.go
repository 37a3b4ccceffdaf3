// Package native serves braid's native HTTP API: the list of destinations a
// node serves, a destination's state, and its stream as NDJSON flat messages
// (canal's FlatMessage, one JSON object per line, with braid's seq, source,
// originDatabase, originTable, position and gtid), read from the
// destination's stream.Store under a client id and acked by seq.
//
// A request whose Accept header names application/x-braid-stream
// (BinaryStreamType) gets the same messages in braid's binary encoding
// instead (see flat.BinaryMessage): length-prefixed frames whose values
// need no scanning or unescaping, which the Go client (package client)
// asks for and decodes at about a third of the JSON's CPU.
//
//	GET  /v1/destinations                                → ["shop", ...]
//	GET  /v1/destinations/{name}                         → wire.State
//	GET  /v1/destinations/{name}/stream?client-id=ID[&after=SEQ][&checkpoint=true]
//	     [&from=earliest|latest|seq:N|time:RFC3339][&ephemeral=true]
//	POST /v1/destinations/{name}/ack?client-id=ID&seq=SEQ → wire.AckResult
//	GET  /v1/destinations/{name}/consumers               → []wire.ClientState
//	DELETE /v1/destinations/{name}/consumers/{id}        → wire.ConsumerDropped
//	GET  /v1/destinations/{name}/ddl                     → wire.DDLState
//	POST /v1/destinations/{name}/ddl/{lock}?action=unlock|skip → wire.DDLDecided
//	POST /v1/destinations/{name}/sources/{source}/accept-lost → wire.LostAccepted
//	GET  /v1/destinations/{name}/sinks                   → []wire.SinkState
//	GET  /v1/destinations/{name}/sinks/{sink}            → wire.SinkDetail
//	POST /v1/destinations/{name}/sinks/{sink}/verify?sample=N[&table=T]... → wire.SinkVerify
//
// from says where a new client id starts (stream.Start; default the
// store's, the spec's consumers.start); a start older than the store holds
// is served by a replay reader, and one the sources no longer hold is
// answered 410, naming the oldest seq still available. An ephemeral client
// id keeps no cursor and is unsubscribed when its stream ends. A consumer
// with a stream open cannot be dropped (409).
//
// A sink's detail (its spec, password hidden, and its workers'
// checkpoints) and verify (package sink/verify) need the destination's
// sinks running in this process (WithSinks); without them the detail is
// the sink's state only and verify is answered 501. The sink must be one
// the destination runs (404 otherwise).
//
// Browsers (browser.go) is the middleware both of braid's HTTP servers (a
// cluster node's and braid capture's) put in front of everything: a Host
// that names another machine (DNS rebinding) gets 421, and a call that
// changes something gets 403 unless it carries wire.RequestHeader or a
// JSON/YAML body, and no Origin of another site. The Go client sends the
// header on every request.
//
// The JSON shapes are package api/wire's. Errors are wire.ErrorBody
// objects {"error": "..."}: 404 for an unknown destination
// (naming the ones served) or an unknown client id on ack, 400 for a bad
// parameter, 409 for a second stream of a client id already streaming.
//
// # The stream and its acks
//
// A stream has no per-batch ack round trip. The handler reads the client's
// store batches (Store.GetTx, up to BatchEvents events, waiting up to 500
// ms, a batch ending at the last transaction end in it), writes their
// messages and flushes after each batch, and remembers every batch written
// with the highest seq among its events. POST ack with seq S says "every
// transaction with seq <= S is handled": the handler then acks in the
// store, in order, every remembered batch whose events all have seq <= S
// (a batch ending inside transaction S+1 waits for a later ack).
//
// A client learns that a transaction is whole only when the next one
// starts, so a transaction bigger than the store (or than the room left in
// it) would hold the store full for good. While the store waits for room,
// the handler acks in it the oldest batches written that hold no
// transaction's end (Store.AckAhead): the store lets them go, and the
// client id's next stream starts a replay reader from its cursor, which
// sends that transaction again from its start (the client drops what it
// handled of it by count).
//
// Opening a stream rolls the client's store batches back (Store.Rollback),
// so everything not acked is delivered again. after=SEQ (the client's last
// acked seq) skips the transactions with seq <= SEQ; batches made only of
// those are acked at once. The server also skips what the client id acked
// on this node before, whatever after says. A replay that starts inside a transaction whose
// beginning was acked skips the rest of it: its seq is below an ack.
//
// A transaction that holds no row change (a snapshot chunk that found no
// rows: a table's rows an exact multiple of snapshot_chunk_rows, or a
// chunk read again after a TRUNCATE) took a seq like any other: it is
// written as one message of type EMPTY (flat.TypeEmpty) with no table,
// columns nor data, and its seq, source, position, gtid and snapshot flag,
// so that a consumer sees every seq, as a canal client sees such a
// transaction's TRANSACTIONBEGIN and TRANSACTIONEND entries. The marker
// of transactions lost in a source failover, once an operator accepted
// the loss (POST .../sources/{source}/accept-lost), is such a
// transaction too, written as one message of type LOST (flat.TypeLost)
// whose sql names the lost transactions.
//
// With checkpoint=true the stream also carries, when it has nothing else to
// send, a line {"checkpoint":SEQ} (a 'C' frame in the binary encoding)
// saying that every message of transaction SEQ has been written. Messages of one transaction share a seq, so without
// it a client learns that a transaction is complete only when the next one
// starts; the Go client (package client) asks for checkpoints so that it can
// ack the last transaction of a quiet stream.
//
// # Invariants
//
//   - At most one stream per (store, client id) is open; a second gets 409.
//   - A store batch is acked only when the client has acked a seq at or
//     above every event in it, or, while the store is full, when it holds
//     no transaction's end (Store.AckAhead); batches are acked in the
//     order handed out.
//   - A stream writes transactions whole and in store order, each message's
//     seq the merge's seq; lines of a transaction are never interleaved with
//     another's.
//
// The stream needs events that carry the merge's seq (group.Destination
// sets it); events with seq 0 would all count as acked.
//
// # Concurrency
//
// The handler is safe for concurrent use. Each stream runs on its request's
// goroutine and ends when the request's context ends, the store closes or a
// write fails; a batch of flat.ParallelRows rows or more is formatted on up to
// GOMAXPROCS goroutines that end with it (flat.Writer.WriteEvents). Events
// carry their logical names (stamped by package group), so nothing is
// shared between streams but the store.
package native
