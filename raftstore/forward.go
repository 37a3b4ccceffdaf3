package raftstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Forwarding: a follower sends a write (an encoded command) or a read-index
// request to the leader over the leader's raft port, on a connection that
// starts with connForward. Then, per request:
//
//	request:  type byte, 4-byte big-endian length, payload
//	response: 4-byte big-endian length, payload
//
// The response payload is: code byte (an errCode), uvarint index, uvarint
// skipped, then strings message, leader id, leader address. A connection
// carries requests one after another; followers keep a few idle ones per
// leader.
const (
	fwdApply     byte = 1 // payload: an encoded command; index: its log index
	fwdReadIndex byte = 2 // payload: none; index: the leader's read index
)

// maxFrame bounds a forwarded request or response.
const maxFrame = 64 << 20

// maxIdleForward is how many idle forwarding connections a node keeps per
// leader address.
const maxIdleForward = 4

type fwdResponse struct {
	code       errCode
	index      uint64
	skipped    int
	msg        string
	leaderID   string
	leaderAddr string
}

func (r *fwdResponse) encode() []byte {
	e := newEncoder(32 + len(r.msg))
	e.byte1(byte(r.code))
	e.uvarint(r.index)
	e.uvarint(uint64(r.skipped))
	e.str(r.msg)
	e.str(r.leaderID)
	e.str(r.leaderAddr)
	return e.bytesOut()
}

func decodeFwdResponse(p []byte) (*fwdResponse, error) {
	d := &decoder{b: p}
	r := &fwdResponse{code: errCode(d.byte1()), index: d.uvarint(), skipped: int(d.uvarint()), msg: d.str(), leaderID: d.str(), leaderAddr: d.str()}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("raftstore: bad forwarding response: %w", err)
	}
	return r, nil
}

// err turns the response back into the error the leader saw.
func (r *fwdResponse) err() error {
	switch r.code {
	case codeOK:
		return nil
	case codeNotLeader:
		return &NotLeaderError{LeaderID: r.leaderID, LeaderAddr: r.leaderAddr}
	}
	return &opError{code: r.code, msg: r.msg}
}

func writeFrame(w *bufio.Writer, typ byte, withType bool, p []byte) error {
	if withType {
		w.WriteByte(typ)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(p)))
	w.Write(n[:])
	w.Write(p)
	return w.Flush()
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, fmt.Errorf("raftstore: forwarding frame of %d bytes", size)
	}
	p := make([]byte, size)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	return p, nil
}

// serveForward answers forwarded requests on c until it is closed. It runs
// on the mux's goroutine for c.
func (s *Store) serveForward(c net.Conn) {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return
		}
		p, err := readFrame(r)
		if err != nil {
			return
		}
		resp := s.handleForward(typ, p)
		if err := writeFrame(w, 0, false, resp.encode()); err != nil {
			return
		}
	}
}

func (s *Store) handleForward(typ byte, p []byte) *fwdResponse {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ApplyTimeout)
	defer cancel()
	var (
		res result
		err error
	)
	switch typ {
	case fwdApply:
		if _, err = decodeCommand(p); err == nil {
			res, err = s.applyLocal(ctx, p)
		}
		if err == nil {
			s.forwardedIn.Add(1)
		}
	case fwdReadIndex:
		res.Index, err = s.readIndexLocal(ctx)
	default:
		err = failf(codeBadCommand, "forwarding request type %d", typ)
	}
	resp := &fwdResponse{index: res.Index, skipped: res.Skipped}
	if err != nil {
		resp.code, resp.msg = codeOf(err), err.Error()
		var nl *NotLeaderError
		if errors.As(err, &nl) {
			resp.leaderID, resp.leaderAddr = nl.LeaderID, nl.LeaderAddr
		}
	}
	return resp
}

// unsentError is a forwarding failure before anything was sent (the
// leader could not be dialed): trying again cannot write twice.
type unsentError struct{ err error }

func (e *unsentError) Error() string { return e.err.Error() }
func (e *unsentError) Unwrap() error { return e.err }

// retryable reports whether a write or read-index request certainly did
// not happen and may be tried again: no leader, the node asked was not the
// leader, or the leader could not be dialed.
func retryable(err error) bool {
	var u *unsentError
	return errors.Is(err, ErrNotLeader) || errors.As(err, &u)
}

// forwarder keeps idle forwarding connections per leader address.
type forwarder struct {
	mu     sync.Mutex
	idle   map[string][]net.Conn
	closed bool
}

func (f *forwarder) get(addr string) net.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.idle[addr]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	f.idle[addr] = cs[:len(cs)-1]
	return c
}

func (f *forwarder) put(addr string, c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.idle[addr]) >= maxIdleForward {
		c.Close()
		return
	}
	if f.idle == nil {
		f.idle = map[string][]net.Conn{}
	}
	f.idle[addr] = append(f.idle[addr], c)
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cs := range f.idle {
		for _, c := range cs {
			c.Close()
		}
	}
	f.idle = nil
}

// forward sends one request to the node at addr and returns its response.
// An error is a failure to get an answer (the request may or may not have
// been carried out); the leader's own verdict is in the response.
func (s *Store) forward(ctx context.Context, addr string, typ byte, payload []byte) (*fwdResponse, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(s.cfg.ApplyTimeout)
	}
	c := s.fwd.get(addr)
	if c == nil {
		var err error
		dctx, cancel := context.WithDeadline(ctx, deadline)
		c, err = s.mux.dial(dctx, addr, connForward)
		cancel()
		if err != nil {
			return nil, &unsentError{fmt.Errorf("raftstore: forward to leader at %s: %w", addr, err)}
		}
	}
	c.SetDeadline(deadline)
	w, r := bufio.NewWriter(c), bufio.NewReader(c)
	if err := writeFrame(w, typ, true, payload); err != nil {
		c.Close()
		return nil, fmt.Errorf("raftstore: forward to leader at %s: %w", addr, err)
	}
	p, err := readFrame(r)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("raftstore: forward to leader at %s: %w", addr, err)
	}
	if r.Buffered() > 0 {
		c.Close()
		return nil, fmt.Errorf("raftstore: forward to leader at %s: unexpected bytes after the response", addr)
	}
	resp, err := decodeFwdResponse(p)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	s.fwd.put(addr, c)
	return resp, nil
}
