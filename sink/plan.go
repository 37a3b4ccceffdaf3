package sink

import "github.com/braid-cdc/braid/engine/change"

// Run is a run of a worker's changes that a target applies as one
// statement (or a few, of a size of its own): changes of one kind and one
// table version, whose keys no change outside the run touches between
// them.
type Run struct {
	// Kind is the changes' kind; Move is an UPDATE that changes its key
	// (always alone in its run: the old row is deleted, the new upserted).
	Kind RunKind
	// Changes are in stream order.
	Changes []Change
}

// RunKind is the kind of a Run.
type RunKind byte

// The kinds of run.
const (
	RunInsert RunKind = iota // INSERTs
	RunUpdate                // UPDATEs that keep their key
	RunDelete                // DELETEs
	RunMove                  // one UPDATE that changes its key
)

// Plan cuts a worker's changes, in stream order, into runs of at most max
// changes, to be applied in the order returned. A change
// joins the last run of its kind and table version unless a run after
// that one touches one of its keys (primary, unique, an old primary key):
// then it starts a new run. So changes of one key keep their order, and
// changes of different keys, which commute, are gathered into few
// statements (a transaction's INSERTs of orders and of their items, and
// the next transaction's, become two runs, not one per transaction).
func Plan(changes []Change, max int) []Run {
	type runKey struct {
		kind    RunKind
		table   *change.Table
		logical string
	}
	var runs []Run
	lastRun := map[runKey]int{}                   // the last run of each kind and table version
	touched := make(map[string]int, len(changes)) // key → the last run that touches it
	for _, c := range changes {
		pk, others := c.PK, c.Others
		after := -1
		if r, ok := touched[pk]; ok {
			after = r
		}
		for _, k := range others {
			if r, ok := touched[k]; ok && r > after {
				after = r
			}
		}
		rk := runKey{kindOf(c.Row.Kind, c.Moved), c.Row.Table, c.Logical}
		i, ok := lastRun[rk]
		if !ok || i < after || rk.kind == RunMove || len(runs[i].Changes) >= max {
			runs = append(runs, Run{Kind: rk.kind})
			i = len(runs) - 1
			lastRun[rk] = i
		}
		runs[i].Changes = append(runs[i].Changes, c)
		touched[pk] = i
		for _, k := range others {
			touched[k] = i
		}
	}
	return runs
}

func kindOf(k change.ChangeKind, moved bool) RunKind {
	switch {
	case k == change.Insert:
		return RunInsert
	case k == change.Delete:
		return RunDelete
	case moved:
		return RunMove
	}
	return RunUpdate
}
