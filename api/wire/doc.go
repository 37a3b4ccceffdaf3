// Package wire holds every JSON shape of braid's HTTP API: what a node's
// native API (api/native) and cluster API (cluster) send, and what the Go
// client (client) decodes. It is types only, with no behaviour, and
// imports no braid package, so that the client and the test harnesses that
// talk to real nodes need nothing else; a change to a field here is a
// change to the API. The one shape it does not spell out is a destination's
// spec, whose JSON form is package spec's (DestinationInfo.Spec).
//
//	GET    /v1/cluster                         ClusterStatus
//	GET    /v1/cluster/members                 Members
//	GET    /v1/status                          Status (the status page's data)
//	GET    /v1/destinations                    []string: the destinations' names
//	POST   /v1/destinations                    the spec (application/yaml or application/json) → DestinationInfo, 201
//	GET    /v1/destinations/{name}/spec        DestinationInfo
//	DELETE /v1/destinations/{name}[?force=true] Deleted
//	DELETE /v1/cluster/nodes/{name}             NodeRemoved
//	GET    /healthz, /readyz                   Health (no credential needed)
//	POST   /v1/session                         Login → Session and a cookie (the status page)
//	GET    /v1/session                         Session
//	DELETE /v1/session                         204, the session ended
//	GET    /v1/destinations/{name}             State (served by the owner)
//	POST   /v1/destinations/{name}/ack         AckResult (served by the owner)
//	GET    /v1/destinations/{name}/consumers   []ClientState (served by the owner)
//	DELETE /v1/destinations/{name}/consumers/{id} ConsumerDropped (served by the owner)
//
// The stream itself (GET /v1/destinations/{name}/stream) is flat-message
// JSON lines or binary frames, described in package api/native and decoded
// by package client.
//
// Every answer with a status other than 2xx has an ErrorBody.
//
// # Invariants
//
//   - Field names are lowerCamelCase and never change meaning; a field that
//     may be missing is a pointer or has omitempty, and its comment says when
//     it is missing.
//   - Times are RFC 3339 with nanoseconds (encoding/json's time.Time);
//     durations are integers whose name says the unit (lagMs).
package wire
