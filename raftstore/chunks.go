package raftstore

import (
	"context"
	"fmt"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/group"
)

// chunkRecord is a group.SnapshotChunk as stored: a type of its own, so
// that the log's and the snapshots' form does not follow group's.
type chunkRecord struct {
	Source  int             `json:"source"`
	Index   int             `json:"index"`
	Table   string          `json:"table"`
	After   []string        `json:"after,omitempty"`
	Through []string        `json:"through,omitempty"`
	At      change.Position `json:"at"`
	Taken   uint64          `json:"taken"`
	Time    int64           `json:"time"`
	Late    bool            `json:"late,omitempty"`
}

// SaveChunk appends an initial-snapshot chunk to the destination's chunk
// log, as one Raft entry fenced by epoch exactly like SaveDecision: a
// writer whose epoch is not current gets an error wrapping ErrStaleEpoch
// and must stop. The owner writes one at a time, before the chunk goes
// out, so the log's order is the chunks' order.
func (s *Store) SaveChunk(ctx context.Context, dest string, epoch uint64, c group.SnapshotChunk) error {
	if dest == "" {
		return fmt.Errorf("%w: empty destination name", ErrInvalid)
	}
	cmd := &command{Type: cmdSaveChunk, Dest: dest, Epoch: epoch, Chunk: chunkRecord(c)}
	_, err := s.apply(ctx, cmd.encode())
	return err
}

// Chunks returns the destination's snapshot chunks in the order kept,
// none if there are none, ErrNotFound if the destination does not exist
// (local read; current once the reader's assignment is applied here, as
// Decisions).
func (s *Store) Chunks(dest string) ([]group.SnapshotChunk, error) {
	return readDest(s, dest, func(d *destRecord) []group.SnapshotChunk {
		out := make([]group.SnapshotChunk, len(d.Chunks))
		for i, r := range d.Chunks {
			out[i] = group.SnapshotChunk(r)
		}
		return out
	})
}
