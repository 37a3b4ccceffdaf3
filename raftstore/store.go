package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Store is one node of the replicated store. It is safe for concurrent use.
// Open starts it; Shutdown stops it and every goroutine it started.
type Store struct {
	cfg  Config
	log  *slog.Logger
	raft *raft.Raft
	fsm  *fsm
	bolt *raftboltdb.BoltStore
	mux  *mux
	tr   *raft.NetworkTransport
	fwd  forwarder

	hadState bool
	// barrierTerm is the last term in which a barrier (a log entry) of this
	// node as leader was applied: from then on a read index needs only
	// VerifyLeader.
	barrierTerm atomic.Uint64
	schemas     schemaCache

	forwardedIn  atomic.Uint64 // writes forwarded to this node and applied
	forwardedOut atomic.Uint64 // writes this node forwarded

	shutdownOnce sync.Once
	shutdownErr  error
	closed       chan struct{}
}

// Server is a member of the Raft configuration.
type Server struct {
	ID       string
	Addr     string // Raft address, host:port
	NonVoter bool
}

// Open opens (or creates) the node's data directory, binds its port and
// starts Raft. A node with no state waits to be bootstrapped (Bootstrap)
// or added by the leader (AddVoter); a node with state rejoins its cluster.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Store{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), closed: make(chan struct{})}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("raftstore: data dir: %w", err)
	}
	var err error
	s.bolt, err = raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.DataDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", filepath.Join(cfg.DataDir, "raft.db"), err)
	}
	hl := newHCLogger(s.log, "raft", func() bool {
		select {
		case <-s.closed:
			return true
		default:
			return false
		}
	})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, hl.Named("snapshot"))
	if err != nil {
		s.bolt.Close()
		return nil, fmt.Errorf("raftstore: snapshot store: %w", err)
	}
	logs, err := raft.NewLogCache(512, s.bolt)
	if err != nil {
		s.bolt.Close()
		return nil, err
	}
	if s.hadState, err = raft.HasExistingState(logs, s.bolt, snaps); err != nil {
		s.bolt.Close()
		return nil, fmt.Errorf("raftstore: read state: %w", err)
	}
	if s.mux, err = listenMux(cfg.BindAddr, cfg.AdvertiseAddr, cfg.TLS, s.log); err != nil {
		s.bolt.Close()
		return nil, err
	}
	s.tr = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  s.mux,
		MaxPool: 3,
		Timeout: 5 * time.Second,
		Logger:  hl.Named("net"),
	})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = hl
	s.fsm = newFSM(s.log)
	s.raft, err = raft.NewRaft(rc, s.fsm, logs, s.bolt, snaps, s.tr)
	if err != nil {
		s.tr.Close()
		s.mux.wait()
		s.bolt.Close()
		return nil, fmt.Errorf("raftstore: start raft: %w", err)
	}
	serve := map[byte]func(net.Conn){connForward: s.serveForward}
	for b, f := range cfg.Protocols {
		serve[b] = f
	}
	s.mux.start(serve)
	s.log.Info("raft store open", "addr", s.Addr(), "data_dir", cfg.DataDir, "had_state", s.hadState)
	return s, nil
}

// DialPeer connects to the node port of the node at addr (a Raft address)
// for proto, one of Config.Protocols' bytes, with the node's TLS identity
// when Config.TLS is set. ctx bounds the dial and the handshake. The
// connection is closed when the store shuts down, if not before.
func (s *Store) DialPeer(ctx context.Context, addr string, proto byte) (net.Conn, error) {
	if proto == connRaft || proto == connForward {
		return nil, fmt.Errorf("raftstore: protocol byte %q is raftstore's own", proto)
	}
	return s.mux.dial(ctx, addr, proto)
}

// HadState reports whether the data directory held Raft state when the
// store was opened: such a node must not be bootstrapped again.
func (s *Store) HadState() bool { return s.hadState }

// ID is this node's id.
func (s *Store) ID() string { return s.cfg.NodeID }

// Addr is this node's advertised Raft address.
func (s *Store) Addr() string { return s.mux.Addr().String() }

// Bootstrap makes a new cluster of servers (this node included; none means
// this node alone). Call it on one node, or on every node with the same
// list. A node that has state already returns an error wrapping
// raft.ErrCantBootstrap.
func (s *Store) Bootstrap(servers []Server) error {
	if len(servers) == 0 {
		servers = []Server{{ID: s.ID(), Addr: s.Addr()}}
	}
	var conf raft.Configuration
	for _, sv := range servers {
		suffrage := raft.Voter
		if sv.NonVoter {
			suffrage = raft.Nonvoter
		}
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(sv.ID), Address: raft.ServerAddress(sv.Addr), Suffrage: suffrage})
	}
	if err := s.raft.BootstrapCluster(conf).Error(); err != nil {
		return fmt.Errorf("raftstore: bootstrap: %w", err)
	}
	return nil
}

// AddVoter adds a voting member, or updates its address. Only the leader
// can; a follower returns a *NotLeaderError.
func (s *Store) AddVoter(ctx context.Context, id, addr string) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	err := s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeLeft(ctx)).Error()
	return s.raftErr("add voter "+id, err)
}

// RemoveServer removes a member (a dead node, or one leaving). Only the
// leader can; a follower returns a *NotLeaderError. A leader that removes
// itself steps down.
func (s *Store) RemoveServer(ctx context.Context, id string) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	err := s.raft.RemoveServer(raft.ServerID(id), 0, timeLeft(ctx)).Error()
	return s.raftErr("remove server "+id, err)
}

// Servers returns the latest Raft configuration (committed or not).
func (s *Store) Servers() ([]Server, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, s.raftErr("configuration", err)
	}
	var out []Server
	for _, sv := range f.Configuration().Servers {
		out = append(out, Server{ID: string(sv.ID), Addr: string(sv.Address), NonVoter: sv.Suffrage != raft.Voter})
	}
	return out, nil
}

// Leader returns the leader this node knows of; empty during an election.
func (s *Store) Leader() (id, addr string) {
	a, i := s.raft.LeaderWithID()
	return string(i), string(a)
}

// IsLeader reports whether this node is the leader now.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// LeaderCh delivers true when this node becomes leader and false when it
// stops being leader. It has one reader: if that reader is slow, only the
// latest change is kept (hashicorp/raft's LeaderCh).
func (s *Store) LeaderCh() <-chan bool { return s.raft.LeaderCh() }

// WaitLeader waits until a leader is known and returns it.
func (s *Store) WaitLeader(ctx context.Context) (id, addr string, err error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, addr := s.Leader(); addr != "" {
			return id, addr, nil
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("raftstore: no leader: %w", ctx.Err())
		case <-s.closed:
			return "", "", ErrClosed
		case <-t.C:
		}
	}
}

// Snapshot takes a snapshot now and compacts the log behind it (leaving
// TrailingLogs entries). Raft also does this by itself (SnapshotInterval,
// SnapshotThreshold).
func (s *Store) Snapshot() error {
	err := s.raft.Snapshot().Error()
	if err != nil {
		return fmt.Errorf("raftstore: snapshot: %w", err)
	}
	return nil
}

// Stats is a snapshot of the node's Raft state and the store's size.
type Stats struct {
	NodeID     string
	Addr       string
	State      string // Follower, Candidate, Leader, Shutdown
	Term       uint64
	LeaderID   string
	LeaderAddr string
	// LastIndex is the last index in the log; CommitIndex the last known
	// committed; AppliedIndex the last command applied to the state here.
	LastIndex, CommitIndex, AppliedIndex uint64
	// FirstIndex is the oldest index still in the log (0 if empty): it
	// moves up as snapshots compact the log.
	FirstIndex uint64
	// LastSnapshotIndex is the index of the newest snapshot (0 if none).
	LastSnapshotIndex uint64
	Servers           []Server
	Destinations      int
	Cursors           int
	SchemaHistories   int
	// ForwardedIn counts writes followers forwarded here that were
	// applied; ForwardedOut writes this node forwarded to a leader.
	ForwardedIn, ForwardedOut uint64
}

// Stats returns the node's current numbers.
func (s *Store) Stats() Stats {
	st := Stats{
		NodeID: s.ID(), Addr: s.Addr(), State: s.raft.State().String(), Term: s.raft.CurrentTerm(),
		LastIndex: s.raft.LastIndex(), CommitIndex: s.raft.CommitIndex(), AppliedIndex: s.fsm.appliedIndex(),
		ForwardedIn: s.forwardedIn.Load(), ForwardedOut: s.forwardedOut.Load(),
	}
	st.LeaderID, st.LeaderAddr = s.Leader()
	st.FirstIndex, _ = s.bolt.FirstIndex()
	st.LastSnapshotIndex, _ = strconv.ParseUint(s.raft.Stats()["last_snapshot_index"], 10, 64)
	st.Servers, _ = s.Servers()
	s.fsm.read(func(t *state) {
		st.Destinations = len(t.Dests)
		for _, d := range t.Dests {
			st.Cursors += len(d.Cursors)
			for _, m := range d.Schemas {
				st.SchemaHistories += len(m)
			}
		}
	})
	return st
}

// Shutdown stops Raft, closes the port and every connection, and closes the
// data files. The node's data directory can then be opened again. Safe to
// call more than once.
func (s *Store) Shutdown() error {
	s.shutdownOnce.Do(func() {
		close(s.closed)
		err := s.raft.Shutdown().Error()
		s.fwd.close()
		s.tr.Close() // closes the mux and its connections
		s.mux.wait()
		s.shutdownErr = errors.Join(err, s.bolt.Close())
		s.log.Info("raft store shut down")
	})
	return s.shutdownErr
}

// opContext applies ApplyTimeout to a context without a deadline.
func (s *Store) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.cfg.ApplyTimeout)
}

func timeLeft(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	if left := time.Until(d); left > 0 {
		return left
	}
	return time.Millisecond
}

// notLeader builds the error for this follower.
func (s *Store) notLeader() *NotLeaderError {
	id, addr := s.Leader()
	return &NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// raftErr translates hashicorp/raft's errors into the store's.
func (s *Store) raftErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return s.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("raftstore: %s: %w", op, ErrClosed)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("raftstore: %s: leadership lost before the outcome was known (it may still commit): %w", op, err)
	}
	return fmt.Errorf("raftstore: %s: %w", op, err)
}
