package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// BatchEvents is how many events a stream reads from the store at a time.
const BatchEvents = 256

// KeepaliveEvery is how often an idle stream that asked for checkpoints
// gets one even when nothing moved: a client that hears nothing for several
// periods knows the connection is dead (a stalled or cut-off node leaves
// it open), not quiet.
const KeepaliveEvery = time.Second

// batchWait is how long a stream waits for the store before it looks
// around (sends a checkpoint, notices a closed connection).
const batchWait = 500 * time.Millisecond

// maxClientID bounds the length of a client id.
const maxClientID = 128

type handler struct {
	reg *stream.Registry
	log *slog.Logger
	mux *http.ServeMux

	mu      sync.Mutex
	clients map[clientKey]*clientState
	made    int // client states made, for pruneLocked

	sinkAdmin func(dest string) SinkAdmin  // WithSinks; nil: none
	owner     func(r *http.Request) string // WithOwner; nil: ""
}

// NewHandler returns the native API over the destinations of reg. A nil
// logger discards.
func NewHandler(reg *stream.Registry, logger *slog.Logger, opts ...Option) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{reg: reg, log: logger, mux: http.NewServeMux(), clients: map[clientKey]*clientState{}}
	for _, o := range opts {
		o(h)
	}
	h.mux.HandleFunc("GET /v1/destinations", h.list)
	h.mux.HandleFunc("GET /v1/destinations/{name}", h.state)
	h.mux.HandleFunc("GET /v1/destinations/{name}/stream", h.stream)
	h.mux.HandleFunc("POST /v1/destinations/{name}/ack", h.ack)
	h.mux.HandleFunc("GET /v1/destinations/{name}/consumers", h.consumers)
	h.mux.HandleFunc("DELETE /v1/destinations/{name}/consumers/{id}", h.dropConsumer)
	h.mux.HandleFunc("GET /v1/destinations/{name}/ddl", h.ddl)
	h.mux.HandleFunc("POST /v1/destinations/{name}/ddl/{lock}", h.decide)
	h.mux.HandleFunc("POST /v1/destinations/{name}/sources/{source}/accept-lost", h.acceptLost)
	h.mux.HandleFunc("GET /v1/destinations/{name}/sinks", h.sinks)
	h.mux.HandleFunc("GET /v1/destinations/{name}/sinks/{sink}", h.sink)
	h.mux.HandleFunc("POST /v1/destinations/{name}/sinks/{sink}/verify", h.verify)
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd, pattern := h.mux.Handler(r)
	if pattern == "" {
		// The mux's 404 or 405, answered in JSON.
		hd.ServeHTTP(&errorOnly{w: w, r: r}, r)
		return
	}
	h.mux.ServeHTTP(w, r) // sets the path values
}

// errorOnly turns the mux's plain-text error answers into JSON ones.
type errorOnly struct {
	w    http.ResponseWriter
	r    *http.Request
	done bool
}

func (e *errorOnly) Header() http.Header { return e.w.Header() }

func (e *errorOnly) WriteHeader(status int) {
	if e.done {
		return
	}
	e.done = true
	msg := fmt.Sprintf("no such endpoint: %s %s", e.r.Method, e.r.URL.Path)
	if status == http.StatusMethodNotAllowed {
		msg = fmt.Sprintf("method %s not allowed on %s (allowed: %s)", e.r.Method, e.r.URL.Path, e.w.Header().Get("Allow"))
	}
	e.w.Header().Del("X-Content-Type-Options")
	writeError(e.w, status, msg)
}

func (e *errorOnly) Write(b []byte) (int, error) {
	e.WriteHeader(http.StatusNotFound)
	return len(b), nil
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.reg.Names())
}

// lookup finds the destination named in the path, or answers 404.
func (h *handler) lookup(w http.ResponseWriter, r *http.Request) (*stream.Served, bool) {
	s, err := h.reg.Lookup(r.PathValue("name"))
	if err != nil {
		if errors.Is(err, stream.ErrUnknownDestination) {
			writeError(w, http.StatusNotFound, err.Error())
		} else {
			Internal(w, r, h.log, err)
		}
		return nil, false
	}
	return s, true
}

func (h *handler) state(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	now := time.Now()
	st := wire.State{Name: s.Name, Sources: []wire.SourceState{}, Clients: []wire.ClientState{}}
	if s.Stats != nil {
		gs := s.Stats()
		st.Seq, st.Late, st.Undercut = gs.Seq, gs.Late, gs.Undercut
		for _, src := range gs.Sources {
			ss := wire.SourceState{Name: src.Name, Pos: src.Pos.String(), Waiting: src.Waiting,
				Connected: src.Connected, LastError: src.LastError, Idle: src.Idle, Behind: src.Behind,
				BehindMs: src.Lag.Milliseconds()}
			if !src.LastErrorAt.IsZero() {
				at := src.LastErrorAt
				ss.LastErrorAt = &at
			}
			if !src.ReadPos.IsZero() {
				ss.ReadPos = src.ReadPos.String()
			}
			if !src.ServerPos.IsZero() {
				ss.ServerPos = src.ServerPos.String()
			}
			ss.GTIDs, ss.Switches, ss.Lost = src.GTIDs, src.Switches, src.Lost
			if src.Server != nil {
				ss.Server = src.Server.String()
			}
			if !src.LastSwitchAt.IsZero() {
				at := src.LastSwitchAt
				ss.LastSwitchAt = &at
			}
			if !src.LastCommit.IsZero() {
				lc := src.LastCommit
				lag := now.Sub(lc).Milliseconds()
				ss.LastCommit, ss.LagMs = &lc, &lag
			}
			if !src.LastSeen.IsZero() {
				ls := src.LastSeen
				ss.LastSeen = &ls
			}
			ss.Snapshot = snapshotState(src.Snapshot)
			ss.Accepted = acceptedLosses(src.Accepted)
			st.Sources = append(st.Sources, ss)
		}
	}
	ss := s.Store.Stats()
	st.Store = wire.StoreState{Events: ss.Events, Bytes: ss.Bytes, PeakBytes: ss.PeakBytes, Floor: ss.Floor, BlockedBy: ss.BlockedBy}
	st.Clients = h.clientStates(s)
	writeJSON(w, http.StatusOK, st)
}

// acceptedLosses are a source's accepted losses as the API shows them;
// nil for none.
func acceptedLosses(in []group.AcceptedLoss) []wire.AcceptedLoss {
	var out []wire.AcceptedLoss
	for _, a := range in {
		w := wire.AcceptedLoss{Lost: a.Lost, From: a.From, Server: a.Server, MarkerSeq: a.MarkerSeq}
		if !a.At.IsZero() {
			at := a.At.UTC()
			w.AcceptedAt = &at
		}
		out = append(out, w)
	}
	return out
}

// snapshotState is a source's snapshot progress as the API shows it; nil
// without a snapshot.
func snapshotState(sn *group.SnapshotStats) *wire.SnapshotState {
	if sn == nil {
		return nil
	}
	return &wire.SnapshotState{Tables: sn.Tables, TablesDone: sn.TablesDone, Rows: sn.Rows, EstimatedRows: sn.EstimatedRows,
		RowsPerSecond: sn.RowsPerSecond, EtaSeconds: sn.ETA.Seconds(), Done: sn.Done}
}

// clientStates lists the client ids subscribed to s's store, by id.
func (h *handler) clientStates(s *stream.Served) []wire.ClientState {
	native := map[string]*clientState{}
	for _, c := range h.clientsOf(s.Store) {
		native[c.id] = c
	}
	out := []wire.ClientState{}
	for _, sc := range s.Store.Clients() {
		cs := wire.ClientState{ID: sc.ID, PendingBatches: sc.Batches, Cursor: cursorState(sc.Mark)}
		if c, ok := native[sc.ID]; ok {
			cs = c.state(s.Store)
		} else if cs.Cursor != nil {
			cs.AckedSeq = cs.Cursor.Seq
		}
		cs.Unacked, cs.Ephemeral, cs.Detached, cs.Replaying, cs.Refused = sc.Unacked, sc.Ephemeral, sc.Detached, sc.Replaying, sc.Refused
		if !sc.LastSeen.IsZero() {
			ls := sc.LastSeen
			cs.LastSeen = &ls
		}
		out = append(out, cs)
	}
	return out
}

func (h *handler) consumers(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, h.clientStates(s))
}

// dropConsumer forgets a client id: its cursor, what the store holds for
// it, its state here. One with a stream open is refused (409): stop it
// first, or it would come back at once as a new client id.
func (h *handler) dropConsumer(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	var found *stream.ClientStats
	for _, sc := range s.Store.Clients() {
		if sc.ID == id {
			found = &sc
			break
		}
	}
	if found == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("destination %s has no consumer %q (braid consumer list %s shows them)", s.Name, id, s.Name))
		return
	}
	if c := h.findClient(s.Store, id); c != nil {
		c.mu.Lock()
		busy := c.streaming
		c.mu.Unlock()
		if busy {
			writeError(w, http.StatusConflict, fmt.Sprintf("consumer %q of destination %s has a stream open: stop it first, then drop it", id, s.Name))
			return
		}
	}
	s.Store.Unsubscribe(id)
	h.forget(s.Store, id)
	h.log.Info("consumer dropped", "dest", s.Name, "client", id, "acked_seq", found.AckedSeq)
	writeJSON(w, http.StatusOK, wire.ConsumerDropped{Destination: s.Name, ClientID: id, AckedSeq: found.AckedSeq})
}

// DDLState renders a destination's shard-DDL merge state for the API
// and the status page (nil st: passthrough).
func DDLState(name, mode string, st *group.ShardDDLState, decisions []group.DDLDecision) wire.DDLState {
	out := wire.DDLState{Destination: name, Mode: mode, Locks: []wire.DDLLock{}, Decisions: []wire.DDLDecision{}}
	for _, d := range decisions {
		out.Decisions = append(out.Decisions, wire.DDLDecision{Lock: d.Lock, Action: string(d.Action), AfterSeq: d.AfterSeq, Taken: d.Taken})
	}
	if st == nil {
		return out
	}
	out.CatchingUp = len(st.CatchUps) > 0
	for _, l := range st.Locks {
		out.Locks = append(out.Locks, wire.DDLLock{ID: l.ID, Table: l.Logical, SQL: l.SQL, Since: l.Since,
			Done: append([]string{}, l.Done...), Waiting: append([]string{}, l.Waiting...), Conflicts: l.Conflicts, HeldRows: l.HeldRows})
	}
	return out
}

func (h *handler) ddl(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	mode := spec.ShardDDLPassthrough
	var st *group.ShardDDLState
	if s.ShardDDL != nil {
		if st = s.ShardDDL(); st != nil {
			mode = s.ShardDDLMode
		}
	}
	var decisions []group.DDLDecision
	if s.Decisions != nil {
		decisions = s.Decisions()
	}
	out := DDLState(s.Name, string(mode), st, decisions)
	if s.Migrations != nil {
		for _, m := range s.Migrations() {
			out.Migrations = append(out.Migrations, wire.DDLMigration{Shard: m.Shard, Table: m.Logical, Shadow: m.Shadow, Since: m.Since.String(), DDL: m.DDL})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// SinkStates renders a destination's sinks for the API, head being the
// destination's last seq.
func SinkStates(sinks []stream.SinkStats, head uint64) []wire.SinkState {
	out := make([]wire.SinkState, 0, len(sinks))
	for _, sk := range sinks {
		out = append(out, wire.SinkState{Name: sk.Name, Type: string(sk.Type), Address: sk.Address, Workers: sk.Workers, Running: sk.Running,
			AppliedSeq: sk.AppliedSeq, LagSeq: head - min(head, sk.AppliedSeq), Rows: sk.Rows, Upserts: sk.Upserts, Missing: sk.Missing,
			Replayed: sk.Replayed, Pending: sk.Pending, Returns: sk.Returns,
			Conflicts: sk.Conflicts, LagSeconds: sk.LagSeconds(head, time.Now()), RowsPerSecond: sk.RowsPerSecond, LastError: sk.LastError})
	}
	return out
}

func (h *handler) sinks(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	var sinks []stream.SinkStats
	if s.Sinks != nil {
		sinks = s.Sinks()
	}
	var head uint64
	if s.Stats != nil {
		head = s.Stats().Seq
	}
	writeJSON(w, http.StatusOK, SinkStates(sinks, head))
}

// decide applies an operator's decision about a lock: 404 for a lock
// that is not open, 400 for an unknown action.
func (h *handler) decide(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	lock, err := strconv.Atoi(r.PathValue("lock"))
	action := group.DecisionAction(r.URL.Query().Get("action"))
	switch {
	case err != nil || lock <= 0:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("lock %q: want the lock's number, as `braid ddl list %s` shows it", r.PathValue("lock"), s.Name))
		return
	case !action.Valid():
		writeError(w, http.StatusBadRequest, fmt.Sprintf("action %q: want unlock (emit the lock's DDL now) or skip (emit nothing); both release the rows held", action))
		return
	case s.Decide == nil:
		writeError(w, http.StatusNotFound, fmt.Sprintf("destination %s has no shard-DDL locks here", s.Name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := s.Decide(ctx, lock, action); err != nil {
		if errors.Is(err, group.ErrNoLock) {
			writeError(w, http.StatusNotFound, err.Error())
		} else {
			Internal(w, r, h.log, fmt.Errorf("destination %s: decide lock %d: %w", s.Name, lock, err))
		}
		return
	}
	h.log.Info("shard DDL lock decided by an operator", "dest", s.Name, "lock", lock, "action", action)
	writeJSON(w, http.StatusOK, wire.DDLDecided{Destination: s.Name, Lock: lock, Action: string(action)})
}

// acceptLost accepts the loss of transactions a source waits on: 404
// for an unknown source, 409 when it waits on none.
func (h *handler) acceptLost(w http.ResponseWriter, r *http.Request) {
	s, ok := h.lookup(w, r)
	if !ok {
		return
	}
	source := r.PathValue("source")
	if s.AcceptLost == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("destination %s cannot accept lost transactions here", s.Name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	l, err := s.AcceptLost(ctx, source)
	switch {
	case errors.Is(err, group.ErrNoSource):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case errors.Is(err, group.ErrNothingLost):
		writeError(w, http.StatusConflict, err.Error())
		return
	case err != nil:
		Internal(w, r, h.log, fmt.Errorf("destination %s: accept the loss of source %s: %w", s.Name, source, err))
		return
	}
	h.log.Warn("lost transactions accepted by an operator", "dest", s.Name, "source", source, "lost", l.Lost)
	writeJSON(w, http.StatusOK, wire.LostAccepted{Destination: s.Name, Source: source, Lost: l.Lost, From: l.From, Server: l.Server})
}

// cursorState renders a client's saved cursor (nil: none yet).
func cursorState(c *group.Cursor) *wire.CursorState {
	if c == nil {
		return nil
	}
	cs := &wire.CursorState{Seq: c.Seq, Sources: make([]wire.SourcePosition, len(c.Sources))}
	for i, sc := range c.Sources {
		cs.Sources[i] = wire.SourcePosition{Name: sc.Name, Pos: sc.Pos.String()}
	}
	return cs
}

// lookupClient is lookup plus the request's client-id parameter; it answers
// the error itself.
func (h *handler) lookupClient(w http.ResponseWriter, r *http.Request) (*stream.Served, string, url.Values, bool) {
	s, ok := h.lookup(w, r)
	if !ok {
		return nil, "", nil, false
	}
	q := r.URL.Query()
	id, err := clientID(q.Get("client-id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, "", nil, false
	}
	if err := stream.CheckClientID(id); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return nil, "", nil, false
	}
	return s, id, q, true
}

func (h *handler) ack(w http.ResponseWriter, r *http.Request) {
	s, id, q, ok := h.lookupClient(w, r)
	if !ok {
		return
	}
	if q.Get("seq") == "" {
		writeError(w, http.StatusBadRequest, "missing parameter seq: the seq of the last transaction handled")
		return
	}
	seq, err := strconv.ParseUint(q.Get("seq"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("parameter seq %q is not an unsigned integer", q.Get("seq")))
		return
	}
	c := h.findClient(s.Store, id)
	if c == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("client id %q has not streamed destination %q on this node", id, s.Name))
		return
	}
	if top := c.ackable(s.Store); seq > top {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("seq %d is above the highest seq sent to client id %q (%d): ack the seq of the last transaction handled", seq, id, top))
		return
	}
	n, pending, acked, err := c.ack(s.Store, seq)
	switch {
	case errors.Is(err, stream.ErrUnknownBatch), errors.Is(err, stream.ErrNotSubscribed):
		// The batches this handler handed out are not the store's any
		// more: the client id was read elsewhere meanwhile, detached, or
		// dropped. The client's stream is what is wrong, not the server.
		h.log.Info("ack refused: the batches handed out are void", "dest", s.Name, "client", id, "seq", seq, "err", err)
		writeError(w, http.StatusConflict, fmt.Sprintf("ack of seq %d for client id %q refused: what was sent to it was taken back (read again meanwhile, detached or dropped): open the stream again after the last seq handled", seq, id))
		return
	case err != nil:
		Internal(w, r, h.log, fmt.Errorf("destination %s: ack of client %q up to seq %d: %w", s.Name, id, seq, err))
		return
	}
	writeJSON(w, http.StatusOK, wire.AckResult{ClientID: id, Seq: acked, Acked: n, Pending: pending})
}

// clientID checks a client id parameter.
func clientID(id string) (string, error) {
	if id == "" {
		return "", errors.New("missing parameter client-id")
	}
	if len(id) > maxClientID {
		return "", fmt.Errorf("parameter client-id is %d bytes long, at most %d allowed", len(id), maxClientID)
	}
	for _, c := range []byte(id) {
		if c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("parameter client-id %q holds a control character", id)
		}
	}
	return id, nil
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, wire.ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(wire.ErrorBody{Error: "internal error: the answer could not be encoded"})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
