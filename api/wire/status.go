package wire

import "time"

// Status answers GET /v1/status: everything the status page at / shows,
// gathered by the node that answered, so that a browser asks that one
// node only (a destination's own state is served by its owner, whose
// redirect a page's fetch would not follow with its credential).
type Status struct {
	// Time is when the node answered.
	Time time.Time `json:"time"`
	// Cluster is what GET /v1/cluster answers on this node.
	Cluster ClusterStatus `json:"cluster"`
	// Destinations are each destination's state as its owner answered it,
	// with the lag history this node keeps, in Cluster.Destinations'
	// order.
	Destinations []DestinationStatus `json:"destinations"`
	// LagEveryMs is how often the node samples each source's lag, in
	// milliseconds: the spacing of LagSeries' samples.
	LagEveryMs int64 `json:"lagEveryMs"`
	// LagWindowMs is how far back the node keeps the samples, in
	// milliseconds.
	LagWindowMs int64 `json:"lagWindowMs"`
}

// DestinationStatus is one destination of a Status.
type DestinationStatus struct {
	// Name is the destination's name.
	Name string `json:"name"`
	// Owner is the node that runs the destination; "" while it has none.
	Owner string `json:"owner"`
	// State is what the owner answers to GET /v1/destinations/{name};
	// missing when it did not answer (StateError says why).
	State *State `json:"state,omitempty"`
	// StateError says why State is missing: no owner, an owner not
	// reachable, or its error; "" when it answered.
	StateError string `json:"stateError,omitempty"`
	// Lag is each source's lag over the last LagWindowMs, one series a
	// source, in the order of the last state's sources; empty before the
	// node's first sample.
	Lag []LagSeries `json:"lag"`
	// Sinks are what the owner answers to GET
	// /v1/destinations/{name}/sinks; missing with State.
	Sinks []SinkState `json:"sinks,omitempty"`
	// DDL is what the owner answers to GET /v1/destinations/{name}/ddl:
	// the open shard-DDL locks; missing with State.
	DDL *DDLState `json:"ddl,omitempty"`
}

// LagSeries is one source's lag over time.
type LagSeries struct {
	// Source is the source's name in the spec.
	Source string `json:"source"`
	// Samples are the lag samples, oldest first, about one every
	// Status.LagEveryMs; a gap in time means the owner did not answer then.
	Samples []LagSample `json:"samples"`
}

// LagSample is a source's lag at one moment.
type LagSample struct {
	// Time is when the owner answered the state the sample comes from.
	Time time.Time `json:"time"`
	// LagMs is the source's SourceState.LagMs then, in milliseconds;
	// missing when it had none (no transaction yet).
	LagMs *int64 `json:"lagMs,omitempty"`
}
