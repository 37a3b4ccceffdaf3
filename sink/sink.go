// Package sink applies a destination's stream to targets (issue 21): each
// sink is a consumer of the destination's store with a client id of its
// own ("sink:NAME"), running where the destination runs. The targets are
// in the packages below it: Targets that apply rows in parallel by key
// (sink/mysql, sink/postgres, sink/redis) and Publishers that take the
// stream in order as canal flat messages (sink/rabbitmq, sink/kafka; see
// relay.go). sink/sinkrun starts a spec's sinks, sink/verify compares a
// target with the sources.
//
// # Invariants
//
//   - Exactly once. Row changes go to Workers workers by their primary
//     key's hash; each worker applies its changes in stream order, in
//     transactions that also write the worker's checkpoint (the last point
//     it applied). A change is applied iff its point is after its worker's
//     checkpoint, so a restart from any cursor at or before the
//     checkpoints applies nothing twice and skips nothing.
//   - Causality (TiDB DM's, per worker). A change one of whose keys
//     (primary, unique, or the old key of a key-changing UPDATE) is held by
//     a change on another worker waits until that worker has applied it.
//     A DDL waits for every worker.
//   - Within a worker's transaction a target may reorder changes of
//     different keys into runs (Plan); changes of one key keep their order.
//   - A target checks, in the transaction that applies a batch, that its
//     worker's checkpoint is still before the batch (ErrBehind if not), so
//     two runners (an owner, and a former one not yet fenced) never apply
//     a change twice.
//   - A Publisher is handed each store batch's messages in stream order,
//     one call at a time; the batch is acked once the call returns (every
//     message confirmed) and the batch ends a transaction, so a retry
//     restarts a transaction at its first message and each message keeps
//     its id (seq, n).
//   - A store batch is acked only once every change in it is committed,
//     in the order the batches were handed out; the sink's cursor (the
//     store's mark) is saved after that, so it is never ahead of the
//     checkpoints.
package sink

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/braid-cdc/braid/change"
)

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
	// Decode: the runner decodes them for a target unless it decodes
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

// ImageDecoder is a Target that decodes the images of the changes it
// applies itself, when it needs them (Change.Decode): the MySQL target
// that replays the binlog's row events has no use for them.
type ImageDecoder interface {
	Target
	DecodesImages()
}

// PartialApplier is a Target that applies a change whose after image
// leaves columns out (change.RowChange.PartialAfter) as the source wrote
// it, or returns PartialImageError; the runner stops at such a change
// for any other Target, which would write the columns left out as NULL.
type PartialApplier interface {
	Target
	AppliesPartialImages()
}

// PartialImageError is the error of change c, whose after image leaves
// columns out, for a sink that cannot apply it.
func PartialImageError(sinkName string, c Change) error {
	return fmt.Errorf("sink %s: seq %d, %s from %s/%s: the binlog's row image leaves columns out (binlog_row_image is MINIMAL or NOBLOB on source %s), and the sink writes whole rows, so it would set them NULL: set binlog_row_image=FULL there; the rows written so far need a snapshot (snapshot: initial) or a start past them",
		sinkName, c.Seq, c.Logical, c.Source, c.Origin, c.Source)
}

// WorkersChanged is the error of a target whose checkpoints were written
// by a sink of had workers when it now has n (where says how to start
// over): a key's worker is its hash modulo the count, so with another
// count a change would be skipped by the checkpoint of a worker that
// never had it, or applied again.
func WorkersChanged(sinkName string, had, n int, where string) error {
	return fmt.Errorf("sink %s: its checkpoints were written by %d workers, the spec has %d, and a key's worker depends on the count: keep workers: %d, or delete %s to apply from the start", sinkName, had, n, had, where)
}

// WorkersRow is the worker of a SQL target's checkpoint row whose seq is
// how many workers the sink has (WorkersChanged) and whose idx their
// routing (Routing).
const WorkersRow = -1

// CheckpointRow is a row of a SQL target's checkpoint table: a worker's
// checkpoint, or the WorkersRow.
type CheckpointRow struct {
	Worker int
	Seq    uint64
	Idx    int
}

// SQLCheckpoints is what a SQL target's checkpoint rows of a sink of n
// workers say: each worker's point, and the routing its changes were
// given. next yields the rows one at a time (ok false after the last);
// where names them, for an error. A new sink routes by range and an older
// braid's by key, and either is kept with record, beside the count; a
// count other than n is WorkersChanged.
func SQLCheckpoints(sinkName string, n int, where string, next func() (r CheckpointRow, ok bool, err error), record func(Routing) error) ([]Point, Routing, error) {
	out := make([]Point, n)
	had, routing, some := 0, RouteByKey, false
	for {
		r, ok, err := next()
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			break
		}
		if r.Worker == WorkersRow {
			had, routing = int(r.Seq), Routing(r.Idx)
			continue
		}
		some = true
		if r.Worker >= n {
			return nil, 0, WorkersChanged(sinkName, r.Worker+1, n, where)
		}
		out[r.Worker] = Point{Seq: r.Seq, Idx: r.Idx}
	}
	switch {
	case had == 0:
		routing = RouteByKey
		if !some {
			routing = RouteByRange
		}
		if err := record(routing); err != nil {
			return nil, 0, fmt.Errorf("sink %s: record its workers: %w", sinkName, err)
		}
	case had != n:
		return nil, 0, WorkersChanged(sinkName, had, n, where)
	}
	return out, routing, nil
}

// FromIndex is the row index a batch starting with first claims its
// worker's checkpoint from: first's, or, for a change that may find its
// row already so (MayExist: a snapshot chunk read again, which the runner
// applies whole again on a worker it stopped in the middle of), any row of
// first's seq, whose rows are upserts a second time too.
func FromIndex(first Change) int {
	if first.MayExist {
		return math.MaxInt32
	}
	return first.Row.Index
}

// Key is a row's key values under the key columns idx, as one string
// (the table's name first, so keys of two tables never meet), each value
// as fmt prints it.
func Key(table string, img []change.Value, idx []int) string {
	return string(appendKey(make([]byte, 0, len(table)+12*len(idx)), table, idx, func(i int) change.Value { return img[i] }))
}

// appendKey appends Key of the row whose column i is value(i) to b.
func appendKey(b []byte, table string, idx []int, value func(i int) change.Value) []byte {
	b = append(b, table...)
	for _, i := range idx {
		b = append(b, 0)
		switch v := value(i).(type) {
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case uint64:
			b = strconv.AppendUint(b, v, 10)
		case string:
			b = append(b, v...)
		default:
			// As fmt prints it, which is what Key always wrote: a key's
			// worker must not change from one braid to the next, or a
			// restart would skip by another worker's checkpoint.
			b = fmt.Append(b, v)
		}
	}
	return b
}

// Causality assigns row changes to workers by their primary key's hash
// (or range) and makes a change wait for the changes on other workers
// that hold one of its keys: TiDB DM's causality, waiting for the one
// worker concerned rather than for all. It is pure and not safe for
// concurrent use.
//
// A primary key's worker is a function of the key, so the changes of one
// primary key go to one worker, which applies them in stream order, and
// need no record. Only the keys a change holds besides its primary key
// (its unique values, the old key of a key-changing UPDATE) can be held
// on two workers: Causality remembers those, each with the last change
// that holds it (its worker, and how many changes that worker had been
// handed through it: a Ticket). A change waits for the ticket of each of
// its keys held on another worker, and a key-changing UPDATE also for
// every change handed so far to its old key's worker, which had the old
// key's earlier changes. Keeping every primary key as well cost the
// runner a sixth of its CPU (bench/sink_test.go), for nothing.
type Causality struct {
	workers int
	held    map[string]Ticket
	last    []uint64 // how many changes each worker had been handed
}

// Ticket is a worker and a count of the changes handed to it.
type Ticket struct {
	Worker int
	N      uint64
}

// NewCausality returns the causality of n workers, nothing held.
func NewCausality(n int) *Causality {
	return &Causality{workers: n, held: map[string]Ticket{}, last: make([]uint64, n)}
}

// Worker is the worker of primary key pk by its hash (RouteByKey): a
// pure function of it, so a restart routes each change where it went
// before.
func (c *Causality) Worker(pk string) int {
	return c.WorkerOf(routeHash(pk))
}

// WorkerOf is the worker of a change whose Route is route.
func (c *Causality) WorkerOf(route uint32) int {
	return int(route % uint32(c.workers))
}

// Routing is how a sink's workers split the keys. It must not change
// while a target holds checkpoints: a change would be skipped by the
// checkpoint of a worker that never had it.
type Routing int

const (
	// RouteByKey: a change goes to the worker of its primary key's hash.
	// Checkpoints written before braid had routings are read this way.
	RouteByKey Routing = iota
	// RouteByRange: a change whose primary key is one integer goes to
	// the worker of its range of RangeKeys keys (in its shard table,
	// with an origin column), others by their key's hash. A B-tree then
	// gets runs of neighbouring keys from one transaction: keys spread
	// over 16 workers split pages half full, and cost MariaDB a third
	// more CPU a row (bench/sink_test.go).
	RouteByRange
)

// RangeKeys is how many neighbouring integer keys share a worker under
// RouteByRange.
const RangeKeys = 1 << rangeShift

const rangeShift = 10

// A RoutedTarget keeps, with its checkpoints, the routing of the sink's
// workers: Routing is good after Checkpoints, which records it for a
// sink that has none (RouteByRange) or had checkpoints before braid kept
// it (RouteByKey). A Target that is not one routes by key.
type RoutedTarget interface {
	Target
	Routing() Routing
}

// routeHash is FNV-1a of s.
func routeHash[T string | []byte](s T) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Waits returns what change ch, for worker w, must wait for: the tickets
// of its keys held on other workers, and of a key-changing UPDATE's old
// key's worker (the caller skips those already applied).
func (c *Causality) Waits(w int, ch *Change) []Ticket {
	var out []Ticket
	if ch.Moved {
		if ow := c.WorkerOf(ch.OldRoute); ow != w && c.last[ow] > 0 {
			out = append(out, Ticket{ow, c.last[ow]})
		}
	}
	if len(c.held) == 0 {
		return out
	}
	for i := -1; i < len(ch.Others); i++ {
		k := ch.PK
		if i >= 0 {
			k = ch.Others[i]
		}
		if t, ok := c.held[k]; ok && t.Worker != w {
			out = append(out, t)
		}
	}
	return out
}

// Hold records that ch was handed to worker w as its n'th.
func (c *Causality) Hold(w int, n uint64, ch *Change) {
	c.last[w] = n
	for _, k := range ch.Others {
		c.held[k] = Ticket{w, n}
	}
}

// Len is how many keys are held.
func (c *Causality) Len() int { return len(c.held) }

// Prune forgets the keys whose change is applied: applied[w] is how many
// of worker w's changes are.
func (c *Causality) Prune(applied []uint64) {
	for k, t := range c.held {
		if t.N <= applied[t.Worker] {
			delete(c.held, k)
		}
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

// ErrBehind: a target's checkpoint is past what a runner was applying
// (another runner applied it); the runner starts again from the
// checkpoints.
var ErrBehind = errors.New("the target has applied this already")

// ErrCollision: two shard tables write the same key into one target
// table that has no origin column to keep them apart (a *CollisionError
// says which).
var ErrCollision = errors.New("two shard tables write one key")

// CollisionError is an INSERT (or a key-changing UPDATE) that found its
// key in the target although its checkpoint says it was never applied:
// another shard table's row, or one there before the sink.
type CollisionError struct {
	Sink string
	// Table is the target table, Logical the logical one.
	Table, Logical string
	// Source and Origin ("schema.table") are the shard table whose change
	// found the key.
	Source, Origin string
	// Columns and Values are the key.
	Columns []string
	Values  []change.Value
	// Holders are the shard tables ("source/schema.table") that hold the
	// key at the sources, once looked up (Runner.Holders); empty when not
	// known.
	Holders []string
}

func (e *CollisionError) Error() string {
	key := make([]string, len(e.Columns))
	for i, c := range e.Columns {
		key[i] = fmt.Sprintf("%s=%v", c, e.Values[i])
	}
	by := "written by another shard table of " + e.Logical + " or there before the sink"
	if others := slices.DeleteFunc(slices.Clone(e.Holders), func(h string) bool { return h == e.Source+"/"+e.Origin }); len(others) > 0 {
		by = "written by " + strings.Join(others, " and ")
	}
	return fmt.Sprintf("%v: sink %s: %s/%s writes key %s into %s, which holds it already, %s: set origin_column (e.g. _shard) to keep each shard table's rows apart",
		ErrCollision, e.Sink, e.Source, e.Origin, strings.Join(key, ","), e.Table, by)
}

// Collision is the CollisionError of change c, applied by sink sinkName
// to target table table, whose INSERT found a key taken: the key of
// columns (a target key's column names, as the target gives them), with
// c's values of them; its primary key when columns is empty or names a
// column the change does not have (the origin column, say).
func Collision(sinkName, table string, c Change, columns []string) *CollisionError {
	rc := c.Row
	var idx []int
	for _, name := range columns {
		i := slices.IndexFunc(rc.Table.Columns, func(col change.Column) bool { return strings.EqualFold(col.Name, name) })
		if i < 0 {
			idx = nil
			break
		}
		idx = append(idx, i)
	}
	if idx == nil {
		idx = KeyColumns(rc.Table)
	}
	e := &CollisionError{Sink: sinkName, Table: table, Logical: c.Logical, Source: c.Source, Origin: c.Origin}
	for _, i := range idx {
		e.Columns = append(e.Columns, rc.Table.Columns[i].Name)
		e.Values = append(e.Values, c.After[i])
	}
	return e
}

// Is makes errors.Is(err, ErrCollision) hold.
func (e *CollisionError) Is(target error) bool { return target == ErrCollision }

// Target is what a sink applies to.
type Target interface {
	// Checkpoints returns each of n workers' applied point (zero: none).
	Checkpoints(ctx context.Context, n int) ([]Point, error)
	// Apply applies changes, in order (a target may reorder changes of
	// different keys: see Plan), and sets worker's checkpoint to the last
	// one's point, in one transaction. They are what the worker was handed
	// from one store batch, so there may be thousands.
	Apply(ctx context.Context, worker int, changes []Change) error
	// ApplyDDL applies a logical DDL (nothing: ignore) and sets every
	// worker's checkpoint to its seq.
	ApplyDDL(ctx context.Context, ev *change.Event, workers int) error
	// Stats returns what the target counted.
	Stats() Stats
	Close() error
}

// Stats is what a target counts.
type Stats struct {
	// Applied counts row changes applied; Upserts the INSERTs of a key
	// that existed; Missing the UPDATEs and DELETEs of a row that was not
	// there (an UPDATE's after-image is then inserted).
	Applied, Upserts, Missing uint64
	// Replayed counts the row changes of Applied a MariaDB target applied
	// as binlog row events (sink/mysql).
	Replayed uint64
	// For a Publisher: Pending counts messages sent and not yet
	// confirmed, Returns the messages the target handed back as
	// unroutable (each holds the sink up until a queue takes it).
	Pending, Returns uint64
}
