// Package canal serves destinations to canal's clients: it speaks the
// client protocol of Alibaba canal's server (port 11111), so a consumer
// written for canal (canal's Java client, canal-go's SimpleCanalConnector)
// reads a braid destination unchanged.
//
// The wire: each frame is a 4-byte big-endian length and a Packet protobuf
// (canal-go's protocol/packet types). The server sends HANDSHAKE (version 1,
// an 8-byte random seed); the client must answer CLIENTAUTHENTICATION with
// hex(SHA1(seed ‖ SHA1(SHA1(pw))) XOR SHA1(pw)), which the server computes
// from its configured password and compares in constant time. Then
// SUBSCRIPTION and UNSUBSCRIPTION get an ACK; GET gets MESSAGES, one canal
// Entry per braid event (EventBegin → TRANSACTIONBEGIN, EventRows → ROWDATA
// with one RowChange holding all its rows, EventCommit → TRANSACTIONEND,
// EventDDL → ROWDATA with isDdl); CLIENTACK and CLIENTROLLBACK get no answer
// unless they fail. Every failure is an ACK with canal's error code (400,
// 401, 402) and a log line; the connection stays usable, except before
// authentication and after a frame it cannot read, when it is closed.
//
// Departures from canal: several client ids may consume one destination,
// each with its own batches (the destination's stream.Store keys clients by
// the canal client_id string); a GET with a timeout returns as soon as one
// event is ready rather than waiting for fetch_size of them (stream.Store
// offers no "wait for n"); batch ids are the store's batch id + 1, since
// canal reserves 0; a transaction of no rows (a snapshot chunk that found
// none) is sent, as its TRANSACTIONBEGIN and TRANSACTIONEND entries, where
// canal's server drops most of them (EntryEventSink's
// filterEmtryTransactionEntry, which lets one through every 5 s to move the
// client's position): every seq reaches the client, so that a gap in the
// seqs it sees is a loss (the native API sends it as a message of type
// EMPTY).
//
// # Relaying
//
// In a cluster each destination runs on one node, its owner, and a client
// may connect to any node; canal's protocol has no redirect, so a node
// relays. When a request after authentication names a destination
// missing from Config.Registry and Config.Forward gives the owner's canal
// address, the session:
//
//  1. dials the owner, reads its HANDSHAKE and authenticates with this
//     node's own User and Password (scrambled with the owner's seed; no
//     scramble without a User) and with the client's timeouts
//     (net_read_timeout and net_write_timeout as this session uses them),
//     marked as relayed (field 20001 of ClientAuth, which canal does not
//     define), and checks the ACK;
//  2. sends the client's request frame to the owner unchanged;
//  3. from then on passes every client frame to the owner and every owner
//     byte to the client, unchanged, whatever destination they name;
//  4. when either side closes or fails, closes the other (a client that
//     only shut its sending side gets the owner's answers first).
//
// A CLIENTAUTHENTICATION that names such a destination starts the relay
// at authentication: the owner authenticates (and subscribes) the same
// destination and client id. Forward's error, an empty address or an
// owner that cannot be reached or refuses the authentication is answered
// with canal's error ACK (CodeError) and logged; after authentication the
// connection stays usable and the client may retry, at authentication it
// is closed as for an unknown destination. A relayed connection is never
// relayed again, so nodes that disagree about an owner answer "unknown
// destination" rather than relay in a ring.
//
// Timeouts: the relay reads neither leg with a deadline. The owner's
// session enforces the client's idle timeout, since it knows when a GET is
// waiting (a GET with a long timeout is never cut), and its closing the
// connection ends the relay; TCP keepalives find an owner that vanished.
// Each write, to either side, has the session's write timeout.
//
// # Invariants
//
//   - A client's entries come in the store's order; a rollback re-delivers
//     everything it has not acked, and nothing is skipped.
//   - No frame longer than Config.MaxFrame is read, and a length header is
//     never trusted for an allocation beyond 64 KiB ahead of the bytes that
//     arrived.
//   - A connection is never served, nor relayed, before it authenticates.
//   - A relayed connection is relayed whole: once the relay starts, every
//     later frame goes to the same owner, unchanged and in order, and the
//     client's connection ends when the owner's does.
//
// # Concurrency
//
// A Server is safe for concurrent use. Serve owns one goroutine per
// connection; when its context ends it closes the listener and every
// connection and waits for those goroutines before it returns. A relaying
// connection's goroutine runs two more, one per direction, and waits for
// them; the end of Serve's context closes the owner's connection too.
package canal
