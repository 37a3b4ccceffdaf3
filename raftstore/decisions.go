package raftstore

import (
	"context"
	"fmt"

	"github.com/braid-cdc/braid/group"
)

// decisionRecord is a group.DDLDecision as stored: a type of its own, so
// that the log's and the snapshots' form does not follow group's.
type decisionRecord struct {
	Lock     int64  `json:"lock"`
	Action   string `json:"action"`
	AfterSeq uint64 `json:"afterSeq"`
	Taken    uint64 `json:"taken"`
}

// SaveDecision appends an operator's shard-DDL decision to the
// destination's list, as one Raft entry fenced by epoch exactly like
// SaveCursors: if epoch is not the destination's current epoch (or it has
// no owner) the decision is refused with an error wrapping ErrStaleEpoch,
// and the writer must stop; a destination that does not exist gives
// ErrNotFound. An action other than group.DecisionUnlock or
// group.DecisionSkip wraps ErrInvalid and never reaches the log.
//
// The list keeps the order the decisions were committed in, which is the
// order the owner made them: it writes one at a time, from its merge loop.
func (s *Store) SaveDecision(ctx context.Context, dest string, epoch uint64, d group.DDLDecision) error {
	if dest == "" {
		return fmt.Errorf("%w: empty destination name", ErrInvalid)
	}
	if !d.Action.Valid() {
		return fmt.Errorf("%w: decision of %q about lock %d: action %q, want %s or %s", ErrInvalid, dest, d.Lock, d.Action, group.DecisionUnlock, group.DecisionSkip)
	}
	c := &command{Type: cmdSaveDecision, Dest: dest, Epoch: epoch,
		Decision: decisionRecord{Lock: int64(d.Lock), Action: string(d.Action), AfterSeq: d.AfterSeq, Taken: d.Taken}}
	_, err := s.apply(ctx, c.encode())
	return err
}

// Decisions returns the destination's shard-DDL decisions in the order
// they were made, none if there are none, ErrNotFound if the destination
// does not exist (local read). Read by a new owner once its assignment is
// applied here, it is current: only the holder of the current epoch can
// add one.
func (s *Store) Decisions(dest string) ([]group.DDLDecision, error) {
	return readDest(s, dest, func(d *destRecord) []group.DDLDecision {
		if len(d.Decisions) == 0 {
			return nil
		}
		out := make([]group.DDLDecision, len(d.Decisions))
		for i, r := range d.Decisions {
			out[i] = group.DDLDecision{Lock: int(r.Lock), Action: group.DecisionAction(r.Action), AfterSeq: r.AfterSeq, Taken: r.Taken}
		}
		return out
	})
}
