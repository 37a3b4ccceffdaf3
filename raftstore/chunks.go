package raftstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
)

// chunkRecord is a group.Placement as stored: a type of its own, so that
// the log's and the snapshots' form does not follow group's. It and the
// command keep the names of the snapshot chunks the log held first.
type chunkRecord struct {
	Source  int             `json:"source"`
	Index   int             `json:"index"`
	Table   string          `json:"table"`
	After   []string        `json:"after,omitempty"`
	Through []string        `json:"through,omitempty"`
	At      change.Position `json:"at"`
	Taken   uint64          `json:"taken"`
	Time    int64           `json:"time"`
	AtMark  group.Mark      `json:"atMark,omitzero"`
	Late    bool            `json:"late,omitempty"`
	GTID    string          `json:"gtid,omitempty"`
	Lost    *change.Loss    `json:"lost,omitempty"` // a loss accepted (group.Placement.Lost)
	// MarkerSeq and Cursor: where its LOST marker went out
	// (group.Placement.MarkerSeq).
	MarkerSeq uint64        `json:"markerSeq,omitempty"`
	Cursor    *group.Cursor `json:"cursor,omitempty"`
}

// SavePlacement appends a placement (an initial-snapshot chunk or a late
// transaction) to the destination's placement log, as one Raft entry
// fenced by epoch exactly like SaveDecision: a writer whose epoch is not
// current gets an error wrapping ErrStaleEpoch and must stop. The owner
// writes one at a time, before its chunk or transaction goes out, so the
// log's order is theirs.
func (s *Store) SavePlacement(ctx context.Context, dest string, epoch uint64, c group.Placement) error {
	if dest == "" {
		return fmt.Errorf("%w: empty destination name", ErrInvalid)
	}
	cmd := &command{Type: cmdSaveChunk, Dest: dest, Epoch: epoch, Chunk: chunkRecord(c)}
	_, err := s.apply(ctx, cmd.encode())
	return err
}

// Placements returns the destination's placements in the order kept,
// none if there are none, ErrNotFound if the destination does not exist
// (local read; current once the reader's assignment is applied here, as
// Decisions).
func (s *Store) Placements(dest string) ([]group.Placement, error) {
	return readDest(s, dest, func(d *destRecord) []group.Placement {
		out := make([]group.Placement, len(d.Chunks))
		for i, r := range d.Chunks {
			// The state's slices stay the state's: the caller gets copies.
			r.After, r.Through = slices.Clone(r.After), slices.Clone(r.Through)
			out[i] = group.Placement(r)
		}
		return out
	})
}
