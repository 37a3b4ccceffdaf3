package stream

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/braid-cdc/braid/group"
)

// held is the group.Keeper a pipeline gives its destination: its
// PipelineConfig.Keep (nil: none), with the decisions and placements
// also held in memory, read when the pipeline starts and each added once
// kept, for replay readers and Served.
type held struct {
	group.Keeper // nil: nothing kept past the pipeline

	mu         sync.Mutex
	decisions  []group.DDLDecision
	placements []group.Placement
}

// hold reads what k kept so far.
func hold(k group.Keeper) (*held, error) {
	h := &held{Keeper: k}
	if k == nil {
		return h, nil
	}
	var err error
	if h.decisions, err = k.Decisions(); err != nil {
		return nil, err
	}
	if h.placements, err = k.Placements(); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *held) decisionsNow() []group.DDLDecision {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.decisions)
}

func (h *held) placementsNow() []group.Placement {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.placements)
}

// Cursors, SaveCursor and ForgetCursor: the destination keeps no cursor
// (the pipeline's caller does).
func (h *held) Cursors() (map[string]*group.Cursor, error) {
	if h.Keeper == nil {
		return map[string]*group.Cursor{}, nil
	}
	return h.Keeper.Cursors()
}

func (h *held) SaveCursor(client string, c *group.Cursor) error {
	if h.Keeper == nil {
		return nil
	}
	return h.Keeper.SaveCursor(client, c)
}

func (h *held) ForgetCursor(client string) error {
	if h.Keeper == nil {
		return nil
	}
	return h.Keeper.ForgetCursor(client)
}

// Decisions implements group.Keeper from memory.
func (h *held) Decisions() ([]group.DDLDecision, error) { return h.decisionsNow(), nil }

// KeepDecision keeps d, then holds it.
func (h *held) KeepDecision(ctx context.Context, d group.DDLDecision) error {
	if h.Keeper != nil {
		if err := h.Keeper.KeepDecision(ctx, d); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.decisions = append(h.decisions, d)
	h.mu.Unlock()
	return nil
}

// Placements implements group.Keeper from memory.
func (h *held) Placements() ([]group.Placement, error) { return h.placementsNow(), nil }

// KeepPlacement keeps pl, then holds it.
func (h *held) KeepPlacement(ctx context.Context, pl group.Placement) error {
	if h.Keeper != nil {
		if err := h.Keeper.KeepPlacement(ctx, pl); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.placements = append(h.placements, pl)
	h.mu.Unlock()
	return nil
}

// Close does not close the pipeline's Keep, which is its caller's.
func (h *held) Close() error { return nil }

// errReplayKeeps: a replay reader has no cursors to keep.
var errReplayKeeps = errors.New("stream: a replay reader keeps no cursor")

// replayKeeper is what a replay reader's destination reads: the decisions
// its live pipeline held when it started, and the placements the live
// one holds as it goes. It keeps nothing: what the replay makes (a late
// transaction where its live run had none) goes out unkept, as the live
// run's stream is the one kept.
type replayKeeper struct {
	live      *held
	decisions []group.DDLDecision
}

func (r replayKeeper) Cursors() (map[string]*group.Cursor, error) {
	return map[string]*group.Cursor{}, nil
}
func (r replayKeeper) SaveCursor(string, *group.Cursor) error { return errReplayKeeps }
func (r replayKeeper) ForgetCursor(string) error              { return errReplayKeeps }
func (r replayKeeper) Decisions() ([]group.DDLDecision, error) {
	return slices.Clone(r.decisions), nil
}
func (r replayKeeper) KeepDecision(context.Context, group.DDLDecision) error { return nil }
func (r replayKeeper) Placements() ([]group.Placement, error)                { return r.live.placementsNow(), nil }
func (r replayKeeper) KeepPlacement(context.Context, group.Placement) error  { return nil }
func (r replayKeeper) Close() error                                          { return nil }
