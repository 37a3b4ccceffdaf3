package raftstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/braid-cdc/braid/spec"
)

// retryWait is how long a write or read waits before trying again when no
// leader is known or the leader just changed.
const retryWait = 25 * time.Millisecond

// apply proposes an encoded command: on the leader directly, on a follower
// by forwarding it to the leader (unless Config.NoForward). While no leader
// is known, the one asked says it is not the leader, or it cannot be
// dialed (so nothing was written), it tries again until ctx ends.
func (s *Store) apply(ctx context.Context, data []byte) (result, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	for {
		res, err := s.applyOnce(ctx, data)
		if !retryable(err) || s.cfg.NoForward {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-s.closed:
			return res, ErrClosed
		case <-time.After(retryWait):
		}
	}
}

func (s *Store) applyOnce(ctx context.Context, data []byte) (result, error) {
	if s.IsLeader() {
		res, err := s.applyLocal(ctx, data)
		if !errors.Is(err, ErrNotLeader) {
			return res, err
		}
	}
	nl := s.notLeader()
	if s.cfg.NoForward || nl.LeaderAddr == "" || nl.LeaderAddr == s.Addr() {
		return result{}, nl
	}
	resp, err := s.forward(ctx, nl.LeaderAddr, fwdApply, data)
	if err != nil {
		return result{}, err
	}
	s.forwardedOut.Add(1)
	return result{Index: resp.index, Skipped: resp.skipped}, resp.err()
}

// applyLocal appends data to the log on this node, the leader, and waits
// until it is applied here.
func (s *Store) applyLocal(ctx context.Context, data []byte) (result, error) {
	f := s.raft.Apply(data, timeLeft(ctx))
	if err := f.Error(); err != nil {
		return result{}, s.raftErr("write", err)
	}
	res, ok := f.Response().(result)
	if !ok {
		return result{}, fmt.Errorf("raftstore: write: unexpected response %T", f.Response())
	}
	return res, res.Err
}

// Consistent makes the local reads that follow it linearizable: when it
// returns nil, this node's state holds every write that completed (on any
// node) before Consistent was called. On the leader it costs one round of
// heartbeats (plus, first in each term, one log entry); on a follower also
// one forwarded request to the leader and the wait until this node has
// applied up to the leader's index. Fails with ErrNotLeader if no leader
// can be reached, or on a follower with Config.NoForward.
func (s *Store) Consistent(ctx context.Context) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	for {
		err := s.consistentOnce(ctx)
		if !retryable(err) || s.cfg.NoForward {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-s.closed:
			return ErrClosed
		case <-time.After(retryWait):
		}
	}
}

func (s *Store) consistentOnce(ctx context.Context) error {
	if s.IsLeader() {
		_, err := s.readIndexLocal(ctx)
		if !errors.Is(err, ErrNotLeader) {
			return err
		}
	}
	nl := s.notLeader()
	if s.cfg.NoForward || nl.LeaderAddr == "" || nl.LeaderAddr == s.Addr() {
		return nl
	}
	resp, err := s.forward(ctx, nl.LeaderAddr, fwdReadIndex, nil)
	if err != nil {
		return err
	}
	if err := resp.err(); err != nil {
		return err
	}
	return s.fsm.waitApplied(ctx, resp.index)
}

// readIndexLocal confirms that this node is the leader and returns an index
// such that a state that has applied it holds every completed write.
//
// The first time in a term, a barrier goes through the log: when it is
// applied, everything committed before (by earlier leaders too) is applied
// here. After that, every write this leader commits is applied here before
// its writer hears back, so VerifyLeader (a quorum still follows this node,
// no newer leader can have completed a write) suffices, and the index is
// the last command applied here.
func (s *Store) readIndexLocal(ctx context.Context) (uint64, error) {
	term := s.raft.CurrentTerm()
	if s.barrierTerm.Load() != term {
		if err := s.raft.Barrier(timeLeft(ctx)).Error(); err != nil {
			return 0, s.raftErr("read index", err)
		}
		s.barrierTerm.Store(term)
		return s.fsm.appliedIndex(), nil
	}
	if err := s.raft.VerifyLeader().Error(); err != nil {
		return 0, s.raftErr("read index", err)
	}
	return s.fsm.appliedIndex(), nil
}

// CatchUp waits until this node has applied the log up to index. A cursor
// read after CatchUp(epoch) is current for the holder of that epoch: see
// OwnedCursor.
func (s *Store) CatchUp(ctx context.Context, index uint64) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	return s.fsm.waitApplied(ctx, index)
}

// canonicalSpec applies defaults, validates, and renders the spec as the
// YAML that is stored; it checks that spec.Parse reads it back.
func canonicalSpec(ds spec.Spec) (spec.Spec, []byte, error) {
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		return ds, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	data, err := yaml.Marshal(&ds)
	if err != nil {
		return ds, nil, fmt.Errorf("%w: spec %q: %w", ErrInvalid, ds.Name, err)
	}
	if _, err := spec.Parse(data); err != nil {
		return ds, nil, fmt.Errorf("%w: spec %q does not read back: %w", ErrInvalid, ds.Name, err)
	}
	return ds, data, nil
}

// CreateDestination stores a new destination. The spec gets its defaults
// and is validated (spec.Spec.Validate) first; an invalid one wraps
// ErrInvalid and never reaches the log. A destination of that name that
// exists already gives ErrExists. The result carries the spec as stored
// and its Version.
func (s *Store) CreateDestination(ctx context.Context, spec spec.Spec) (Destination, error) {
	return s.putDestination(ctx, cmdCreateDest, spec)
}

// UpdateDestination replaces an existing destination's spec (ErrNotFound if
// there is none). Its assignment, cursors, schema histories and decisions
// stay.
func (s *Store) UpdateDestination(ctx context.Context, spec spec.Spec) (Destination, error) {
	return s.putDestination(ctx, cmdUpdateDest, spec)
}

func (s *Store) putDestination(ctx context.Context, t cmdType, spec spec.Spec) (Destination, error) {
	spec, data, err := canonicalSpec(spec)
	if err != nil {
		return Destination{}, err
	}
	res, err := s.apply(ctx, (&command{Type: t, Dest: spec.Name, Spec: data}).encode())
	if err != nil {
		return Destination{}, err
	}
	return Destination{Spec: spec, Version: res.Index}, nil
}

// DeleteDestination removes a destination with its assignment, cursors,
// schema histories and decisions (ErrNotFound if there is none). Its
// owner's next cursor write or decision fails with ErrNotFound.
func (s *Store) DeleteDestination(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty destination name", ErrInvalid)
	}
	_, err := s.apply(ctx, (&command{Type: cmdDeleteDest, Dest: name}).encode())
	return err
}

// Assign makes owner (a node id; "" for none) the destination's owner and
// returns the new epoch. Every assignment, even to the same owner, takes a
// new epoch: the Raft index of the assignment, so epochs only grow, across
// all destinations and across deleting and re-creating one. The previous
// owner's cursor writes are rejected from then on.
func (s *Store) Assign(ctx context.Context, dest, owner string) (uint64, error) {
	return s.assign(ctx, &command{Type: cmdAssign, Dest: dest, Owner: owner})
}

// AssignIf is Assign only if the destination's epoch is still epoch (0: it
// was never assigned); otherwise ErrStaleEpoch. A planner that decided from
// a read uses it so a concurrent change is not overwritten.
func (s *Store) AssignIf(ctx context.Context, dest, owner string, epoch uint64) (uint64, error) {
	return s.assign(ctx, &command{Type: cmdAssign, Dest: dest, Owner: owner, Conditional: true, IfEpoch: epoch})
}

func (s *Store) assign(ctx context.Context, c *command) (uint64, error) {
	if c.Dest == "" {
		return 0, fmt.Errorf("%w: empty destination name", ErrInvalid)
	}
	res, err := s.apply(ctx, c.encode())
	if err != nil {
		return 0, err
	}
	return res.Index, nil
}
