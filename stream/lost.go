package stream

import (
	"errors"
	"fmt"
	"strings"

	"github.com/braid-cdc/braid/group"
)

// ErrBeforeLoss: a client's cursor lies before transactions of a source
// lost in a failover, whose loss an operator accepted and whose LOST
// marker went out (group.LostMarker): no server has them now, so the
// stream from that cursor cannot be given again. The client is refused
// alone; the destination runs from a later point and serves the others.
var ErrBeforeLoss = errors.New("stream: cursor before transactions lost in a failover")

// lastBefore returns the last of markers that c (nil: the destination's
// start) lies before, if any.
func lastBefore(markers []group.LostMarker, c *group.Cursor) (group.LostMarker, bool) {
	for i := len(markers) - 1; i >= 0; i-- {
		if markers[i].Before(c) {
			return markers[i], true
		}
	}
	return group.LostMarker{}, false
}

// lastShort returns the last of markers that a run from c (nil: the
// destination's start) cannot go on past (group.LostMarker.Short), if
// any: a run starts at its From instead, past every earlier one.
func lastShort(markers []group.LostMarker, c *group.Cursor) (group.LostMarker, bool) {
	for i := len(markers) - 1; i >= 0; i-- {
		if markers[i].Short(c) {
			return markers[i], true
		}
	}
	return group.LostMarker{}, false
}

// beforeLoss is what a client whose cursor c lies before the lost
// transactions of marker m is told.
func beforeLoss(ds string, client string, c *group.Cursor, m group.LostMarker, source string) error {
	return lossRefusal(ds, client, fmt.Sprintf("its cursor (seq %d)", c.Seq), m, source)
}

// lossRefusal is beforeLoss for what (a cursor, or a start).
func lossRefusal(ds, client, what string, m group.LostMarker, source string) error {
	return &BeforeLossError{Dest: ds, Client: client, What: what, Source: source, Lost: m.Lost, MarkerSeq: m.Seq}
}

// BeforeLossError is the error (ErrBeforeLoss) of a client refused
// before an accepted loss: one line naming the loss, its marker's seq
// and the fix.
type BeforeLossError struct {
	Dest, Client string
	// What lies before the loss: the client's cursor, or the history it
	// asks for.
	What string
	// Source is the source that lost them, Lost the lost GTIDs, MarkerSeq
	// their LOST marker's seq.
	Source string
	Lost   string
	// MarkerSeq is 0 when the marker has not gone out yet (a run
	// accepted the loss and ended first): the run that serves the
	// others emits it.
	MarkerSeq uint64
	// Fix is what the line says to do; "" for a consumer's or a sink's.
	// A program that serves a client of its own (braid capture) names
	// its own.
	Fix string
}

func (e *BeforeLossError) Error() string {
	marker, at := fmt.Sprintf("then their LOST marker at seq %d", e.MarkerSeq), fmt.Sprintf("seq:%d", e.MarkerSeq)
	if e.MarkerSeq == 0 {
		marker = "and their LOST marker goes out next"
		at = fmt.Sprintf("the LOST marker's seq (braid destination show %s names it once it went out)", e.Dest)
	}
	fix := e.Fix
	switch {
	case fix != "":
	case strings.HasPrefix(e.Client, SinkClientPrefix):
		fix = "the sink's target lacks them: load it afresh, or remove the sink's cursor to go on from where the destination resumes"
	default:
		fix = fmt.Sprintf("drop it (braid consumer drop %s %s) and subscribe it again at %s or later", e.Dest, e.Client, at)
	}
	return fmt.Sprintf("%v: client id %s of destination %s: %s lies before transactions of source %s lost in a failover (%s), whose loss an operator accepted: "+
		"they went out in the stream, %s, and no server has them now, so the stream from there cannot be given again; the destination serves its other clients. Fix: %s",
		ErrBeforeLoss, e.Client, e.Dest, e.What, e.Source, e.Lost, marker, fix)
}

// Unwrap makes it ErrBeforeLoss.
func (e *BeforeLossError) Unwrap() error { return ErrBeforeLoss }

// refuseBeforeLoss returns why each client of cfg.Clients whose cursor
// lies before a LOST marker kept (markers), or lacks what went out before
// a loss accepted whose marker has not gone out (unmarked), is refused.
// The second: the run that accepted the loss ended before its marker went
// out; a run from such a cursor would stop the destination (the reader
// finds it before the loss, binlog.ErrLostBefore), so it starts from the
// other clients' and emits the marker.
func refuseBeforeLoss(cfg *PipelineConfig, markers []group.LostMarker, unmarked []group.UnmarkedLoss) map[string]error {
	var out map[string]error
	refuse := func(id string, why error) {
		if out == nil {
			out = map[string]error{}
		}
		out[id] = why
	}
	for id, c := range cfg.Clients {
		if c == nil {
			continue
		}
		if m, ok := lastBefore(markers, c); ok {
			refuse(id, beforeLoss(cfg.Spec.Name, id, c, m, sourceName(cfg, m.Source)))
			continue
		}
		for _, u := range unmarked {
			if u.Lacks(c) {
				refuse(id, &BeforeLossError{Dest: cfg.Spec.Name, Client: id, What: fmt.Sprintf("its cursor (seq %d)", c.Seq),
					Source: sourceName(cfg, u.Source), Lost: u.Lost})
				break
			}
		}
	}
	return out
}

// lossPoints lists the cursors right before each LOST marker kept, by
// an earlier run or this one: where a replay may start to give a marker
// again.
func (p *Pipeline) lossPoints() []*group.Cursor {
	var out []*group.Cursor
	for _, m := range group.LostMarkers(p.kept.placementsNow()) {
		out = append(out, m.From)
	}
	return out
}

func sourceName(cfg *PipelineConfig, src int) string {
	if src >= 0 && src < len(cfg.Spec.Sources) {
		return cfg.Spec.Sources[src].Name
	}
	return fmt.Sprint(src)
}
