package canal

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"

	pbp "github.com/withlin/canal-go/protocol/packet"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/stream"
)

// relayHandshakeTimeout bounds dialing a destination's owner and the
// owner's HANDSHAKE and authentication ACK: a client waits this long at
// most before it hears that the owner cannot be reached.
const relayHandshakeTimeout = 10 * time.Second

// ownerKeepAlive detects an owner that vanished without closing the
// connection (its machine died or was cut off) within about 30s: the
// relay sets no read deadline on the owner's leg, since a GET may wait
// there for as long as the client asked.
var ownerKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// relayMarkField is the number of a ClientAuth field canal does not define,
// which a relaying node sets to 1 when it authenticates to the owner. The
// owner then never relays that connection on: if two nodes each believe
// the other owns a destination, a client hears "unknown destination" from
// the second instead of being relayed in a ring.
const relayMarkField protowire.Number = 20_001

// relayState is a session's side of a relay.
type relayState struct {
	// relayed: the client is a node relaying its own client (it set
	// relayMarkField); Config.Forward is never asked for it.
	relayed bool
	// frame is the body of the frame being served, as the client sent it.
	frame []byte
	// owner, once set, is an authenticated connection to the node that
	// serves dest at ownerAddr; serve then relays instead of reading
	// requests. pending is the frame to send it first (none when the
	// relay starts at authentication).
	owner           net.Conn
	ownerAddr, dest string
	pending         []byte
}

// canForward reports whether a failed lookup of a destination may be
// answered by relaying to its owner.
func (ss *session) canForward(lookupErr error) bool {
	return ss.s.cfg.Forward != nil && !ss.relay.relayed && errors.Is(lookupErr, stream.ErrUnknownDestination)
}

// forward handles a request for a destination this node does not serve:
// it asks Config.Forward for the owner, connects and authenticates to it
// and leaves the relay ready for serve, with the request as its first
// frame. Any failure is answered with canal's error ACK and leaves the
// connection as it was; forward returns an error only when that answer
// cannot be written.
func (ss *session) forward(ctx context.Context, t pbp.PacketType, dest, client string, lookupErr error) error {
	owner, addr, msg, ok := ss.connectOwner(ctx, dest, client, nil, lookupErr)
	if !ok {
		return ss.writeAck(CodeError, msg)
	}
	pending, err := AppendFrame(nil, ss.relay.frame)
	if err != nil { // cannot happen: the client's frame was framed
		owner.Close()
		return ss.fail(CodeError, err.Error())
	}
	ss.startRelay(owner, addr, dest, pending, "type", t.String())
	return nil
}

// forwardAuth handles a CLIENTAUTHENTICATION that names a destination this
// node does not serve (canal's server subscribes the client then): the
// owner is asked to authenticate the same destination and client id. It
// reports whether the relay is ready; if not, it answered the client
// with canal's error ACK, and the connection is closed as for an unknown
// destination at authentication.
func (ss *session) forwardAuth(ctx context.Context, a *pbp.ClientAuth, lookupErr error) bool {
	owner, addr, msg, ok := ss.connectOwner(ctx, a.Destination, a.ClientId, a, lookupErr)
	if !ok {
		ss.writeAck(CodeError, msg)
		return false
	}
	ss.startRelay(owner, addr, a.Destination, nil, "type", pbp.PacketType_CLIENTAUTHENTICATION.String())
	return true
}

// connectOwner asks Config.Forward where dest is served and returns an
// authenticated connection to that node; when it cannot, it logs why and
// returns the message for the client's error ACK. at is the client's
// ClientAuth when the relay starts at authentication: its destination,
// client id, filter and start timestamp go into the owner's.
func (ss *session) connectOwner(ctx context.Context, dest, client string, at *pbp.ClientAuth, lookupErr error) (owner net.Conn, addr, msg string, ok bool) {
	addr, err := ss.s.cfg.Forward(dest)
	switch {
	case err != nil:
		ss.log.Warn("request refused", "code", CodeError, "reason", err.Error(), "dest", dest, "client", client)
		return nil, "", err.Error(), false
	case addr == "": // no node serves it
		ss.log.Warn("request refused", "code", CodeError, "reason", lookupErr.Error(), "dest", dest, "client", client)
		return nil, "", lookupErr.Error(), false
	}
	user := ss.s.cfg.User
	if ss.s.cfg.DialOwner != nil {
		user = ss.user // the owner trusts a peer node's word for it
	}
	auth := &pbp.ClientAuth{Username: user,
		NetReadTimeoutPresent:  &pbp.ClientAuth_NetReadTimeout{NetReadTimeout: millis(ss.readTimeout)},
		NetWriteTimeoutPresent: &pbp.ClientAuth_NetWriteTimeout{NetWriteTimeout: millis(ss.writeTimeout)}}
	if at != nil {
		auth.Destination, auth.ClientId, auth.Filter, auth.StartTimestamp = at.Destination, at.ClientId, at.Filter, at.StartTimestamp
	}
	if dial := ss.s.cfg.DialOwner; dial != nil {
		owner, err = dialOwner(ctx, dial, addr, auth, "")
	} else {
		owner, err = dialOwner(ctx, dialCanalPort, addr, auth, ss.s.cfg.Password)
	}
	if err != nil {
		ss.log.Warn("cannot relay to the destination's owner", "dest", dest, "client", client, "owner", addr, "err", err)
		return nil, "", fmt.Sprintf("destination %s: cannot relay to its owner %s: %v; retry", dest, addr, err), false
	}
	return owner, addr, "", true
}

// startRelay records a ready relay; serve runs it next.
func (ss *session) startRelay(owner net.Conn, addr, dest string, pending []byte, attrs ...any) {
	ss.relay.owner, ss.relay.ownerAddr, ss.relay.dest, ss.relay.pending = owner, addr, dest, pending
	ss.log.Info("relaying the connection to the destination's owner",
		append([]any{"dest", dest, "owner", addr}, attrs...)...)
}

// millis is d in canal's net timeout unit, milliseconds.
func millis(d time.Duration) int32 {
	return int32(max(1, min(d.Milliseconds(), math.MaxInt32)))
}

// dialOwner connects to the owner at addr through dial, reads its
// HANDSHAKE and authenticates as auth, marked as relayed, within
// relayHandshakeTimeout. A password is scrambled with the owner's seed;
// none (an empty user, or the node port of Config.DialOwner, which has
// authenticated this node) sends no scramble.
func dialOwner(ctx context.Context, dial func(context.Context, string) (net.Conn, error), addr string, auth *pbp.ClientAuth, password string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, relayHandshakeTimeout)
	defer cancel()
	conn, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(relayHandshakeTimeout))
	if err := ownerHandshake(conn, auth, password); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// dialCanalPort dials an owner's canal port, with keepalives that notice
// an owner gone without a word.
func dialCanalPort(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{KeepAliveConfig: ownerKeepAlive}
	return d.DialContext(ctx, "tcp", addr)
}

func ownerHandshake(conn net.Conn, auth *pbp.ClientAuth, password string) error {
	p, err := readPacket(conn)
	if err != nil {
		return fmt.Errorf("reading its handshake: %w", err)
	}
	if p.Type != pbp.PacketType_HANDSHAKE {
		return fmt.Errorf("it sent packet type=%s, not HANDSHAKE", p.Type)
	}
	var hs pbp.Handshake
	if err := proto.Unmarshal(p.Body, &hs); err != nil {
		return fmt.Errorf("undecodable HANDSHAKE: %w", err)
	}
	if auth.Username != "" && password != "" {
		auth.Password = []byte(hex.EncodeToString(scramble(password, hs.Seeds)))
	}
	auth.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, relayMarkField, protowire.VarintType), 1))
	body, err := proto.Marshal(auth)
	if err != nil {
		return err
	}
	b, err := proto.Marshal(&pbp.Packet{VersionPresent: &pbp.Packet_Version{Version: 1}, Type: pbp.PacketType_CLIENTAUTHENTICATION, Body: body})
	if err != nil {
		return err
	}
	frame, _ := AppendFrame(nil, b)
	if _, err := conn.Write(frame); err != nil {
		return fmt.Errorf("sending authentication: %w", err)
	}
	if p, err = readPacket(conn); err != nil {
		return fmt.Errorf("reading its authentication ACK: %w", err)
	}
	var ack pbp.Ack
	if p.Type != pbp.PacketType_ACK {
		return fmt.Errorf("it answered authentication with packet type=%s, not ACK", p.Type)
	}
	if err := proto.Unmarshal(p.Body, &ack); err != nil {
		return fmt.Errorf("undecodable ACK: %w", err)
	}
	if c := ack.GetErrorCode(); c != 0 {
		return fmt.Errorf("it refused authentication (code %d): %s", c, ack.ErrorMessage)
	}
	return nil
}

// readPacket reads a small packet of the owner's handshake.
func readPacket(r io.Reader) (*pbp.Packet, error) {
	b, err := ReadFrame(r, MaxClientFrame)
	if err != nil {
		return nil, err
	}
	var p pbp.Packet
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("undecodable packet: %w", err)
	}
	return &p, nil
}

// isRelayed reports whether a ClientAuth carries relayMarkField = 1.
func isRelayed(a *pbp.ClientAuth) bool {
	b := a.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == relayMarkField && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b)
			return v == 1
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
	}
	return false
}

// relayEnd is how one leg of a relay ended: whose connection ("client" or
// "owner") failed or closed, and the error.
type relayEnd struct {
	by  string
	err error
}

// runRelay copies bytes both ways between the client and the owner until
// either side closes or fails, or ctx ends; then it closes the owner's
// connection and returns (the caller closes the client's). The pending
// request goes to the owner first.
//
// The client's frames are read whole (bounded by Config.MaxFrame) and
// passed on unchanged; the owner's bytes are streamed to the client as
// they come, so a huge MESSAGES is never held here. Neither leg has a read
// deadline: the owner's session enforces the client's idle timeout (the
// relay authenticated with this session's timeouts) and knows, as this
// node does not, when a GET is waiting; the owner closing the connection
// ends the relay. Every write has the session's write timeout.
func (ss *session) runRelay(ctx context.Context) {
	r := &ss.relay
	owner := r.owner
	defer owner.Close()
	stop := context.AfterFunc(ctx, func() { owner.Close() })
	defer stop()
	// The session serves nothing itself from now on.
	ss.out, ss.enc, r.frame = nil, encoder{}, nil
	ss.conn.SetReadDeadline(time.Time{})

	ends := make(chan relayEnd, 2)
	var wg sync.WaitGroup
	wg.Go(func() { ends <- ss.clientToOwner(owner) })
	wg.Go(func() { ends <- ss.ownerToClient(owner) })
	first := <-ends
	if tc, ok := owner.(*net.TCPConn); ok && first.by == "client" && errors.Is(first.err, io.EOF) {
		// The client shut its side: so does the relay, and the owner
		// answers what it was sent before it closes in turn (a GET may
		// be waiting there).
		tc.CloseWrite()
	} else {
		owner.Close()
		ss.conn.Close()
	}
	wg.Wait()

	log := ss.log.With("dest", r.dest, "owner", r.ownerAddr)
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		log.Debug("relay stopped with the server")
	case first.by == "client" && errors.Is(first.err, io.EOF):
		log.Debug("relay ended: the client closed the connection")
	case first.by == "client" && errors.As(first.err, &ne) && ne.Timeout():
		log.Warn("relay ended: writing to the client timed out", "timeout", ss.writeTimeout)
	case first.by == "client":
		log.Warn("relay ended: the client's connection failed", "err", first.err)
	case errors.Is(first.err, io.EOF):
		log.Info("relay ended: the owner closed the connection; closing the client's")
	default:
		log.Warn("relay ended: the owner's connection failed; closing the client's", "err", first.err)
	}
}

// clientToOwner sends the pending request and then every frame the client
// sends to the owner.
func (ss *session) clientToOwner(owner net.Conn) relayEnd {
	frame := ss.relay.pending
	ss.relay.pending = nil
	for {
		if len(frame) > 0 {
			owner.SetWriteDeadline(time.Now().Add(ss.writeTimeout))
			if _, err := owner.Write(frame); err != nil {
				return relayEnd{"owner", err}
			}
		}
		body, err := ReadFrame(ss.conn, ss.s.cfg.MaxFrame)
		if err != nil {
			return relayEnd{"client", err}
		}
		if cap(frame) > 1<<20 {
			frame = nil
		}
		if frame, err = AppendFrame(frame[:0], body); err != nil {
			return relayEnd{"client", err}
		}
	}
}

// ownerToClient streams what the owner sends to the client.
func (ss *session) ownerToClient(owner net.Conn) relayEnd {
	buf := make([]byte, 64<<10)
	for {
		n, err := owner.Read(buf)
		if n > 0 {
			ss.conn.SetWriteDeadline(time.Now().Add(ss.writeTimeout))
			if _, werr := ss.conn.Write(buf[:n]); werr != nil {
				return relayEnd{"client", werr}
			}
		}
		if err != nil {
			return relayEnd{"owner", err}
		}
	}
}
