package raftstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
)

// fsm is the raft.FSM around state: it decodes log entries, takes the lock
// and wakes readers waiting for an index. Raft calls Apply, Snapshot and
// Restore from one goroutine; readers take the read lock.
type fsm struct {
	log *slog.Logger

	mu sync.RWMutex
	st *state
	// applied is closed and replaced after every Apply and Restore, waking
	// waitApplied.
	applied chan struct{}
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(log *slog.Logger) *fsm {
	return &fsm{log: log, st: newState(), applied: make(chan struct{})}
}

// Apply implements raft.FSM. It returns a result; a command this node
// cannot decode is answered with ErrBadCommand and changes nothing.
func (f *fsm) Apply(l *raft.Log) any {
	c, err := decodeCommand(l.Data)
	f.mu.Lock()
	var res result
	if err != nil {
		// Count the index as applied anyway: readers waiting for it must
		// not hang on an entry this node cannot read.
		if l.Index > f.st.Applied {
			f.st.Applied = l.Index
		}
		res = result{Index: l.Index, Err: err}
	} else {
		res = f.st.apply(l.Index, c)
	}
	close(f.applied)
	f.applied = make(chan struct{})
	f.mu.Unlock()
	if err != nil {
		f.log.Error("raft log entry not applied", "index", l.Index, "err", err)
	}
	return res
}

// Snapshot implements raft.FSM: it encodes the whole state under the read
// lock (the state is small: specs, one cursor per client, the schema
// histories they name), so Persist only writes bytes.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	data, err := f.st.marshal()
	f.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{data: data}, nil
}

// Restore implements raft.FSM, replacing the whole state.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("raftstore: read snapshot: %w", err)
	}
	st, err := unmarshalState(data)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st = st
	close(f.applied)
	f.applied = make(chan struct{})
	f.mu.Unlock()
	return nil
}

// appliedIndex is the index of the last command applied.
func (f *fsm) appliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Applied
}

// waitApplied returns once the command at index (or a later one) has been
// applied here.
func (f *fsm) waitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.RLock()
		done, ch := f.st.Applied >= index, f.applied
		f.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("raftstore: waiting for index %d to be applied: %w", index, ctx.Err())
		}
	}
}

// read runs fn on the state under the read lock. fn must not keep
// references into the state.
func (f *fsm) read(fn func(*state)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.st)
}

type fsmSnapshot struct{ data []byte }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		sink.Cancel()
		return fmt.Errorf("raftstore: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
