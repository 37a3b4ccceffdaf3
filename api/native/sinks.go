package native

import (
	"context"
	"net/http"
	"strconv"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/stream"
)

// SinkAdmin is what the native API asks of a destination's running sinks
// beyond their stats (Served.Sinks): package sink/sinkrun's Set implements
// it. Its errors are the sink's, for the operator.
type SinkAdmin interface {
	// Detail returns a sink's spec and checkpoints (the state and head
	// seq are filled in by the handler).
	Detail(ctx context.Context, sink string) (wire.SinkDetail, error)
	// Verify compares sample random rows of the sources with the sink's
	// target, and as many of the target with the sources, for the logical
	// tables listed (none: all).
	Verify(ctx context.Context, sink string, sample int, tables []string) (wire.SinkVerify, error)
}

// Option is an option of NewHandler.
type Option func(*handler)

// WithSinks gives the handler the running sinks of the destinations it
// serves: sinks returns those of a destination, nil when it has none
// running here. Without it, a sink's detail is its state only and verify
// is answered 501.
func WithSinks(sinks func(dest string) SinkAdmin) Option {
	return func(h *handler) { h.sinkAdmin = sinks }
}

// maxSample bounds verify's ?sample.
const maxSample = 100_000

// sinkStats finds the sink named in the path among the destination's
// running sinks, or answers 404.
func (h *handler) sinkStats(w http.ResponseWriter, s *stream.Served, name string) (stream.SinkStats, bool) {
	if s.Sinks != nil {
		for _, sk := range s.Sinks() {
			if sk.Name == name {
				return sk, true
			}
		}
	}
	writeError(w, http.StatusNotFound, "destination "+s.Name+" has no sink "+strconv.Quote(name)+" running here (braid sink list shows its sinks)")
	return stream.SinkStats{}, false
}

func (h *handler) admin(dest string) SinkAdmin {
	if h.sinkAdmin == nil {
		return nil
	}
	return h.sinkAdmin(dest)
}

// sink answers one sink's state, spec and checkpoints.
func (h *handler) sink(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	name := r.PathValue("sink")
	st, ok := h.sinkStats(w, s, name)
	if !ok {
		return
	}
	var head uint64
	if s.Stats != nil {
		head = s.Stats().Seq
	}
	var d wire.SinkDetail
	if a := h.admin(s.Name); a != nil {
		var err error
		if d, err = a.Detail(r.Context(), name); err != nil {
			// The sink's target failed to answer: the admin's to read.
			writeError(w, http.StatusBadGateway, "sink "+name+": "+err.Error())
			return
		}
	}
	d.State, d.HeadSeq = SinkStates([]stream.SinkStats{st}, head)[0], head
	writeJSON(w, http.StatusOK, d)
}

// verify compares a sink's target with the sources: 400 for a bad
// sample, 404 for an unknown sink, 501 where its sinks are not run by
// this process, 502 with the sink's error for what kept the comparison
// from being made (a target or source that failed; only admins may
// verify, and the error is about their own sink).
func (h *handler) verify(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	sample := 0
	if v := q.Get("sample"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSample {
			writeError(w, http.StatusBadRequest, "sample "+strconv.Quote(v)+": want a number of rows from 1 to "+strconv.Itoa(maxSample))
			return
		}
		sample = n
	}
	name := r.PathValue("sink")
	if _, ok := h.sinkStats(w, s, name); !ok {
		return
	}
	a := h.admin(s.Name)
	if a == nil {
		writeError(w, http.StatusNotImplemented, "this server does not run destination "+s.Name+"'s sinks, so it cannot verify them")
		return
	}
	rep, err := a.Verify(r.Context(), name, sample, q["table"])
	if err != nil {
		writeError(w, http.StatusBadGateway, "sink "+name+": verify: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
