package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
)

// A source's reader that finds a promoted server lacking transactions
// braid already emitted waits (binlog: they were lost in the failover).
// An operator's accept (AcceptLost) is kept in the placement log as a
// Placement with Lost, then handed to the reader, which goes on and
// emits a marker transaction naming the lost GTIDs; every later run
// gives the readers the losses kept (binlog.Config.Accepted), so a
// restart from a cursor before the marker goes on past the same loss
// without asking again, and emits the same marker.

// LossAccepter is a Reader that waits on lost transactions and goes on
// past a loss accepted (binlog.Reader is one).
type LossAccepter interface {
	// Loss is the loss the reader waits on now, if any.
	Loss() (change.Loss, bool)
	// AcceptLoss lets a reader waiting on l go on.
	AcceptLoss(l change.Loss)
}

var _ LossAccepter = (*binlog.Reader)(nil)

// ErrNothingLost: a loss was to be accepted where the source's reader
// waits on none.
var ErrNothingLost = binlog.ErrNothingLost

// ErrNoSource: a call names a source the destination does not have.
var ErrNoSource = errors.New("no such source")

// AcceptLost accepts the loss source waits on now: exactly that set of
// lost transactions after that point (another needs another accept). It
// is kept (Config.Keep) before the reader is let go on, so a restart, a
// replay or a new owner keeps it. It fails with ErrNoSource for an
// unknown source and ErrNothingLost when the source waits on no loss.
// Safe for concurrent use.
func (d *Destination) AcceptLost(ctx context.Context, source string) (change.Loss, error) {
	i := -1
	var names []string
	for j, src := range d.cfg.Spec.Sources {
		names = append(names, src.Name)
		if src.Name == source {
			i = j
		}
	}
	if i < 0 {
		return change.Loss{}, fmt.Errorf("%w: destination %s has no source %q (its sources: %s)", ErrNoSource, d.cfg.Spec.Name, source, strings.Join(names, ", "))
	}
	la, ok := lossAccepter(d.readers[i])
	var l change.Loss
	if ok {
		l, ok = la.Loss()
	}
	if !ok {
		return change.Loss{}, fmt.Errorf("%w: source %s of destination %s is not waiting on lost transactions (it lacks nothing braid emitted), so there is nothing to accept; `braid destination show %s` names them under LOST when a promoted server lacks some",
			ErrNothingLost, source, d.cfg.Spec.Name, d.cfg.Spec.Name)
	}
	now := time.UnixMicro(d.cfg.Clock.Now().UnixMicro()) // as kept
	if keep := d.cfg.Keep; keep != nil {
		if err := keep.KeepPlacement(ctx, Placement{Source: i, Lost: &l, Time: now.UnixMicro()}); err != nil {
			return change.Loss{}, fmt.Errorf("group: source %s: keep the accepted loss of %s: %w", source, l.Lost, err)
		}
	}
	d.statsMu.Lock()
	d.accepted[i] = append(d.accepted[i], AcceptedLoss{Loss: l, At: now})
	d.statsMu.Unlock()
	la.AcceptLoss(l)
	d.log.Warn("an operator accepted the loss of transactions braid had emitted: the source goes on without them", "source", source, "lost", l.Lost,
		"from", l.From, "new_server", l.Server)
	return l, nil
}

// lossAccepter finds the LossAccepter r is or wraps (Unwrap).
func lossAccepter(r Reader) (LossAccepter, bool) {
	for r != nil {
		if la, ok := r.(LossAccepter); ok {
			return la, true
		}
		w, ok := r.(interface{ Unwrap() Reader })
		if !ok {
			return nil, false
		}
		r = w.Unwrap()
	}
	return nil, false
}

// keptLosses returns what source src's reader asks for the losses
// accepted while it runs (binlog.Config.Losses): the keeper's, as a
// replay reader learns those its live run keeps.
func (d *Destination) keptLosses(src int) func() []change.Loss {
	return func() []change.Loss {
		placed, err := d.cfg.keptPlacements()
		if err != nil {
			return nil
		}
		return lossesOf(placed, src)
	}
}

// AcceptedLoss is a loss an operator accepted for a source (AcceptLost),
// as Stats shows it.
type AcceptedLoss struct {
	change.Loss
	// At is when it was accepted; zero for one kept by a braid that did
	// not keep the time.
	At time.Time
	// MarkerSeq is the seq of the marker transaction naming it, once the
	// marker went out in this run; 0 before, and for one that went out
	// before the run's cursor (a marker is not kept apart from the
	// stream).
	MarkerSeq uint64
}

// acceptedOf lists each of n sources' accepted losses in a placement
// log, oldest first.
func acceptedOf(log []Placement, n int) [][]AcceptedLoss {
	out := make([][]AcceptedLoss, n)
	for _, p := range log {
		if p.Lost == nil || p.Source < 0 || p.Source >= n {
			continue
		}
		a := AcceptedLoss{Loss: *p.Lost}
		if p.Time != 0 {
			a.At = time.UnixMicro(p.Time)
		}
		out[p.Source] = append(out[p.Source], a)
	}
	return out
}

// markerOut notes that source src's marker of lost transactions lost
// went out as transaction seq.
func (d *Destination) markerOut(src int, lost string, seq uint64) {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	acc := d.accepted[src]
	for i := len(acc) - 1; i >= 0; i-- {
		if acc[i].Lost == lost {
			acc[i].MarkerSeq = seq
			return
		}
	}
}

// MarkersOut returns, by seq, the lost GTIDs of each LOST marker that
// went out in this run (AcceptedLoss.MarkerSeq; not those before its
// cursor): a replay of the stream must have that marker at that seq
// (stream checks it). Safe for concurrent use; a marker is noted before
// it is emitted.
func (d *Destination) MarkersOut() map[uint64]string {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	var out map[uint64]string
	for _, acc := range d.accepted {
		for _, a := range acc {
			if a.MarkerSeq == 0 {
				continue
			}
			if out == nil {
				out = map[uint64]string{}
			}
			out[a.MarkerSeq] = a.Lost
		}
	}
	return out
}

// lossesOf lists the losses accepted for source src in a placement log.
func lossesOf(log []Placement, src int) []change.Loss {
	var out []change.Loss
	for _, p := range log {
		if p.Lost != nil && p.Source == src {
			out = append(out, *p.Lost)
		}
	}
	return out
}
