package sink

import (
	"context"

	"github.com/braid-cdc/braid/engine/change"
)

// Sink is a sink's open target with the engine that drives it: what a
// Runner runs, and what everything above this package holds of a sink.
// It is a Keyed applier over a Target (mysql, postgres, redis) or an
// Ordered publisher over a Publisher (rabbitmq, kafka); package sinkrun's
// Open makes the one a spec entry asks for.
type Sink interface {
	// Apply applies the stream f hands out, from where the target stands
	// (its checkpoints), until an error, or nil once ctx ends. It acks a
	// store batch (Feed.Ack) only once every change in it is applied at
	// the target, in the order f handed them out, and saves the cursor
	// (Feed.Save) only after an ack. The Runner calls Apply again, with
	// a new Feed from the last store batch acked, after it returns.
	Apply(ctx context.Context, f *Feed) error
	// Checkpoints returns where each of the sink's workers stands at the
	// target, or nil for a sink whose place is its cursor alone (Ordered).
	// It is safe to call while Apply runs.
	Checkpoints(ctx context.Context) ([]Point, error)
	// Stats returns what the sink counted; safe to call at any time.
	Stats() Stats
	// Close disconnects from the target, once Apply has returned.
	Close() error
}

// Change is one row change as a target applies it.
type Change struct {
	// Seq is the merged transaction's seq.
	Seq uint64
	// Source and Origin ("schema.table") are where the row was written.
	Source, Origin string
	// Logical is the logical table, "schema.table".
	Logical string
	// Row is the change, with its table's columns (Row.Table).
	Row *change.RowChange
	// Before and After are Row's images, decoded once (nil: none), by
	// Decode: Keyed decodes them for a target unless it decodes
	// them itself (ImageDecoder).
	Before, After []change.Value
	// PK is the change's primary key (Key; every column of a table
	// without one) and Others its other keys: the old primary key of an
	// UPDATE that changes it (then Moved), and each unique key's value.
	PK     string
	Others []string
	Moved  bool
	// Route picks the change's worker (Causality.WorkerOf): its primary
	// key's hash, or its key range's (Routing). OldRoute is the old
	// primary key's (Moved).
	Route, OldRoute uint32
	// MayExist: the change may find its row already as it makes it (a
	// snapshot chunk read again brought it, or is it; see
	// change.Event.FreshAt), so an INSERT that finds its key is an
	// upsert, not a collision.
	MayExist bool
}

// Decode sets c.Before and c.After to Row's images, decoded, unless they
// are set.
func (c *Change) Decode() {
	if c.Before == nil && c.After == nil {
		c.Before, c.After = c.Row.Before(), c.Row.After()
	}
}

// DecodeAll decodes every change of cs (Decode).
func DecodeAll(cs []Change) {
	for i := range cs {
		cs[i].Decode()
	}
}

// Point is a place in the stream a worker has applied up to: the row
// change Idx (change.RowChange.Index) of transaction Seq (a worker's
// transaction may end inside a source transaction). A DDL's point is
// (seq, MaxIdx).
type Point struct {
	Seq uint64
	Idx int
}

// MaxIdx is a Point's Idx covering every row change of its transaction.
const MaxIdx = 1<<31 - 1

// Before reports whether p comes before q.
func (p Point) Before(q Point) bool {
	return p.Seq < q.Seq || p.Seq == q.Seq && p.Idx < q.Idx
}

// Stats is what a sink counts: its target's counts, and Keyed's
// Conflicts.
type Stats struct {
	// Applied counts row changes applied; Upserts the INSERTs of a key
	// that existed; Missing the UPDATEs and DELETEs of a row that was not
	// there (an UPDATE's after-image is then inserted).
	Applied, Upserts, Missing uint64
	// Replayed counts the row changes of Applied a MariaDB target applied
	// as binlog row events (sink/mysql).
	Replayed uint64
	// Conflicts counts the row changes that waited for another worker
	// (Causality).
	Conflicts uint64
	// For a Publisher: Pending counts messages sent and not yet
	// confirmed, Returns the messages the target handed back as
	// unroutable (each holds the sink up until a queue takes it).
	Pending, Returns uint64
}
