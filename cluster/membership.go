package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Member is what a node tells the others about itself through gossip.
type Member struct {
	Name string `json:"name"`
	// Cluster names the cluster the node belongs to; nodes of another
	// cluster are refused.
	Cluster string `json:"cluster"`
	// RaftAddr, HTTPAddr and CanalAddr are where the node serves Raft,
	// the HTTP API and canal's protocol (host:port; CanalAddr "" when it
	// serves none).
	RaftAddr  string `json:"raft"`
	HTTPAddr  string `json:"http"`
	CanalAddr string `json:"canal,omitempty"`
	// Gossip is the node's memberlist address (filled in from the
	// member list, not sent).
	Gossip string `json:"-"`
}

// Gossip timing, tuned so that a crashed node is declared dead within
// about a second and a half on a LAN or loopback: it is probed every
// 250 ms, a probe fails after 150 ms, and a suspect is dead after
// SuspicionMult × 250 ms (more in larger clusters). memberlist's LAN
// defaults (1 s probes, 5 s suspicion) would take five seconds or more.
const (
	gossipProbeInterval = 250 * time.Millisecond
	gossipProbeTimeout  = 150 * time.Millisecond
	gossipSuspicionMult = 3
	gossipInterval      = 100 * time.Millisecond
	gossipPushPull      = 10 * time.Second
)

// membership is this node's view of the cluster's live nodes, kept by
// memberlist.
type membership struct {
	ml   *memberlist.Memberlist
	self Member
	log  *slog.Logger

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every join, leave or update
	refused error         // why a merge with another cluster was refused
	// live is the live nodes (alive or suspected) by name, copied in the
	// event callbacks: memberlist's Members returns pointers into its own
	// table, which it rewrites in place under its lock (hashicorp/memberlist
	// issue #306), and calls NotifyJoin, NotifyUpdate and NotifyLeave with
	// that lock held, the one moment a node's fields can be read safely.
	live map[string]Member
	// seen is the gossip address of every node ever live, by name: where
	// rejoin looks for one that went missing (see missing).
	seen map[string]string
}

// startMembership starts gossip on bindAddr:port, reached at advertise
// ("": bindAddr:port, Config.GossipAdvertise); wrap, if set, wraps
// its transport (Config.GossipTransport); deadTime, if set, is how long
// gossip still reaches a node declared dead (Config.GossipDeadTime).
// key, if set, encrypts and authenticates every gossip message
// (memberlist's keyring, AES-GCM): a node without it is never heard.
func startMembership(self Member, bindAddr string, port int, advertise string, key []byte, wrap func(memberlist.Transport) memberlist.Transport, deadTime time.Duration, logger *slog.Logger) (*membership, error) {
	self.Gossip = net.JoinHostPort(bindAddr, strconv.Itoa(port))
	advAddr, advPort := bindAddr, port
	if advertise != "" {
		host, p, err := net.SplitHostPort(advertise)
		if err != nil {
			return nil, fmt.Errorf("cluster: gossip advertise address %q: %w", advertise, err)
		}
		if advPort, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("cluster: gossip advertise address %q: %w", advertise, err)
		}
		advAddr = host
		// Others know this node by the address it advertises (check
		// compares a node of this name with it).
		self.Gossip = advertise
	}
	m := &membership{self: self, log: logger, changed: make(chan struct{}), live: map[string]Member{}, seen: map[string]string{}}
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = self.Name
	cfg.BindAddr, cfg.BindPort = bindAddr, port
	cfg.AdvertiseAddr, cfg.AdvertisePort = advAddr, advPort
	cfg.ProbeInterval, cfg.ProbeTimeout = gossipProbeInterval, gossipProbeTimeout
	cfg.SuspicionMult = gossipSuspicionMult
	cfg.GossipInterval = gossipInterval
	cfg.PushPullInterval = gossipPushPull
	// A restarted node comes back under its name at once, even on
	// another address.
	cfg.DeadNodeReclaimTime = time.Second
	if deadTime > 0 {
		cfg.GossipToTheDeadTime = deadTime
	}
	if key != nil {
		// GossipVerifyIncoming and Outgoing stay at their default, true:
		// plain messages are dropped, none is sent.
		cfg.SecretKey = key
	}
	cfg.Delegate = m
	cfg.Events = m
	cfg.Merge = m
	cfg.Alive = m
	cfg.Conflict = m
	cfg.Logger = log.New(&gossipLog{log: logger}, "", 0)
	if wrap != nil {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{bindAddr}, BindPort: port, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("cluster: gossip on %s:%d: %w", bindAddr, port, err)
		}
		cfg.Transport = wrap(nt)
	}
	ml, err := memberlist.Create(cfg)
	if err != nil {
		if cfg.Transport != nil {
			cfg.Transport.Shutdown()
		}
		return nil, fmt.Errorf("cluster: gossip on %s:%d: %w", bindAddr, port, err)
	}
	m.ml = ml
	return m, nil
}

// join contacts the given gossip addresses; it succeeds when one answers.
func (m *membership) join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	n, err := m.ml.Join(addrs)
	m.mu.Lock()
	refused := m.refused
	m.mu.Unlock()
	if refused != nil {
		return refused
	}
	if n > 0 {
		return nil
	}
	return fmt.Errorf("cluster: could not join through %s: %w", strings.Join(addrs, ","), err)
}

// members returns the live nodes (alive or merely suspected), by name,
// this one included.
func (m *membership) members() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.live))
	for _, mb := range m.live {
		out = append(out, mb)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// remember records n as live, with its metadata and address, or forgets it
// if it sent no braid metadata. memberlist calls it with its node lock
// held (see live).
func (m *membership) remember(n *memberlist.Node) {
	var mb Member
	err := json.Unmarshal(n.Meta, &mb)
	mb.Gossip = n.Address()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		delete(m.live, n.Name)
		return
	}
	m.live[n.Name] = mb
	if n.Name != m.self.Name {
		m.seen[n.Name] = mb.Gossip
	}
}

// missing returns the gossip addresses of the nodes once live that are not
// now, by name.
func (m *membership) missing() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]string{}
	for name, addr := range m.seen {
		if _, ok := m.live[name]; !ok {
			out[name] = addr
		}
	}
	return out
}

func (m *membership) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.live, name)
}

// member returns the live node named name.
func (m *membership) member(name string) (Member, bool) {
	for _, mb := range m.members() {
		if mb.Name == name {
			return mb, true
		}
	}
	return Member{}, false
}

// changes returns a channel closed at the next change of membership.
func (m *membership) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *membership) notify() {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.changed)
	m.changed = make(chan struct{})
}

// leave tells the others this node is going, then stops gossip.
func (m *membership) leave(timeout time.Duration) {
	if err := m.ml.Leave(timeout); err != nil {
		m.log.Debug("gossip leave", "err", err)
	}
	m.ml.Shutdown()
}

// NodeMeta implements memberlist.Delegate.
func (m *membership) NodeMeta(limit int) []byte {
	b, _ := json.Marshal(m.self)
	if len(b) > limit {
		m.log.Error("node metadata too long for gossip; addresses will be missing", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}

// NotifyMsg, GetBroadcasts, LocalState and MergeRemoteState implement
// memberlist.Delegate: braid gossips nothing but membership and metadata.
func (m *membership) NotifyMsg([]byte)                           {}
func (m *membership) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (m *membership) LocalState(join bool) []byte                { return nil }
func (m *membership) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin, NotifyLeave and NotifyUpdate implement
// memberlist.EventDelegate; memberlist calls them with its node lock held
// (see live), for this node too.
func (m *membership) NotifyJoin(n *memberlist.Node) {
	m.remember(n)
	m.log.Info("node joined", "member", n.Name, "gossip", n.Address())
	m.notify()
}

func (m *membership) NotifyLeave(n *memberlist.Node) {
	m.forget(n.Name)
	m.log.Warn("node left or failed", "member", n.Name, "gossip", n.Address())
	m.notify()
}

func (m *membership) NotifyUpdate(n *memberlist.Node) {
	m.remember(n)
	m.notify()
}

// errWrongCluster: a node of another cluster tried to join.
var errWrongCluster = errors.New("cluster: node of another cluster")

// check refuses a node that belongs to another cluster or reuses this
// node's name from another address.
func (m *membership) check(n *memberlist.Node) error {
	var mb Member
	if err := json.Unmarshal(n.Meta, &mb); err != nil {
		return fmt.Errorf("cluster: node %s (%s) sent no braid metadata: is it a braid server?", n.Name, n.Address())
	}
	if mb.Cluster != m.self.Cluster {
		return fmt.Errorf("%w: node %s (%s) belongs to cluster %q, this one is %q: check the addresses it joins and the cluster's name",
			errWrongCluster, n.Name, n.Address(), mb.Cluster, m.self.Cluster)
	}
	if n.Name == m.self.Name && n.Address() != m.self.Gossip {
		return fmt.Errorf("cluster: node %s (%s) has this node's name (%s at %s): every node needs a name of its own",
			n.Name, n.Address(), m.self.Name, m.self.Gossip)
	}
	return nil
}

// NotifyMerge implements memberlist.MergeDelegate: a join into (or from)
// another cluster is cancelled, and the joining side gets the error.
func (m *membership) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if err := m.check(n); err != nil {
			m.log.Error("refused to merge with another node's member list", "err", err)
			if errors.Is(err, errWrongCluster) {
				m.mu.Lock()
				m.refused = err
				m.mu.Unlock()
			}
			return err
		}
	}
	return nil
}

// NotifyAlive implements memberlist.AliveDelegate: nodes of another
// cluster never enter the member list.
func (m *membership) NotifyAlive(n *memberlist.Node) error {
	if err := m.check(n); err != nil {
		m.log.Warn("ignoring node", "err", err)
		return err
	}
	return nil
}

// NotifyConflict implements memberlist.ConflictDelegate.
func (m *membership) NotifyConflict(existing, other *memberlist.Node) {
	m.log.Error("two nodes claim one name: every node needs a name of its own",
		"name", existing.Name, "known at", existing.Address(), "other at", other.Address())
}

// gossipLog routes memberlist's log lines ("[DEBUG] memberlist: ...") to
// slog at their level.
type gossipLog struct{ log *slog.Logger }

var _ io.Writer = (*gossipLog)(nil)

func (g *gossipLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelDebug
	switch {
	case strings.HasPrefix(line, "[ERR]"):
		level = slog.LevelError
	case strings.HasPrefix(line, "[WARN]"):
		level = slog.LevelWarn
	case strings.HasPrefix(line, "[INFO]"):
		level = slog.LevelInfo
	}
	if i := strings.Index(line, "memberlist: "); i >= 0 {
		line = line[i+len("memberlist: "):]
	}
	// memberlist's own info lines (probes, suspicions) are noise at info.
	if level == slog.LevelInfo {
		level = slog.LevelDebug
	}
	g.log.Log(context.Background(), level, "gossip: "+line)
	return len(p), nil
}
