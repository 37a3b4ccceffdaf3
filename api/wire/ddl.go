package wire

import "time"

// DDLState is a destination's shard-DDL merge as its owner shows it (GET
// /v1/destinations/{name}/ddl): its mode and its open locks.
type DDLState struct {
	// Destination is the destination's name.
	Destination string `json:"destination"`
	// Mode is the spec's shard_ddl: pessimistic, optimistic or passthrough
	// (which has no locks).
	Mode string `json:"mode"`
	// Locks are the open locks, oldest first.
	Locks []DDLLock `json:"locks"`
	// CatchingUp is set while rows a lock held are re-read and emitted.
	CatchingUp bool `json:"catchingUp,omitempty"`
	// Decisions are the operators' decisions kept for the destination, in
	// the order made, each with the point of the stream it applied at.
	Decisions []DDLDecision `json:"decisions"`
	// Migrations are the online schema changes (gh-ost,
	// pt-online-schema-change) under way on shard tables: copy made, not
	// swapped in. A lock waiting for such a shard table waits for its swap.
	Migrations []DDLMigration `json:"migrations,omitempty"`
}

// DDLMigration is an online schema change under way on a shard table.
type DDLMigration struct {
	// Shard is the shard table ("source/schema.table").
	Shard string `json:"shard"`
	// Table is the logical table the shard table routes to.
	Table string `json:"table"`
	// Shadow is the tool's copy of the shard table.
	Shadow string `json:"shadow"`
	// Since is where in the source's binlog the copy was created.
	Since string `json:"since"`
	// DDL are the statements the tool ran on the copy so far.
	DDL []string `json:"ddl,omitempty"`
}

// DDLDecision is one kept decision about a lock.
type DDLDecision struct {
	// Lock is the lock decided about.
	Lock int `json:"lock"`
	// Action is unlock (its DDL went out) or skip (it did not).
	Action string `json:"action"`
	// AfterSeq is the seq of the last transaction out when it applied.
	AfterSeq uint64 `json:"afterSeq"`
	// Taken is the count of source transactions the merge had taken
	// then: the point a replay applies it at.
	Taken uint64 `json:"taken"`
}

// DDLLock is one open shard-DDL lock of a logical table.
type DDLLock struct {
	// ID names the lock in `braid ddl unlock|skip DEST ID`.
	ID int `json:"id"`
	// Table is the logical table, "schema.table".
	Table string `json:"table"`
	// SQL is the logical DDL that goes out when the lock releases.
	SQL string `json:"sql"`
	// Since is the commit time of the first shard table's DDL.
	Since time.Time `json:"since"`
	// Done are the shard tables ("source/schema.table") that ran the DDL
	// (their rows are held).
	Done []string `json:"done"`
	// Waiting are the shard tables that have not run it yet.
	Waiting []string `json:"waiting"`
	// Conflicts maps a shard table that ran a different DDL to that DDL
	// (its rows are held too); a lock with conflicts waits for a decision.
	Conflicts map[string]string `json:"conflicts,omitempty"`
	// HeldRows counts the row changes held so far.
	HeldRows int64 `json:"heldRows"`
}

// DDLDecided answers a decision about a lock (POST
// /v1/destinations/{name}/ddl/{lock}?action=unlock|skip).
type DDLDecided struct {
	// Destination is the destination's name.
	Destination string `json:"destination"`
	// Lock is the lock released.
	Lock int `json:"lock"`
	// Action is unlock or skip, as asked.
	Action string `json:"action"`
}

// LostAccepted answers an operator's accept of lost transactions (POST
// /v1/destinations/{name}/sources/{source}/accept-lost): the loss the
// source waited on, now kept, which it goes on past.
type LostAccepted struct {
	// Destination is the destination's name.
	Destination string `json:"destination"`
	// Source is the source's name in the spec.
	Source string `json:"source"`
	// Lost names the transactions lost, as State's sources named them.
	Lost string `json:"lost"`
	// From is the source's GTID state braid had emitted.
	From string `json:"from"`
	// Server is the server that lacks them, which the source goes on
	// reading.
	Server string `json:"server,omitempty"`
}

// SinkState is one sink of a destination as its owner shows it (GET
// /v1/destinations/{name}/sinks).
type SinkState struct {
	// Name is the sink's name in the spec.
	Name string `json:"name"`
	// Type is its target's kind (mysql, postgres, rabbitmq, kafka,
	// redis).
	Type string `json:"type"`
	// Address is its target's host:port (rabbitmq: its url; kafka: its
	// brokers).
	Address string `json:"address"`
	// Workers is how many transactions it applies at once.
	Workers int `json:"workers"`
	// Running is set once its target was reached.
	Running bool `json:"running"`
	// AppliedSeq is the seq of the last transaction applied whole.
	AppliedSeq uint64 `json:"appliedSeq"`
	// LagSeq is how many transactions the destination is ahead of it.
	LagSeq uint64 `json:"lagSeq"`
	// Rows counts the row changes it applied since it started here
	// (rabbitmq, kafka: the messages confirmed).
	Rows uint64 `json:"rows"`
	// Upserts counts INSERTs that found their key in the target.
	Upserts uint64 `json:"upserts"`
	// Missing counts UPDATEs and DELETEs that found no row.
	Missing uint64 `json:"missing"`
	// Replayed counts the row changes of Rows a mysql sink applied as the
	// binlog's row events, not SQL statements.
	Replayed uint64 `json:"replayed,omitempty"`
	// Pending counts the messages (rabbitmq, kafka) sent and not yet
	// confirmed by the broker.
	Pending uint64 `json:"pending,omitempty"`
	// Returns counts the messages the broker handed back as unroutable.
	Returns uint64 `json:"returns,omitempty"`
	// Conflicts counts the changes that waited for another worker to
	// apply one of their keys (a unique value, a moved key) first.
	Conflicts uint64 `json:"conflicts"`
	// LagSeconds is how long ago the oldest transaction not yet applied
	// committed at its source, about (0 when caught up).
	LagSeconds float64 `json:"lagSeconds"`
	// RowsPerSecond is the apply rate over about the last second.
	RowsPerSecond float64 `json:"rowsPerSecond"`
	// LastError is why it last failed (it retries), "" when it is well.
	LastError string `json:"lastError,omitempty"`
}
