package raftstore

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by a write wrap one of these when they
// have that cause, whether the write ran on this node or was forwarded to
// the leader: test with errors.Is.
var (
	// ErrNotLeader: the operation needs the leader and this node is not it
	// (and forwarding was off or failed). The error is a *NotLeaderError
	// naming the leader this node knows of.
	ErrNotLeader = errors.New("raftstore: not the leader")
	// ErrNotFound: the destination (or cursor) does not exist.
	ErrNotFound = errors.New("raftstore: not found")
	// ErrExists: a destination of that name exists already.
	ErrExists = errors.New("raftstore: destination exists")
	// ErrStaleEpoch: a cursor write, a decision or a conditional assignment
	// carried an epoch that is not the destination's current one. The
	// writer has been deposed and must stop.
	ErrStaleEpoch = errors.New("raftstore: stale epoch")
	// ErrUnknownSchema: a cursor named a schema history the store does not
	// hold. SaveCursors retries once with every schema attached, so callers
	// only see it if the retry fails too.
	ErrUnknownSchema = errors.New("raftstore: unknown schema history")
	// ErrBadCommand: a command (or snapshot) has an unknown version or type or
	// is malformed. Raised by a node running an older braid than the writer.
	ErrBadCommand = errors.New("raftstore: bad command")
	// ErrClosed: the store was shut down.
	ErrClosed = errors.New("raftstore: store closed")
	// ErrInvalid: the request was refused before it reached the log (an
	// invalid spec, an empty name).
	ErrInvalid = errors.New("raftstore: invalid request")
)

// NotLeaderError is returned by an operation that must run on the leader
// when this node is a follower and did not forward it. LeaderID and
// LeaderAddr are empty when no leader is known (an election is running).
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string // the leader's Raft address, host:port
}

func (e *NotLeaderError) Error() string {
	if e.LeaderAddr == "" {
		return "raftstore: not the leader (no leader known)"
	}
	return fmt.Sprintf("raftstore: not the leader (leader %s at %s)", e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// errCode is how an FSM outcome travels in a forwarding response.
type errCode byte

const (
	codeOK errCode = iota
	codeNotFound
	codeExists
	codeStaleEpoch
	codeUnknownSchema
	codeBadCommand
	codeNotLeader
	codeInvalid
	codeOther
)

var codeSentinel = map[errCode]error{
	codeNotFound:      ErrNotFound,
	codeExists:        ErrExists,
	codeStaleEpoch:    ErrStaleEpoch,
	codeUnknownSchema: ErrUnknownSchema,
	codeBadCommand:    ErrBadCommand,
	codeNotLeader:     ErrNotLeader,
	codeInvalid:       ErrInvalid,
}

// opError is an error decided by the state machine (or the leader): its
// message plus the sentinel it matches. It is the same value whether the
// write ran here or on the leader.
type opError struct {
	code errCode
	msg  string
}

func (e *opError) Error() string { return e.msg }

// Is matches the sentinel of the error's code.
func (e *opError) Is(target error) bool {
	s, ok := codeSentinel[e.code]
	return ok && s == target
}

// failf builds an opError whose message starts with the sentinel's text.
func failf(code errCode, format string, a ...any) *opError {
	prefix := "raftstore"
	if s, ok := codeSentinel[code]; ok {
		prefix = s.Error()
	}
	return &opError{code: code, msg: prefix + ": " + fmt.Sprintf(format, a...)}
}

// codeOf finds the code of err for a forwarding response.
func codeOf(err error) errCode {
	var oe *opError
	if errors.As(err, &oe) {
		return oe.code
	}
	for c, s := range codeSentinel {
		if errors.Is(err, s) {
			return c
		}
	}
	return codeOther
}
