package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/wire"
)

// handleError carries handle's error out of a connection.
type handleError struct{ err error }

func (e *handleError) Error() string { return e.err.Error() }

// Stream consumes destination name as clientID, calling handle for each
// message once and in order (see the package doc), until ctx ends (it
// returns nil, or an error wrapping ErrUnreachable when no node ever
// served the stream) or handle returns an error (it returns that error). A
// dropped connection is opened again with backoff, resuming after the last
// acked seq, at the same node or, when it does not serve, at the next one
// the client knows (it learns the cluster's nodes as it goes: see
// Members). It also returns, without retrying, the server's refusals
// (*Error): an unknown destination or bad parameters (404, 400), a missing
// or wrong credential or one not allowed to read the destination (401,
// 403), a start the sources no longer hold (410, naming the oldest seq
// still available; WithFrom, or an ephemeral stream's next seq); and
// ErrBusy when the first connection finds the client id streaming
// elsewhere (on a reconnect, that is the server not yet having seen the
// old connection end, and it is retried).
func (c *Client) Stream(ctx context.Context, name, clientID string, handle func(msg Message) error) error {
	if handle == nil {
		return errors.New("client: Stream needs a handle function")
	}
	return c.StreamViews(ctx, name, clientID, func(v *MessageView) error { return handle(v.Message()) })
}

// StreamViews is Stream for consumers that read the values in place:
// handle gets each message as a MessageView, whose values are views of the
// stream's buffer, valid only until handle returns. It makes no map, and
// no copy of a value, per row: a consumer that needs every value of every
// row costs several times less CPU than with Stream.
func (c *Client) StreamViews(ctx context.Context, name, clientID string, handle func(v *MessageView) error) error {
	if clientID == "" {
		return errors.New("client: Stream needs a client id")
	}
	if handle == nil {
		return errors.New("client: Stream needs a handle function")
	}
	d := &dedupe{done: c.resumeAfter}
	ak := &acker{c: c, name: name, clientID: clientID, done: c.resumeAfter, acked: c.resumeAfter, kick: make(chan struct{}, 1)}
	ackCtx, stopAcks := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ak.run(ackCtx) })
	// The cluster's nodes are learned before each connection, without
	// holding it up.
	learn := make(chan struct{}, 1)
	wg.Go(func() { c.learnLoop(ackCtx, learn) })
	defer func() {
		stopAcks()
		wg.Wait()
		final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		ak.flush(final)
	}()

	dec := &lineDecoder{}
	view := &MessageView{}
	backoff := c.minBackoff
	failed := 0      // attempts failed since backoff last grew or a node served
	reached := false // some node served the stream once
	var lastErr error
	ended := func() error {
		if reached || lastErr == nil {
			return nil
		}
		return fmt.Errorf("%w: the stream of %s was never served: %w", ErrUnreachable, name, lastErr)
	}
	for attempt := 0; ; attempt++ {
		select {
		case learn <- struct{}{}:
		default:
		}
		delivered, err := c.connect(ctx, name, clientID, d, ak, dec, view, handle)
		reached = reached || delivered
		if err != nil && ctx.Err() == nil {
			lastErr = err
		}
		if ctx.Err() != nil {
			return ended()
		}
		var he *handleError
		if errors.As(err, &he) {
			return he.err
		}
		var se *Error
		if errors.As(err, &se) {
			switch {
			case se.Status == http.StatusConflict && attempt == 0:
				return fmt.Errorf("%w: %s", ErrBusy, se.Message)
			case se.Status == http.StatusBadRequest || se.Status == http.StatusNotFound,
				se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden,
				se.Status == http.StatusGone:
				return err
			}
		}
		if delivered {
			backoff, failed = c.minBackoff, 0
		}
		if !delivered || errors.Is(err, errSilent) {
			c.nextNode() // this node did not serve, or went silent: try the next, if any
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		c.log.Warn("stream dropped; reconnecting", "dest", name, "client", clientID, "err", err, "in", wait, "seq", d.done)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ended()
		case <-t.C:
		}
		// The wait grows after a round of attempts, one at each node known:
		// during a failover the next node is tried soon, the same one not.
		if failed++; failed >= c.nodes.count() {
			backoff, failed = min(2*backoff, c.maxBackoff), 0
		}
		ak.flush(ctx) // resume after everything handled whole
	}
}

// errSilent: the server sent nothing for the idle timeout.
var errSilent = errors.New("client: nothing from the server")

// connect runs one connection of a stream; it reports whether any line
// came.
func (c *Client) connect(ctx context.Context, name, clientID string, d *dedupe, ak *acker, dec *lineDecoder, view *MessageView, handle func(*MessageView) error) (bool, error) {
	q := url.Values{"client-id": {clientID}, "after": {strconv.FormatUint(ak.ackedSeq(), 10)}, "checkpoint": {"true"}}
	if from := c.startFrom(d); from != "" {
		q.Set("from", from)
	}
	if c.ephemeral {
		q.Set("ephemeral", "true")
	}
	// The server sends a checkpoint line every second when idle; silence
	// much longer means a dead connection (a stalled or cut-off node
	// leaves it open), so it is dropped and the stream reconnects.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(c.idleTimeout, cancel)
	defer idle.Stop()
	dead := func(err error) error {
		if cctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w for %v, not even a keepalive: dropping the connection", errSilent, c.idleTimeout)
		}
		return err
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, c.url(q, name, "stream"), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	if !c.jsonLines {
		req.Header.Set("Accept", binaryStreamType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, dead(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, readError(resp)
	}
	d.connected()
	next := (&lineReader{r: bufio.NewReaderSize(resp.Body, streamBuffer)}).nextLine
	decode := func(b []byte) error { return c.line(b, d, ak, dec, view, handle) }
	if resp.Header.Get("Content-Type") == binaryStreamType {
		next = (&frameReader{r: resp.Body, buf: make([]byte, streamBuffer)}).next
		decode = func(b []byte) error { return c.frame(b, d, ak, dec, view, handle) }
	}
	got := false
	for {
		msg, err := next()
		idle.Stop() // the handler's time is not the server's silence
		if msg != nil {
			got = true
			if herr := decode(msg); herr != nil {
				return got, herr
			}
		}
		idle.Reset(c.idleTimeout)
		// A line without its newline, or a frame short of its length, was
		// cut: it comes again.
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the server never ends a stream on its own
			}
			return got, dead(fmt.Errorf("client: reading the stream: %w", err))
		}
	}
}

// startFrom is a connection's from parameter: WithFrom's, or, for an
// ephemeral stream that a node served before (the next node has no cursor
// of it), the transaction after the last one handled whole; the messages
// of it that were handled are dropped by count, as after any reconnect. A
// stream that has neither handled a transaction whole nor been told of one
// by a checkpoint keeps WithFrom's.
func (c *Client) startFrom(d *dedupe) string {
	if c.ephemeral && d.served && d.done > 0 {
		return "seq:" + strconv.FormatUint(d.done+1, 10)
	}
	return c.from
}

// streamBuffer is how much of a stream is read at a time (and the longest
// line or frame read without a copy).
var streamBuffer = 64 << 10

// lineReader reads a stream's lines without a copy each: a line is a view
// of the reader's buffer, or of long when it is longer than the buffer.
type lineReader struct {
	r    *bufio.Reader
	long []byte
}

// maxKeptLong is the most of long kept for the next long line.
const maxKeptLong = 1 << 20

// next returns the next line, with its newline unless the stream ended
// without one. The line is only valid until the next call.
func (lr *lineReader) next() ([]byte, error) {
	if cap(lr.long) > maxKeptLong {
		lr.long = nil // one huge line does not cost its size for the stream's life
	}
	line, err := lr.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	lr.long = append(lr.long[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = lr.r.ReadSlice('\n')
		lr.long = append(lr.long, line...)
	}
	return lr.long, err
}

// nextLine returns the next whole line without its newline, or nil with
// the error when the stream ended inside one.
func (lr *lineReader) nextLine() ([]byte, error) {
	line, err := lr.next()
	if len(line) > 0 && line[len(line)-1] == '\n' {
		return line[:len(line)-1], err
	}
	return nil, err
}

// envelope is a stream line: a message, or a checkpoint.
type envelope struct {
	Message
	Checkpoint *uint64 `json:"checkpoint"`
}

// line handles one line; b is only valid during the call, and so is what
// view holds after it.
func (c *Client) line(b []byte, d *dedupe, ak *acker, dec *lineDecoder, view *MessageView, handle func(*MessageView) error) error {
	v := view
	if !dec.decode(b, v) {
		// The decoder did not know the line: json decodes it, or says
		// what is wrong with it.
		var env envelope
		if err := json.Unmarshal(b, &env); err != nil {
			return fmt.Errorf("client: a stream line is not a flat message: %w", err)
		}
		v = viewOf(&env.Message, b)
		v.checkpoint = env.Checkpoint
	}
	return c.message(v, len(b), d, ak, handle)
}

// frame handles one frame of the binary encoding, as line does a line.
func (c *Client) frame(b []byte, d *dedupe, ak *acker, dec *lineDecoder, view *MessageView, handle func(*MessageView) error) error {
	if err := dec.decodeBinary(b, view); err != nil {
		return err
	}
	return c.message(view, len(b), d, ak, handle)
}

// message hands a decoded message (size bytes on the wire) to handle
// unless it was handled before, or takes a checkpoint.
func (c *Client) message(v *MessageView, size int, d *dedupe, ak *acker, handle func(*MessageView) error) error {
	if v.checkpoint != nil {
		d.checkpoint(*v.checkpoint)
		ak.setDone(d.done)
		return nil
	}
	if !d.admit(v.Seq) {
		return nil
	}
	if v.Seq > d.cur && d.cur > 0 {
		// A later transaction's first message proves the one in progress
		// complete, whether or not handle takes this one.
		d.done = max(d.done, v.Seq-1)
		ak.setDone(d.done)
	}
	if err := handle(v); err != nil {
		return &handleError{err}
	}
	d.handled(v.Seq)
	ak.handled(d.done, size)
	return nil
}

// dedupe tells new messages from ones handled before a reconnect.
type dedupe struct {
	done uint64 // every transaction with seq <= done was handled whole
	cur  uint64 // the transaction in progress (> done), 0 for none
	curN int    // how many of its messages were handled
	// This connection's count of messages of seq connSeq so far.
	connSeq uint64
	connN   int
	served  bool // a connection was opened once
}

func (d *dedupe) connected() { d.connSeq, d.connN, d.served = 0, 0, true }

// admit reports whether a message of seq is new.
func (d *dedupe) admit(seq uint64) bool {
	if seq != d.connSeq {
		d.connSeq, d.connN = seq, 0
	}
	d.connN++
	switch {
	case seq <= d.done:
		return false
	case seq == d.cur:
		return d.connN > d.curN
	}
	return true
}

// handled records a message of seq handled: a higher seq than before
// completes every transaction below it (messages come in seq order).
func (d *dedupe) handled(seq uint64) {
	if seq != d.cur && seq > 0 {
		d.done = max(d.done, seq-1)
		d.cur, d.curN = seq, 0
	}
	d.curN++
}

// checkpoint records the server's word that transaction seq was sent
// whole: every message of it came before.
func (d *dedupe) checkpoint(seq uint64) { d.done = max(d.done, seq) }

// acker acks complete transactions by seq, in the background and on
// demand.
type acker struct {
	c              *Client
	name, clientID string
	kick           chan struct{}

	mu           sync.Mutex
	done         uint64 // the last seq handled whole
	acked        uint64 // the last seq acked
	pending      int    // messages handled since the last kick
	pendingBytes int    // and their bytes

	flushMu sync.Mutex // one ack request at a time
}

func (a *acker) setDone(seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.done = max(a.done, seq)
}

// handled counts a message of size bytes handled and kicks an ack every
// AckMessages messages or AckBytes bytes.
func (a *acker) handled(done uint64, size int) {
	a.mu.Lock()
	a.done = max(a.done, done)
	a.pending++
	a.pendingBytes += size
	kick := a.pending >= a.c.ackMessages || a.pendingBytes >= a.c.ackBytes
	if kick {
		a.pending, a.pendingBytes = 0, 0
	}
	a.mu.Unlock()
	if kick {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

func (a *acker) ackedSeq() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked
}

func (a *acker) run(ctx context.Context) {
	t := time.NewTicker(a.c.ackInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.kick:
		}
		a.flush(ctx)
	}
}

// flush acks the last complete transaction if it was not acked yet. A
// failure is logged; the next flush tries again.
func (a *acker) flush(ctx context.Context) {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	done, acked := a.done, a.acked
	a.mu.Unlock()
	if done <= acked {
		return
	}
	q := url.Values{"client-id": {a.clientID}, "seq": {strconv.FormatUint(done, 10)}}
	var res wire.AckResult
	// An ack to a stalled node must not hold the stream up: it is retried.
	ctx, cancel := context.WithTimeout(ctx, a.c.idleTimeout)
	defer cancel()
	if err := a.c.do(ctx, http.MethodPost, a.c.url(q, a.name, "ack"), &res); err != nil {
		if !errors.Is(err, context.Canceled) {
			a.c.log.Warn("ack failed; will retry", "dest", a.name, "client", a.clientID, "seq", done, "err", err)
		}
		return
	}
	a.mu.Lock()
	a.acked = max(a.acked, done)
	a.mu.Unlock()
}
