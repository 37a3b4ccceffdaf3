package wire

import "encoding/json"

// SinkDetail is one sink of a destination in full (GET
// /v1/destinations/{name}/sinks/{sink}; braid sink show): its state as
// in the list, its spec, and where each of its workers stands in the
// target.
type SinkDetail struct {
	// State is the sink's state, as GET /v1/destinations/{name}/sinks
	// shows it.
	State SinkState `json:"state"`
	// HeadSeq is the destination's last seq.
	HeadSeq uint64 `json:"headSeq"`
	// Spec is the sink's entry of the destination's spec, defaults filled
	// in and its password hidden: a JSON object in the form of package
	// spec's Sink.
	Spec json.RawMessage `json:"spec,omitempty"`
	// Checkpoints are its workers' checkpoints as the target holds them
	// (its table braid_meta.sink_checkpoint); missing while the target is
	// not reached.
	Checkpoints []SinkCheckpoint `json:"checkpoints,omitempty"`
	// CheckpointsError is why they could not be read ("" when they were).
	CheckpointsError string `json:"checkpointsError,omitempty"`
}

// SinkCheckpoint is where one worker of a sink stands in the target: the
// row change Row of transaction Seq is the last it applied.
type SinkCheckpoint struct {
	// Worker is the worker's number, from 0.
	Worker int `json:"worker"`
	// Seq is the transaction it applied last (0: none yet).
	Seq uint64 `json:"seq"`
	// Row is the index of the row change of Seq it applied last
	// (2147483647: the whole transaction).
	Row int `json:"row"`
}

// SinkVerify is what braid sink verify found (POST
// /v1/destinations/{name}/sinks/{sink}/verify?sample=N[&table=T...]):
// random rows of the sources looked up in the target and random rows of
// the target looked up at the sources, every column compared.
type SinkVerify struct {
	// Destination is the destination's name.
	Destination string `json:"destination"`
	// Sink is the sink's name.
	Sink string `json:"sink"`
	// Published is set for a sink that publishes messages (rabbitmq,
	// kafka): nothing is compared, and AppliedSeq is the last seq
	// published and confirmed.
	Published bool `json:"published,omitempty"`
	// Tables are the logical tables compared.
	Tables []string `json:"tables"`
	// Sample is how many rows were drawn of each logical table, at the
	// sources and in the target.
	Sample int `json:"sample"`
	// SourceRows and TargetRows count the rows drawn at the sources and
	// in the target; Compared the distinct rows compared.
	SourceRows int `json:"sourceRows"`
	// TargetRows: see SourceRows.
	TargetRows int `json:"targetRows"`
	// Compared: see SourceRows.
	Compared int `json:"compared"`
	// Differences are the rows that differ, after the re-checks.
	Differences []SinkDifference `json:"differences"`
	// HeadSeq is the destination's seq when the first row was read;
	// AppliedSeq the sink's applied seq when the comparison ended.
	HeadSeq uint64 `json:"headSeq"`
	// AppliedSeq: see HeadSeq.
	AppliedSeq uint64 `json:"appliedSeq"`
	// Rechecks counts the rounds in which differences were read again
	// after the sink had applied the stream as far as its head then.
	Rechecks int `json:"rechecks"`
	// Settled is false when the sink did not catch up with the
	// destination's head for a re-check: the differences left may be
	// changes it has not applied yet.
	Settled bool `json:"settled"`
}

// The kinds of SinkDifference.
const (
	DiffMissing = "missing" // at a source, not in the target
	DiffExtra   = "extra"   // in the target, at no source
	DiffValues  = "differs" // in both, with other values
)

// SinkDifference is one row that differs between the sources and a
// sink's target.
type SinkDifference struct {
	// Table is the logical table, Target the target table.
	Table string `json:"table"`
	// Target: see Table.
	Target string `json:"target"`
	// Origin is the shard table ("source/schema.table") the row is of; ""
	// for an extra row no shard table holds.
	Origin string `json:"origin,omitempty"`
	// Key is the row's key.
	Key []ColumnValue `json:"key"`
	// Kind is missing, extra or differs.
	Kind string `json:"kind"`
	// Columns are the columns that differ (kind differs).
	Columns []ColumnDiff `json:"columns,omitempty"`
}

// ColumnValue is one column's value as text; nil is NULL. A value that
// is not UTF-8 text is shown as 0x and its bytes in hex.
type ColumnValue struct {
	// Column is the column's name.
	Column string `json:"column"`
	// Value is its value.
	Value *string `json:"value"`
}

// ColumnDiff is one column's value at the source and in the target (as
// ColumnValue); NoColumn is set when the target table has no such column.
type ColumnDiff struct {
	// Column is the column's name.
	Column string `json:"column"`
	// Source is its value at the source.
	Source *string `json:"source"`
	// Target is its value in the target.
	Target *string `json:"target"`
	// NoColumn: see ColumnDiff.
	NoColumn bool `json:"noColumn,omitempty"`
}
