package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
	// marker went out: kept with the accept (LostMarker), so every later
	// run, replay and new owner knows it; 0 before.
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
		if p.MarkerSeq != 0 { // where its marker went out
			acc := out[p.Source]
			for i := len(acc) - 1; i >= 0; i-- {
				if acc[i].Lost == p.Lost.Lost {
					acc[i].MarkerSeq = p.MarkerSeq
					break
				}
			}
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

// keepMarker keeps, before it goes out, where source src's marker of
// lost transactions lost goes out (LostMarker): as transaction seq,
// right after cursor before. Once: a run that emits it again (from a
// cursor before it) finds it kept; a replay keeps nothing.
func (d *Destination) keepMarker(ctx context.Context, src int, lost string, seq uint64, before *Cursor) error {
	keep := d.cfg.Keep
	if keep == nil || d.cfg.ReplayOnly {
		return nil
	}
	placed, err := keep.Placements()
	if err != nil {
		return err
	}
	var loss *change.Loss
	for _, p := range placed {
		switch {
		case p.Lost == nil || p.Source != src || p.Lost.Lost != lost:
		case p.MarkerSeq != 0:
			return nil // kept by the run that emitted it first
		default:
			loss = p.Lost
		}
	}
	if loss == nil {
		return nil // an accept not kept (a keeper that lost it): nothing to say where
	}
	sc := before.Sources[src]
	rec := Placement{Source: src, Lost: loss, MarkerSeq: seq, At: sc.Pos, AtMark: sc.Mark, Cursor: before, Taken: before.Taken,
		Time: d.cfg.Clock.Now().UnixMicro()}
	if err := keep.KeepPlacement(ctx, rec); err != nil {
		return fmt.Errorf("group: source %s: keep where the LOST marker of %s went out (seq %d): %w", d.cfg.Spec.Sources[src].Name, lost, seq, err)
	}
	return nil
}

// LostMarker is where the LOST marker of a loss accepted for a source
// went out, as kept (keepMarker). The lost transactions went out before
// it, and no server of the source has them now: a run from a cursor
// before them cannot give the stream again (binlog.ErrLostBefore,
// ErrLostInside), so a destination starts no run there, and a client
// whose cursor is there is refused alone (package stream).
type LostMarker struct {
	Source int
	change.Loss
	// Seq is the marker's seq; At and AtMark the source's boundary it
	// follows, where the loss was found; From the merged stream's
	// cursor right before it, where a run may start: it goes on past the
	// accepted loss and gives the marker again at Seq.
	Seq    uint64
	At     change.Position
	AtMark Mark
	From   *Cursor
}

// LostMarkers lists the LOST markers kept in a placement log, in the
// order they went out.
func LostMarkers(log []Placement) []LostMarker {
	var out []LostMarker
	for _, p := range log {
		if p.Lost != nil && p.MarkerSeq != 0 && p.Cursor != nil {
			out = append(out, LostMarker{Source: p.Source, Loss: *p.Lost, Seq: p.MarkerSeq, At: p.At, AtMark: p.AtMark, From: p.Cursor})
		}
	}
	slices.SortFunc(out, func(a, b LostMarker) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Before reports whether c (nil: the destination's start) lies before
// the lost transactions of m: it lacks some of what went out before the
// marker, and a run from it cannot go on past the loss (Short). A
// cursor at From's seq has every transaction before the marker, though
// its source's position may be short of the point: that point counts
// the source's transactions of tables not selected (EventProgress)
// after its last one emitted, and a client's cursor moves only with a
// transaction emitted. It is at the point, served by a run from From.
func (m LostMarker) Before(c *Cursor) bool {
	return m.Short(c) && (c == nil || m.From == nil || c.Seq < m.From.Seq)
}

// Short reports whether a run from c (nil: the destination's start)
// cannot go on past the loss of m as accepted: c lacks the marker, and
// its source's position is short of the point the marker follows (from
// there the server lacks what the source's position leads to). A run
// starts at From instead; a cursor between the point and the marker
// (the others' transactions) is not short: a run from it goes on past
// the accepted loss and emits the marker again.
func (m LostMarker) Short(c *Cursor) bool {
	if c == nil {
		return true
	}
	if c.Seq >= m.Seq || m.Source < 0 || m.Source >= len(c.Sources) {
		return false
	}
	sc := c.Sources[m.Source]
	return !reached(sc.Pos, sc.Mark, m.At, m.AtMark)
}

// UnmarkedLoss is a loss accepted for a source whose LOST marker has
// not gone out (none is kept): the run that accepted it ended first (the
// store full behind a slow client, the keeper unreachable). The lost
// transactions went out before the point it was found at (From), and no
// server has them now; the next run emits the marker.
type UnmarkedLoss struct {
	Source int
	change.Loss
}

// UnmarkedLosses lists the losses accepted in a placement log whose
// marker is not kept, in the order accepted.
func UnmarkedLosses(log []Placement) []UnmarkedLoss {
	var out []UnmarkedLoss
	for _, p := range log {
		if p.Lost == nil {
			continue
		}
		if p.MarkerSeq == 0 {
			out = append(out, UnmarkedLoss{Source: p.Source, Loss: *p.Lost})
			continue
		}
		out = slices.DeleteFunc(out, func(u UnmarkedLoss) bool { return u.Source == p.Source && u.Lost == p.Lost.Lost })
	}
	return out
}

// Lacks reports whether c lacks transactions that went out before the
// loss u was found: its source's GTID state does not cover the loss's
// From. A run from c cannot go on past the loss (no server has what c
// lacks). false when they do not compare: c without a GTID state (kept
// before braid kept them), nil c (the destination's start: the reader
// says what to do), or a source out of range.
func (u UnmarkedLoss) Lacks(c *Cursor) bool {
	if c == nil || u.Source < 0 || u.Source >= len(c.Sources) {
		return false
	}
	covers, ok := c.Sources[u.Source].Mark.GTIDs.Covers(change.GTIDText(u.From))
	return ok && !covers
}

// MarkersOut returns, by seq, the lost GTIDs of each LOST marker that
// went out, in this run or kept by an earlier one
// (AcceptedLoss.MarkerSeq): a replay of the stream must have that
// marker at that seq (stream checks it). Safe for concurrent use; a
// marker is noted before it is emitted.
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
		if p.Lost != nil && p.Source == src && p.MarkerSeq == 0 {
			out = append(out, *p.Lost)
		}
	}
	return out
}
