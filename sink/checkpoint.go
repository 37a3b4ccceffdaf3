package sink

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// A SQL target keeps its checkpoints in one table of its meta database
// (sink_checkpoint), shared by every sink that writes to that server: a
// row is a destination's sink's worker. An older braid keyed the rows by
// sink name alone, so two destinations with a sink of one name (the
// default meta database, and a name like copy) read and moved each
// other's checkpoints, and the second skipped every row the first had
// applied past. Its rows are migrated with the dest column set to
// Unowned, and AdoptCheckpoints says whose they are.

// Unowned is the dest of the checkpoint rows an older braid wrote, keyed
// by sink name alone.
const Unowned = ""

// SQLRows is a SQL query's result, as database/sql's *sql.Rows and pgx's
// Rows both give it.
type SQLRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CheckpointOwners counts the checkpoint rows of a sink's name by
// destination, what AdoptCheckpoints decides on: rows is the result of
// "SELECT dest FROM <checkpoint table> WHERE sink = <the sink's name>"
// (the caller closes it).
func CheckpointOwners(rows SQLRows) (map[string]int, error) {
	out := map[string]int{}
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out[d]++
	}
	return out, rows.Err()
}

// AdoptCheckpoints decides about the Unowned checkpoint rows of sink name,
// opened by destination dest: rows counts the checkpoint rows of that sink
// name by destination (Unowned included). It adopts them (they become
// dest's) when no destination has rows of its own under that name: the
// one destination that had the sink wrote them. When another destination,
// or dest itself, has rows too, which destination wrote the old ones is
// unknown, and reading them as dest's could skip rows or apply them twice:
// an error that says how to give them to dest or delete them, table
// naming the checkpoint table as a statement names it.
func AdoptCheckpoints(dest, name, table string, rows map[string]int) (adopt bool, err error) {
	if rows[Unowned] == 0 {
		return false, nil
	}
	var owners []string
	for d, n := range rows {
		if d != Unowned && n > 0 {
			owners = append(owners, d)
		}
	}
	if len(owners) == 0 {
		return true, nil
	}
	slices.Sort(owners)
	who := "destination " + owners[0] + " has"
	if len(owners) > 1 {
		who = "destinations " + strings.Join(owners, ", ") + " have"
	}
	where := fmt.Sprintf("dest = '' AND sink = '%s'", name)
	return false, fmt.Errorf("sink %s of destination %s: %s holds checkpoints of a sink %s that an older braid wrote without a destination, and %s checkpoints of their own under that name, so whose the old ones are is unknown and none reads them: if they are %s's, run DELETE FROM %s WHERE dest = '%s' AND sink = '%s'; UPDATE %s SET dest = '%s' WHERE %s; else run DELETE FROM %s WHERE %s",
		name, dest, table, name, who, dest, table, dest, name, table, dest, where, table, where)
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
// routing (Routing): WorkersRowSeq.
const WorkersRow = -1

// WorkersRowSeq is the WorkersRow's seq for n workers routed by r: n,
// and from RouteByWideRange on, r in the bits above the low 32 too. A
// braid older than r reads the row as that many workers and stops on
// WorkersChanged, rather than route the changes by a routing it does not
// know and skip or repeat what the checkpoints say.
func WorkersRowSeq(n int, r Routing) uint64 {
	if r < RouteByWideRange {
		return uint64(n)
	}
	return uint64(n) | uint64(r)<<32
}

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
// where names them, for an error. A new sink routes by wide ranges and an
// older braid's by key, and either is kept with record, beside the count
// (the WorkersRow: WorkersRowSeq); a count other than n is WorkersChanged.
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
			had, routing = int(r.Seq&(1<<32-1)), Routing(r.Idx)
			if routing < RouteByKey || routing > RouteByWideRange || r.Seq != WorkersRowSeq(had, routing) {
				return nil, 0, fmt.Errorf("sink %s: %s: the row of worker %d says %d workers routed by %d, which this braid does not know: a newer braid wrote it", sinkName, where, WorkersRow, r.Seq, r.Idx)
			}
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
			routing = RouteByWideRange
		}
		if err := record(routing); err != nil {
			return nil, 0, fmt.Errorf("sink %s: record its workers: %w", sinkName, err)
		}
	case had != n:
		return nil, 0, WorkersChanged(sinkName, had, n, where)
	}
	return out, routing, nil
}

// FromIndex is the row index a transaction starting with first claims its
// worker's checkpoint from: first's, or, for a change that may find its
// row already so (MayExist: a snapshot chunk read again, which Keyed
// applies whole again on a worker it stopped in the middle of), any row of
// first's seq, whose rows are upserts a second time too.
func FromIndex(first Change) int {
	if first.MayExist {
		return math.MaxInt32
	}
	return first.Row.Index
}
