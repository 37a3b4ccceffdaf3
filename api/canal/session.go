package canal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"time"

	pbp "github.com/withlin/canal-go/protocol/packet"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/stream"
)

// canal's error codes, sent in an Ack's error_code.
const (
	// CodeError is canal's code for a failed authentication, a packet
	// type it does not serve and any failure of a request.
	CodeError = 400
	// CodeMissingIdentity: the request has no destination or client id.
	CodeMissingIdentity = 401
	// CodeBatchZero: a CLIENTACK with batch id 0.
	CodeBatchZero = 402
)

// forever stands for canal's "wait without a timeout".
const forever = time.Duration(math.MaxInt64)

// errClientGone ends a session whose client closed its connection while a
// GET waited for it (see watchClient); the session has logged it.
var errClientGone = errors.New("canal: client closed the connection while waiting")

// errClientSpoke ends a GET's wait early: the client sent something.
var errClientSpoke = errors.New("canal: client sent a request while a GET waited")

// clientConn is a session's connection: reads return first the bytes a
// waiting GET read ahead (see watchClient), so that a request the client
// sent meanwhile is not lost.
type clientConn struct {
	net.Conn
	ahead []byte
}

func (c *clientConn) Read(b []byte) (int, error) {
	if len(c.ahead) > 0 {
		n := copy(b, c.ahead)
		c.ahead = c.ahead[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// session is one client connection; its goroutine owns it.
type session struct {
	s                         *Server
	conn                      *clientConn
	log                       *slog.Logger
	readTimeout, writeTimeout time.Duration
	seed                      []byte
	peer                      bool // served with ServePeer
	authed                    bool
	mayRead                   func(dest string) bool // once authed
	user                      string                 // once authed
	out                       []byte
	enc                       encoder    // MESSAGES frames
	relay                     relayState // relay.go
	// consumer is the destination and client id served ("dest/client"),
	// once a request named them; failure why the session failed.
	consumer string
	failure  error
}

// serving notes the consumer a request names; the first time in a
// session, it says so if that consumer's last session failed.
func (ss *session) serving(dest, client string) {
	c := dest + "/" + client
	if c == ss.consumer {
		return
	}
	ss.consumer = c
	if f, ok := ss.s.back(c); ok {
		ss.log.Info("canal consumer back after a failed session", "dest", dest, "client", client,
			"away", time.Since(f.at).Round(time.Millisecond), "failure", f.err)
	}
}

// serve runs the connection until the client leaves, a read fails or ctx
// ends. The caller closes the connection.
func (ss *session) serve(ctx context.Context) {
	defer func() {
		if ss.failure != nil && ss.consumer != "" {
			ss.s.sessionFailed(ss.consumer, ss.failure)
		}
	}()
	ss.seed = newSeed()
	hs, _ := proto.Marshal(&pbp.Handshake{
		CommunicationEncodingPresent: &pbp.Handshake_CommunicationEncoding{CommunicationEncoding: "utf8"},
		Seeds:                        ss.seed,
	})
	if err := ss.write(pbp.PacketType_HANDSHAKE, hs); err != nil {
		ss.writeFailed(ctx, err)
		return
	}
	for {
		if ss.relay.owner != nil {
			ss.runRelay(ctx)
			return
		}
		ss.conn.SetReadDeadline(time.Now().Add(ss.readTimeout))
		limit := ss.s.cfg.MaxFrame
		if !ss.authed {
			// Before login only a handshake answer comes: a few hundred
			// bytes. Four strangers holding 16 MiB frames one byte short
			// took a node from 28 to 192 MB of RSS.
			limit = min(limit, MaxLoginFrame)
		}
		body, err := ReadFrame(ss.conn, limit)
		if err != nil {
			ss.readFailed(ctx, err)
			return
		}
		ss.relay.frame = body
		var p pbp.Packet
		if err := proto.Unmarshal(body, &p); err != nil {
			if ss.fail(CodeError, fmt.Sprintf("undecodable packet of %d bytes: %v", len(body), err)) != nil || !ss.authed {
				return
			}
			continue
		}
		if !ss.authed {
			if !ss.authenticate(ctx, &p) {
				return
			}
			continue
		}
		if err := ss.handle(ctx, &p); err != nil {
			if !errors.Is(err, errClientGone) {
				ss.writeFailed(ctx, err)
			}
			return
		}
	}
}

func (ss *session) readFailed(ctx context.Context, err error) {
	var ne net.Error
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, io.EOF):
		ss.log.Debug("client closed the connection")
	case errors.Is(err, ErrFrameTooLarge):
		ss.failure = err
		ss.log.Warn("closing connection: client frame too large", "err", err)
		ss.writeAck(CodeError, err.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		ss.failure = err
		ss.log.Warn("closing connection: client closed it inside a frame (truncated frame)")
	case errors.As(err, &ne) && ne.Timeout():
		ss.log.Info("closing idle connection", "timeout", ss.readTimeout)
	default:
		ss.failure = err
		ss.log.Warn("closing connection: read failed", "err", err)
	}
}

func (ss *session) writeFailed(ctx context.Context, err error) {
	if ctx.Err() == nil {
		ss.failure = err
		ss.log.Warn("closing connection: write failed", "err", err)
	}
}

// write sends one packet.
func (ss *session) write(t pbp.PacketType, body []byte) error {
	b, err := proto.Marshal(&pbp.Packet{VersionPresent: &pbp.Packet_Version{Version: 1}, Type: t, Body: body})
	if err != nil {
		return err
	}
	if ss.out, err = AppendFrame(ss.out[:0], b); err != nil {
		return err
	}
	return ss.writeFrame(ss.out)
}

// writeFrame sends a frame.
func (ss *session) writeFrame(frame []byte) error {
	ss.conn.SetWriteDeadline(time.Now().Add(ss.writeTimeout))
	_, err := ss.conn.Write(frame)
	// Do not hold a big packet's buffer between requests (MESSAGES
	// frames have the encoder's buffer, which it keeps while it is busy).
	if cap(ss.out) > 1<<20 {
		ss.out = nil
	}
	return err
}

// writeAck sends an ACK; code 0 is success.
func (ss *session) writeAck(code int32, msg string) error {
	ack := &pbp.Ack{ErrorMessage: msg}
	if code != 0 {
		ack.ErrorCodePresent = &pbp.Ack_ErrorCode{ErrorCode: code}
	}
	b, _ := proto.Marshal(ack)
	return ss.write(pbp.PacketType_ACK, b)
}

// fail logs a refused request and answers it with an error ACK.
func (ss *session) fail(code int32, msg string, attrs ...any) error {
	ss.log.Warn("request refused", append([]any{"code", code, "reason", msg}, attrs...)...)
	return ss.writeAck(code, msg)
}

// authenticate handles the first packet; it reports whether the client
// may go on.
func (ss *session) authenticate(ctx context.Context, p *pbp.Packet) bool {
	if p.Type != pbp.PacketType_CLIENTAUTHENTICATION {
		ss.fail(CodeError, fmt.Sprintf("expected CLIENTAUTHENTICATION first, got packet type=%s", p.Type))
		return false
	}
	var a pbp.ClientAuth
	if err := proto.Unmarshal(p.Body, &a); err != nil {
		ss.fail(CodeError, fmt.Sprintf("undecodable CLIENTAUTHENTICATION: %v", err))
		return false
	}
	mayRead, ok := ss.s.auth(remoteIP(ss.conn.RemoteAddr()), a.Username, a.Password, ss.seed, ss.peer)
	if !ok {
		// One line per name and minute, ten in all: failures are the
		// client's to repeat.
		if log, unlogged := ss.s.authLog.Allow(a.Username, time.Now()); log {
			ss.log.Warn("request refused", "code", CodeError, "reason", "auth failed for user:"+a.Username, "user", a.Username, "unlogged_before", unlogged)
		}
		ss.writeAck(CodeError, "auth failed for user:"+a.Username)
		return false
	}
	ss.mayRead = mayRead
	if a.Destination != "" && !mayRead(a.Destination) {
		ss.fail(CodeError, deniedMessage(a.Username, a.Destination), "user", a.Username, "dest", a.Destination)
		return false
	}
	if ss.relay.relayed = isRelayed(&a); ss.relay.relayed {
		ss.log = ss.log.With("relayed", true)
	}
	// canal's clients send these in milliseconds (canal's server reads
	// them so, whatever its .proto says).
	if ms := a.GetNetReadTimeout(); ms > 0 {
		ss.readTimeout = time.Duration(ms) * time.Millisecond
	}
	if ms := a.GetNetWriteTimeout(); ms > 0 {
		ss.writeTimeout = time.Duration(ms) * time.Millisecond
	}
	if err := stream.CheckClientID(a.ClientId); err != nil {
		ss.fail(CodeError, err.Error(), "user", a.Username, "dest", a.Destination, "client", a.ClientId)
		return false
	}
	if a.Destination != "" && a.ClientId != "" {
		d, err := ss.s.cfg.Registry.Lookup(a.Destination)
		switch {
		case err != nil && ss.canForward(err):
			if !ss.forwardAuth(ctx, &a, err) {
				return false
			}
		case err != nil:
			ss.fail(CodeError, err.Error(), "dest", a.Destination)
			return false
		default:
			ss.serving(a.Destination, a.ClientId)
			if err := d.Store.Open(ctx, a.ClientId, stream.OpenOptions{Consumer: true, Owner: a.Username}); err != nil {
				ss.fail(CodeError, err.Error(), "dest", a.Destination, "client", a.ClientId)
				return false
			}
		}
	}
	ss.authed, ss.user = true, a.Username
	ss.log = ss.log.With("user", a.Username)
	return ss.writeAck(0, "") == nil
}

// handle serves one request after authentication; it returns an error only
// when the connection is broken.
func (ss *session) handle(ctx context.Context, p *pbp.Packet) error {
	switch p.Type {
	case pbp.PacketType_SUBSCRIPTION:
		var m pbp.Sub
		return ss.identified(ctx, p, &m, m.GetDestination, m.GetClientId, func(d *stream.Served, client string) error {
			if err := d.Store.Open(ctx, client, stream.OpenOptions{Consumer: true, Owner: ss.user}); err != nil {
				return ss.fail(CodeError, err.Error(), "dest", d.Name, "client", client)
			}
			return ss.writeAck(0, "")
		})
	case pbp.PacketType_UNSUBSCRIPTION:
		var m pbp.Unsub
		return ss.identified(ctx, p, &m, m.GetDestination, m.GetClientId, func(d *stream.Served, client string) error {
			d.Store.Unsubscribe(client)
			return ss.writeAck(0, "")
		})
	case pbp.PacketType_GET:
		var m pbp.Get
		return ss.identified(ctx, p, &m, m.GetDestination, m.GetClientId, func(d *stream.Served, client string) error {
			return ss.get(ctx, d, client, &m)
		})
	case pbp.PacketType_CLIENTACK:
		var m pbp.ClientAck
		return ss.identified(ctx, p, &m, m.GetDestination, m.GetClientId, func(d *stream.Served, client string) error {
			switch id := m.BatchId; {
			case id == 0:
				return ss.fail(CodeBatchZero, "batchId should assign value", "dest", d.Name, "client", client)
			case id == -1: // the GET it answers had nothing: canal ignores it
				return nil
			default:
				if err := d.Store.Ack(client, id-1); errors.Is(err, stream.ErrUnknownBatch) {
					// The store's message counts batches from 0; the client's from 1.
					return ss.fail(CodeError, fmt.Sprintf("ack of batch %d refused: %v: it is not the client's oldest un-acked batch (acks come in order)", id, stream.ErrUnknownBatch),
						"dest", d.Name, "client", client)
				} else if err != nil {
					return ss.fail(CodeError, fmt.Sprintf("ack of batch %d refused: %v", id, err), "dest", d.Name, "client", client)
				}
				return nil
			}
		})
	case pbp.PacketType_CLIENTROLLBACK:
		var m pbp.ClientRollback
		return ss.identified(ctx, p, &m, m.GetDestination, m.GetClientId, func(d *stream.Served, client string) error {
			// Batch 0 rolls back every batch; canal rolls back everything
			// un-acked for any other id too (its store rewinds to the acked
			// point). A client not subscribed yet (canal's clients roll back
			// on connect) has nothing to roll back: canal ignores it.
			if err := d.Store.Rollback(client); err != nil {
				ss.log.Debug("rollback ignored", "dest", d.Name, "client", client, "err", err)
			}
			return nil
		})
	}
	return ss.fail(CodeError, fmt.Sprintf("packet type=%s is NOT supported!", p.Type))
}

// deniedMessage refuses user a destination its account may not read.
func deniedMessage(user, dest string) string {
	return fmt.Sprintf("user %s may not read destination %s: an admin lists it in the user's destinations in the users file", user, dest)
}

// identified decodes a request that names a destination and a client id,
// looks the destination up and runs do; it answers canal's errors for a
// request it cannot decode, a missing identity and an unknown destination,
// unless Config.Forward names the destination's owner: then the connection
// is relayed there from this request on (relay.go).
func (ss *session) identified(ctx context.Context, p *pbp.Packet, m proto.Message, dest, client func() string, do func(*stream.Served, string) error) error {
	if err := proto.Unmarshal(p.Body, m); err != nil {
		return ss.fail(CodeError, fmt.Sprintf("undecodable %s: %v", p.Type, err))
	}
	if dest() == "" || client() == "" {
		return ss.fail(CodeMissingIdentity, "destination or clientId is null", "type", p.Type.String())
	}
	if !ss.mayRead(dest()) {
		return ss.fail(CodeError, deniedMessage(ss.user, dest()), "dest", dest(), "client", client(), "type", p.Type.String())
	}
	if err := stream.CheckClientID(client()); err != nil {
		return ss.fail(CodeError, err.Error(), "dest", dest(), "client", client(), "type", p.Type.String())
	}
	d, err := ss.s.cfg.Registry.Lookup(dest())
	if err != nil && ss.canForward(err) {
		return ss.forward(ctx, p.Type, dest(), client(), err)
	}
	if err != nil {
		return ss.fail(CodeError, err.Error(), "dest", dest(), "client", client(), "type", p.Type.String())
	}
	ss.serving(dest(), client())
	return do(d, client())
}

// getWait is how long a GET waits for an event, by canal's rules: a timeout
// of -1 (canal's clients' "none", and the field's default) does not wait;
// 0 or below waits without limit; above 0 waits that long in unit (a
// java.util.concurrent.TimeUnit ordinal, milliseconds when absent or
// unknown).
func getWait(g *pbp.Get) time.Duration {
	if g.TimeoutPresent == nil || g.GetTimeout() == -1 {
		return 0
	}
	t := g.GetTimeout()
	if t <= 0 {
		return forever
	}
	unit := time.Millisecond
	if g.UnitPresent != nil {
		switch g.GetUnit() {
		case 0:
			unit = time.Nanosecond
		case 1:
			unit = time.Microsecond
		case 3:
			unit = time.Second
		case 4:
			unit = time.Minute
		case 5:
			unit = time.Hour
		case 6:
			unit = 24 * time.Hour
		}
	}
	if t > int64(forever/unit) {
		return forever
	}
	return time.Duration(t) * unit
}

// MaxBatchBytes bounds the store events one GET hands out, by their
// Event.Size: a client asking for a huge fetch_size gets fewer entries
// (canal's clients take any count up to it), so that the frame a session
// builds, which is about that size, stays a bounded few MiB beside the
// store, not a copy of it.
const MaxBatchBytes = 8 << 20

// get serves a GET: up to fetch_size entries (one per event), waiting as
// canal does up to the timeout for fetch_size of them (see getWait and
// stream.Store.Fill), as one MESSAGES packet whose batch id is the store's
// batch id + 1 (canal's ids start at 1: a CLIENTACK of 0 is an error), or
// -1 with no entries when nothing is ready. The entries' events add up to
// MaxBatchBytes at most (one at least).
func (ss *session) get(ctx context.Context, d *stream.Served, client string, g *pbp.Get) error {
	var b stream.Batch
	if g.FetchSize > 0 {
		var err error
		b, err = ss.fill(ctx, d, client, g)
		if errors.Is(err, errClientGone) {
			return err
		}
		if err != nil { // nothing handed out (stream.Store fails only then)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return ss.fail(CodeError, fmt.Sprintf("get failed: %v", err), "dest", d.Name, "client", client)
		}
	}
	if err := d.CheckLive(); err != nil {
		// This node may not hand the destination out now (in a cluster:
		// it is being taken over, or cannot confirm it still owns it).
		// canal's clients take an error answer to a GET badly; closing
		// the connection makes them reconnect, to whichever node owns
		// the destination by then.
		d.Store.Rollback(client)
		ss.log.Warn("closing connection: destination not servable here now", "dest", d.Name, "client", client, "err", err)
		return fmt.Errorf("canal: %w", err)
	}
	id := int64(-1)
	if b.ID >= 0 && g.FetchSize > 0 {
		id = b.ID + 1
		if g.GetAutoAck() {
			if err := d.Store.Ack(client, b.ID); err != nil {
				return ss.fail(CodeError, fmt.Sprintf("auto ack failed: %v", err), "dest", d.Name, "client", client)
			}
		}
	}
	frame, err := ss.enc.frame(id, b.Events)
	if err != nil {
		return ss.fail(CodeError, err.Error(), "dest", d.Name, "client", client)
	}
	return ss.writeFrame(frame)
}

// fill takes a GET's batch from the store. While it waits it watches the
// connection (watchClient): a client that closes it ends the wait and the
// session (errClientGone) at once, not when the timeout, up to canal's
// days, runs out; a client that sends a request ends the wait with what is
// ready.
func (ss *session) fill(ctx context.Context, d *stream.Served, client string, g *pbp.Get) (stream.Batch, error) {
	wait := getWait(g)
	if wait == 0 {
		return d.Store.Fill(ctx, client, int(g.FetchSize), MaxBatchBytes, 0)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := ss.watchClient(cancel)
	start := time.Now()
	b, err := d.Store.Fill(wctx, client, int(g.FetchSize), MaxBatchBytes, wait)
	stop()
	switch cause := context.Cause(wctx); {
	case ctx.Err() != nil:
		return b, err
	case errors.Is(cause, errClientGone):
		// A batch handed out meanwhile stays un-acked: the client's next
		// connection rolls it back, as after any disconnection.
		ss.log.Debug("client closed the connection while waiting", "dest", d.Name, "client", client,
			"waited", time.Since(start).Round(time.Millisecond), "timeout", wait)
		return b, errClientGone
	case errors.Is(cause, errClientSpoke) && err != nil:
		return stream.Batch{ID: -1}, nil // nothing was ready: an empty answer
	}
	return b, err
}

// watchClient reads from the connection while a GET waits; the client
// sends nothing then (canal's protocol is request, answer), so a read that
// ends means the client is gone (EOF, reset: cancel(errClientGone)) or sent
// its next request early (cancel(errClientSpoke); the byte read waits in
// conn.ahead for the session's next read). A relayed session's EOF is the
// relay shutting its side for a client that did (relay.go): the owner still
// answers, so only a reset ends that wait. stop ends the read and waits for
// it; the caller sets the read deadline again before it reads.
func (ss *session) watchClient(cancel context.CancelCauseFunc) (stop func()) {
	ss.conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		n, err := ss.conn.Conn.Read(b[:])
		var ne net.Error
		switch {
		case n > 0:
			ss.conn.ahead = append(ss.conn.ahead, b[0])
			cancel(errClientSpoke)
		case errors.As(err, &ne) && ne.Timeout(): // stop
		case errors.Is(err, io.EOF) && ss.relay.relayed:
		case err != nil:
			cancel(errClientGone)
		}
	}()
	return func() {
		ss.conn.SetReadDeadline(time.Unix(1, 0)) // in the past: the read returns
		<-done
	}
}

// remoteIP is addr's host without the port ("" when it has none).
func remoteIP(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	return host
}
