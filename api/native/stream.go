package native

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

var errBusy = errors.New("native: client id is streaming")

// stream serves GET /v1/destinations/{name}/stream; see the package doc.
func (h *handler) stream(w http.ResponseWriter, r *http.Request) {
	s, id, q, ok := h.lookupClient(w, r)
	if !ok {
		return
	}
	var (
		after uint64
		err   error
	)
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("parameter after %q is not an unsigned integer (the seq of the last transaction acked)", v))
			return
		}
	}
	if err := s.CheckLive(); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	checkpoint, ok := boolParam(w, q, "checkpoint")
	if !ok {
		return
	}
	var open stream.OpenOptions
	if open.Ephemeral, ok = boolParam(w, q, "ephemeral"); !ok {
		return
	}
	if open.Start, err = stream.ParseStart(q.Get("from")); err != nil {
		writeError(w, http.StatusBadRequest, "parameter from: "+err.Error())
		return
	}
	open.Consumer, open.Owner = true, h.ownerOf(r)
	c := h.client(s.Store, id)
	if err := c.open(r.Context(), s.Store, open); err != nil {
		if !errors.Is(err, errBusy) && !s.Store.Subscribed(id) {
			h.forget(s.Store, id) // nothing of a refused client id stays
		}
		switch {
		case errors.Is(err, stream.ErrTooManyClients):
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("destination %s: %v", s.Name, err))
		case errors.Is(err, errBusy):
			writeError(w, http.StatusConflict, fmt.Sprintf("client id %q already has a stream of destination %q open; one stream per client id at a time (close it, or use another client id)", id, s.Name))
		case errors.Is(err, stream.ErrHistoryGone), errors.Is(err, stream.ErrBeforeLoss):
			writeError(w, http.StatusGone, fmt.Sprintf("destination %s: %v", s.Name, err))
		case errors.Is(err, stream.ErrReplaysBusy):
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("destination %s: %v", s.Name, err))
		default:
			Internal(w, r, h.log, fmt.Errorf("destination %s: open client %q: %w", s.Name, id, err))
		}
		return
	}
	log := h.log.With("dest", s.Name, "client", id)
	// Where the client stands: a new client id at latest has every
	// transaction up to the newest one; its first checkpoint says so, so
	// that it can resume from there (an ephemeral one, after a failover).
	done := s.Store.Done(id)
	c.mu.Lock()
	after = max(after, c.ackedSeq) // what the client acked is handled
	c.sentSeq = max(c.sentSeq, after, done)
	endedAt, endErr := c.endedAt, c.endErr
	c.mu.Unlock()
	if endErr != nil {
		log.Info("consumer back after a failed stream", "after", after, "away", time.Since(endedAt).Round(time.Millisecond), "failure", endErr)
	} else {
		log.Info("stream opened", "after", after, "from", open.Start.String(), "ephemeral", open.Ephemeral)
	}
	var streamErr error
	defer func() {
		c.close(streamErr)
		if open.Ephemeral {
			// It keeps nothing: no cursor, nothing held for it.
			s.Store.Unsubscribe(id)
			h.forget(s.Store, id)
		}
	}()

	inBinary := wantsBinary(r)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any write timeout
	// and the server's read timeout, which bounds a request, not a stream
	// (TestServerBounds holds a stream open past it).
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	if inBinary {
		w.Header().Set("Content-Type", BinaryStreamType)
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		log.Warn("stream cannot flush", "err", err)
		return
	}
	sw := &streamWriter{bw: bufio.NewWriterSize(liveWriter{w, rc, s.CheckLive}, 64<<10), after: after, checkpoint: checkpoint, done: done,
		flat: flat.Writer{Binary: inBinary, EmptyTransactions: true}}
	err = h.pump(r.Context(), s, c, sw, rc)
	switch {
	case r.Context().Err() != nil:
		log.Info("stream closed by the client")
	case errors.Is(err, stream.ErrClosed):
		log.Info("stream ended: the destination stopped")
	default:
		streamErr = err
		log.Warn("stream ended", "err", err)
	}
}

// boolParam reads an optional boolean parameter, answering 400 itself
// when it is not one.
func boolParam(w http.ResponseWriter, q url.Values, name string) (v, ok bool) {
	s := q.Get(name)
	if s == "" {
		return false, true
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("parameter %s %q is not a boolean", name, s))
		return false, false
	}
	return v, true
}

// pump moves batches from the store to the client until ctx ends or
// something fails.
func (h *handler) pump(ctx context.Context, s *stream.Served, c *clientState, sw *streamWriter, rc *http.ResponseController) error {
	for {
		b, err := s.Store.GetTx(ctx, c.id, BatchEvents, batchWait)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.CheckLive(); err != nil {
			// Not ours to hand out now: what was taken goes back.
			s.Store.Rollback(c.id)
			return err
		}
		if b.ID < 0 {
			// The store may be full of the transaction in progress,
			// whose end cannot come until some of it is acked.
			if err := c.ahead(s.Store); err != nil {
				return err
			}
			// Idle: announce the last transaction written whole when it
			// moved, and every KeepaliveEvery anyway, so that a client
			// can tell a quiet stream from a dead connection.
			if sw.checkpoint && (sw.done > sw.sentCheckpoint || time.Since(sw.lastWrite) >= KeepaliveEvery) {
				if err := sw.writeCheckpoint(); err != nil {
					return err
				}
				if err := flush(sw, rc); err != nil {
					return err
				}
			}
			continue
		}
		var maxSeq uint64
		for _, ev := range b.Events {
			maxSeq = max(maxSeq, ev.Seq)
		}
		c.handed(b.ID, maxSeq, !slices.ContainsFunc(b.Marks, func(m *group.Cursor) bool { return m != nil }))
		if maxSeq <= sw.after {
			// Only transactions the client already has: ack at once.
			if _, _, _, err := c.ack(s.Store, sw.after); err != nil {
				return err
			}
		}
		if err := sw.events(b.Events); err != nil {
			if s.CheckLive() != nil {
				s.Store.Rollback(c.id) // not ours to hand out now
			}
			return err
		}
		if err := s.CheckLive(); err != nil {
			// The lease ran out while the batch was formatted (this node
			// was stalled, say): what is still buffered must not go out.
			sw.bw.Reset(io.Discard)
			s.Store.Rollback(c.id)
			return err
		}
		if err := flush(sw, rc); err != nil {
			return err
		}
		if err := c.ahead(s.Store); err != nil {
			return err
		}
	}
}

// liveWriter passes a stream's bytes on only while the node may hand
// events out, and sends them at once. A batch bigger than the stream's
// buffer goes out in parts as it is formatted, before pump looks at the
// lease again: a node stalled meanwhile (SIGSTOP, a long pause), whose
// successor serves the destination by the time it runs on, sent the
// rest of the batch after it resumed (TestClusterFencesStalledOwner, in
// a CI run at load). Flushing each part keeps none in the HTTP server's
// buffers, which would go out when the handler returns.
type liveWriter struct {
	w    io.Writer
	rc   *http.ResponseController
	live func() error
}

func (l liveWriter) Write(p []byte) (int, error) {
	if err := l.live(); err != nil {
		return 0, err
	}
	n, err := l.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, l.rc.Flush()
}

func flush(sw *streamWriter, rc *http.ResponseController) error {
	if err := sw.bw.Flush(); err != nil {
		return err
	}
	sw.lastWrite = time.Now()
	return rc.Flush()
}

// streamWriter turns a client's events into lines.
type streamWriter struct {
	bw         *bufio.Writer
	flat       flat.Writer
	after      uint64 // skip transactions with seq <= after
	checkpoint bool   // send {"checkpoint":seq} lines
	open       bool   // inside a transaction whose EventBegin was written
	// done is the last transaction written whole; sentCheckpoint the last
	// one announced.
	done, sentCheckpoint uint64
	lastWrite            time.Time // the last flush
	// pass holds the events of a batch that go to the flat writer.
	pass []*change.Event
}

// events writes a batch's lines: the messages of the events it passes,
// formatted on as many goroutines as the process runs at once when the
// batch is big (flat.Writer.WriteEvents), so that one stream keeps up with
// a merge that reads its sources on as many.
func (sw *streamWriter) events(evs []*change.Event) error {
	sw.pass = sw.pass[:0]
	for _, ev := range evs {
		if sw.passes(ev) {
			sw.pass = append(sw.pass, ev)
		}
	}
	err := sw.flat.WriteEvents(sw.pass, runtime.GOMAXPROCS(0), sw.line)
	clear(sw.pass) // let go of the events
	return err
}

// passes reports whether ev goes to the flat writer, and follows the
// transactions it writes whole.
func (sw *streamWriter) passes(ev *change.Event) bool {
	if ev.Seq <= sw.after {
		return false
	}
	switch ev.Type {
	case change.EventBegin:
		sw.open = true
	case change.EventRows:
		// Not the rest of a transaction whose beginning was acked.
		return sw.open
	case change.EventCommit:
		if !sw.open {
			return false
		}
		sw.open = false
		sw.done = ev.Seq
	case change.EventDDL:
		sw.done = ev.Seq
	default:
		return false
	}
	return true
}

// line writes one message: a JSON line, or a binary frame.
func (sw *streamWriter) line(b []byte) error {
	if sw.flat.Binary {
		var head [binary.MaxVarintLen64]byte
		if _, err := sw.bw.Write(head[:binary.PutUvarint(head[:], uint64(len(b)))]); err != nil {
			return err
		}
		_, err := sw.bw.Write(b)
		return err
	}
	if _, err := sw.bw.Write(b); err != nil {
		return err
	}
	return sw.bw.WriteByte('\n')
}

func (sw *streamWriter) writeCheckpoint() error {
	var err error
	if sw.flat.Binary {
		err = sw.line(binary.AppendUvarint([]byte{flat.BinaryCheckpoint}, sw.done))
	} else {
		b := strconv.AppendUint([]byte(`{"checkpoint":`), sw.done, 10)
		err = sw.line(append(b, '}'))
	}
	if err != nil {
		return err
	}
	sw.sentCheckpoint = sw.done
	return nil
}

// BinaryStreamType is the media type of a stream in braid's binary
// encoding (see flat.BinaryMessage), which a client asks for with it in
// its Accept header; any other gets NDJSON.
const BinaryStreamType = "application/x-braid-stream"

// wantsBinary reports whether the request accepts the binary encoding.
func wantsBinary(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), BinaryStreamType) {
				return true
			}
		}
	}
	return false
}
