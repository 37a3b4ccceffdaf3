package raftstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Config configures a Store. The zero value of every field but NodeID,
// DataDir and BindAddr means its default. The timeouts' defaults suit a
// cluster on one LAN or one machine; they are raft's defaults halved, so a
// leader that dies is replaced in about one to two seconds.
type Config struct {
	// NodeID names this node in the Raft configuration; it must be unique
	// in the cluster and stay the same across restarts. Required.
	NodeID string
	// DataDir holds raft.db (the bolt log and stable store) and snapshots/.
	// Required; created if missing. A node restarted on the same DataDir
	// resumes where it stopped.
	DataDir string
	// BindAddr is the TCP host:port the node listens on for Raft and for
	// writes forwarded by followers ("127.0.0.1:7001"). Port 0 picks a free
	// port (Addr tells which). Required.
	BindAddr string
	// AdvertiseAddr is the address other nodes reach this one at. Default:
	// the bound address (which must then not be 0.0.0.0 or ::).
	AdvertiseAddr string
	// Logger receives the store's and hashicorp/raft's logs (raft's at
	// their own levels: Trace → Debug-4, Debug, Info, Warn, Error). Default:
	// discard.
	Logger *slog.Logger

	// HeartbeatTimeout is how long a follower waits without hearing from
	// the leader before it calls an election (randomised between 1× and
	// 2×). Default: 500ms.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes (randomised
	// likewise). Not below HeartbeatTimeout. Default: 500ms.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without
	// hearing from a quorum. Not above HeartbeatTimeout. Default: 250ms.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is the longest an idle leader waits before telling
	// followers the commit index, which bounds how far a follower's local
	// reads lag behind the leader's when there is no other traffic.
	// Default: 20ms.
	CommitTimeout time.Duration
	// ApplyTimeout bounds a write (queueing, commit, forwarding to the
	// leader) and a linearizable read when the caller's context has no
	// deadline. Default: 5s.
	ApplyTimeout time.Duration

	// SnapshotInterval is how often raft checks whether to snapshot (with
	// jitter). Default: 30s.
	SnapshotInterval time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// make the check take one. With cursors flushed every 200ms, 1,000
	// destinations write 5,000 entries a second. Default: 4096.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries a snapshot leaves in the log, so a
	// follower slightly behind catches up from the log and not from a whole
	// snapshot. Default: 2048.
	TrailingLogs uint64
	// SnapshotRetain is how many snapshots are kept on disk. Default: 2.
	SnapshotRetain int

	// TLS, if set, is the node's mutual-TLS identity (internal/pki's
	// LoadNodeTLS): every connection to the node port, accepted or dialed,
	// is TLS with a certificate from the cluster's CA on both sides; a
	// dialer without one is refused at the handshake, before it can speak
	// Raft or forward a write. Default: nil, plain TCP (trust whoever can
	// reach the port).
	TLS *tls.Config
	// Protocols are further protocols served on the node port, by the
	// first byte a dialer sends (DialPeer); 'R' and 'F' are raftstore's
	// own. Each function serves its connection until it ends, and must
	// close it. Default: none.
	Protocols map[byte]func(net.Conn)

	// NoForward makes a follower refuse writes with a *NotLeaderError
	// instead of forwarding them to the leader. Default: false (forward).
	NoForward bool
}

// Defaults of Config.
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	DefaultCommitTimeout      = 20 * time.Millisecond
	DefaultApplyTimeout       = 5 * time.Second
	DefaultSnapshotInterval   = 30 * time.Second
	DefaultSnapshotThreshold  = 4096
	DefaultTrailingLogs       = 2048
	DefaultSnapshotRetain     = 2
)

// withDefaults returns a copy with every unset field at its default.
func (c Config) withDefaults() Config {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	set(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	set(&c.ElectionTimeout, DefaultElectionTimeout)
	set(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	set(&c.CommitTimeout, DefaultCommitTimeout)
	set(&c.ApplyTimeout, DefaultApplyTimeout)
	set(&c.SnapshotInterval, DefaultSnapshotInterval)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = DefaultSnapshotRetain
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem at once, with defaults applied to unset
// fields. It does not modify c.
func (c *Config) Validate() error {
	d := c.withDefaults()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("raftstore: config: "+format, a...)) }
	if d.NodeID == "" {
		bad("NodeID is empty")
	}
	if d.DataDir == "" {
		bad("DataDir is empty")
	}
	if _, _, err := net.SplitHostPort(d.BindAddr); err != nil {
		bad("BindAddr %q: want host:port", d.BindAddr)
	}
	if d.AdvertiseAddr != "" {
		if host, port, err := net.SplitHostPort(d.AdvertiseAddr); err != nil || port == "0" {
			bad("AdvertiseAddr %q: want host:port with a port", d.AdvertiseAddr)
		} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			bad("AdvertiseAddr %q: not an address others can reach", d.AdvertiseAddr)
		}
	}
	for _, t := range []struct {
		name string
		v    time.Duration
	}{
		{"HeartbeatTimeout", d.HeartbeatTimeout}, {"ElectionTimeout", d.ElectionTimeout},
		{"LeaderLeaseTimeout", d.LeaderLeaseTimeout}, {"SnapshotInterval", d.SnapshotInterval},
	} {
		if t.v < 5*time.Millisecond {
			bad("%s %v: want at least 5ms", t.name, t.v)
		}
	}
	if d.CommitTimeout < time.Millisecond {
		bad("CommitTimeout %v: want at least 1ms", d.CommitTimeout)
	}
	if d.ApplyTimeout < 0 {
		bad("ApplyTimeout %v: must not be negative", d.ApplyTimeout)
	}
	for b := range d.Protocols {
		if b == connRaft || b == connForward {
			bad("Protocols: byte %q is raftstore's own", b)
		}
	}
	if d.LeaderLeaseTimeout > d.HeartbeatTimeout {
		bad("LeaderLeaseTimeout %v is above HeartbeatTimeout %v", d.LeaderLeaseTimeout, d.HeartbeatTimeout)
	}
	if d.ElectionTimeout < d.HeartbeatTimeout {
		bad("ElectionTimeout %v is below HeartbeatTimeout %v", d.ElectionTimeout, d.HeartbeatTimeout)
	}
	if d.SnapshotRetain < 1 {
		bad("SnapshotRetain %d: want at least 1", d.SnapshotRetain)
	}
	return errors.Join(errs...)
}
