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
// each with its own batches (the destination's engine.Store keys clients by
// the canal client_id string); a GET with a timeout returns as soon as one
// event is ready rather than waiting for fetch_size of them (engine.Store
// offers no "wait for n"); batch ids are the store's batch id + 1, since
// canal reserves 0.
//
// # Invariants
//
//   - A client's entries come in the store's order; a rollback re-delivers
//     everything it has not acked, and nothing is skipped.
//   - No frame longer than Config.MaxFrame is read, and a length header is
//     never trusted for an allocation beyond 64 KiB ahead of the bytes that
//     arrived.
//   - A connection is never served before it authenticates.
//
// # Concurrency
//
// A Server is safe for concurrent use. Serve owns one goroutine per
// connection; when its context ends it closes the listener and every
// connection and waits for those goroutines before it returns.
package canal
