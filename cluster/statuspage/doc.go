// Package statuspage is the status page every braid server serves at /:
// its HTML, CSS and JavaScript (Assets, embedded in the binary, no build
// step and nothing loaded from elsewhere), and History, the recent lag of
// each source that the page charts.
//
// The page asks the node that served it for GET /v1/status (wire.Status)
// every two seconds and draws it: the nodes, each destination with its
// sources (with their initial snapshot's progress where the spec has
// one), their lag over the last minutes (an SVG chart drawn by the
// page's own script), its consumers and their lag in transactions, a
// source that waits for an operator to accept transactions a failover
// lost (wire.SourceState's lost: a notice naming them and the braid
// command that accepts them), the losses accepted (its accepted: the
// GTIDs, when, and the LOST marker's seq), and its sinks and open DDL
// locks (wire.DestinationStatus's sinks and ddl.locks, which the
// serving node asks of the owner, drawn as tables of their fields;
// "none" only when there are none). It asks nothing of other
// nodes: a destination's state lives on its owner, and a browser's fetch
// would not follow the other nodes' redirect there with its credential.
// The node that serves the page gathers it instead (package cluster,
// status.go).
//
// The page logs in with its own form: when /v1/status answers 401 it
// shows the form, posts the user and password as JSON to /v1/session and
// from then on its fetches carry the session cookie (HttpOnly,
// SameSite=Strict) the node set; a log-out button ends the session. The
// page never makes the browser keep a Basic credential, and its calls
// that change something carry the header X-Braid-Request.
//
// # Invariants
//
//   - A destination's History keeps no sample older than the window before
//     its newest, and its samples' times increase, at least half the
//     sampling interval apart.
//   - Every element of the page that shows a node, destination, source or
//     consumer carries its name in a data- attribute (data-node, data-dest,
//     data-source, data-client), and each value a data-field, so that a
//     test reads what a person sees.
//
// # Concurrency
//
// History is safe for concurrent use (one sampler adds, the handlers
// read). Assets is read-only.
package statuspage
