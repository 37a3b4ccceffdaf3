package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/internal/netlimit"
	"github.com/braid-cdc/braid/internal/secret"
	"github.com/braid-cdc/braid/raftstore"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// Config configures a Node. Zero fields take the defaults given.
type Config struct {
	// Name names the node in gossip and Raft; unique in the cluster and
	// the same across restarts. Required.
	Name string
	// Cluster names the cluster; a node refuses nodes of another one.
	// Default: "braid".
	Cluster string
	// DataDir holds the node's Raft state. Required.
	DataDir string
	// Addr is the IP address the node listens on and is reached at.
	// Default: 127.0.0.1.
	Addr string
	// Ports: Raft (and forwarded writes), gossip (TCP and UDP), the HTTP
	// API, canal's protocol (0: not served). Raft, gossip and HTTP are
	// required.
	RaftPort, GossipPort, HTTPPort, CanalPort int
	// Join lists gossip addresses (host:port) of nodes to join.
	Join []string
	// BootstrapExpect, on a node without Raft state, forms a new cluster
	// once this many nodes (this one included) have found each other. 0:
	// wait to be added to an existing cluster.
	BootstrapExpect int
	// CanalUser and CanalPassword are the canal account (see
	// canal.Config); every node of a cluster needs the same.
	CanalUser, CanalPassword string
	// Lease is how long an owner may serve a destination after it last
	// confirmed, with a linearizable read, that it still owns it; a new
	// owner serves only a Lease after it took over, so two owners never
	// serve at once (see owner.go). Default: 1s.
	Lease time.Duration
	// CursorInterval is how often an owner writes its consumers' cursors
	// to Raft. Default: raftstore.DefaultCursorInterval.
	CursorInterval time.Duration
	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger

	// RaftAdvertise is the address (host:port) the other nodes reach this
	// node's Raft port at, when it is not Addr:RaftPort: a forwarded port,
	// or the proxy cluster/clustertest puts in front of each node so that
	// it can cut the node off. Default: Addr:RaftPort.
	RaftAdvertise string
	// GossipAdvertise is the address (ip:port) the other nodes reach
	// this node's gossip at, TCP and UDP, when it is not Addr:GossipPort:
	// a forwarded port, or a proxy that can cut the node off (the chaos
	// run's). Default: Addr:GossipPort.
	GossipAdvertise string
	// GossipTransport, if set, wraps the transport gossip runs on
	// (memberlist's UDP and TCP on GossipPort): cluster/clustertest wraps
	// it to cut a node off. The wrapper's Shutdown must shut the one it
	// wraps down. Default: none.
	GossipTransport func(memberlist.Transport) memberlist.Transport
	// MaxConnections caps the connections the HTTP port and the canal
	// port each serve at once; past it new ones are closed at once and
	// those served go on. Default: netlimit.DefaultMax (1024).
	MaxConnections int
	// TLS is the node's mutual-TLS identity on its Raft port (see
	// raftstore.Config.TLS), which carries Raft, forwarded writes, the
	// canal relay and the nodes' own HTTP calls: a peer without a
	// certificate from the cluster's CA is refused at the handshake and
	// so never becomes a voter. Default: nil, plain TCP (Insecure).
	TLS *tls.Config
	// GossipKey encrypts gossip (16, 24 or 32 bytes: AES-128/192/256); a
	// node without it is never heard and never becomes a member. Every
	// node needs the same. Default: nil, plain gossip (Insecure).
	GossipKey []byte
	// Users authenticates the HTTP API's and the canal port's clients and
	// says what each may do (see access.go). Default: nil,
	// every client may do everything (Insecure, unless every port is on
	// loopback).
	Users *auth.Users
	// SecretsKey is the key material source passwords are sealed with in
	// Raft (internal/secret), the same on every node. Default: GossipKey;
	// with neither, passwords are stored in clear (Insecure).
	SecretsKey []byte
	// SecretRefs is what the password references (password_file,
	// password_env) of the specs this node checks and runs may read here:
	// a spec comes from an admin over HTTP, and the node sends what a
	// reference names to the spec's own address. Default: the zero
	// spec.Refs, no reference at all.
	SecretRefs spec.Refs
	// HTTPTLS, if set, serves the HTTP API over TLS. Default: nil, HTTP.
	HTTPTLS *tls.Config
	// HTTPHosts are the names, beyond localhost, the machine's hostname
	// and Addr, that clients reach the HTTP API by (a DNS name, a
	// proxy's); a request naming another in its Host is refused, as DNS
	// rebinding would send it (see native.BrowserRules). "*" allows any.
	// Default: none.
	HTTPHosts []string
	// HTTPHostHint ends the refusal of a foreign Host: how to allow it
	// (native.BrowserRules.HostHint; the command names its flag).
	// Default: a sentence naming no flag.
	HTTPHostHint string
	// Insecure lets a node run without TLS and GossipKey in a cluster of
	// several nodes (BootstrapExpect > 1 or Join), and without Users on a
	// non-loopback Addr; it logs what is unprotected every minute.
	// Default: false, Start refuses.
	Insecure bool
	// ReapDeadAfter is how long a voter may be missing from gossip before
	// the leader removes it from Raft by itself, which it does only while
	// at least three voters stay (see voters.go). Default: 72h.
	ReapDeadAfter time.Duration
	// InsecureWarnEvery is how often an insecure node says so. Default:
	// a minute.
	InsecureWarnEvery time.Duration

	// GossipDeadTime is how long gossip still reaches a node it declared
	// dead; past it only rejoin (every RejoinInterval) brings one back
	// after a partition. Default: memberlist's, 30 s; tests shorten it.
	GossipDeadTime time.Duration
}

// DefaultLease is Config.Lease's default.
const DefaultLease = time.Second

func (c *Config) defaults() error {
	if c.Name == "" || c.DataDir == "" {
		return &SettingError{Fields: []string{"Name", "DataDir"}, Err: errors.New("cluster: a node needs a name and a data directory")}
	}
	if c.RaftPort <= 0 || c.GossipPort <= 0 || c.HTTPPort <= 0 {
		return &SettingError{Fields: []string{"RaftPort", "GossipPort", "HTTPPort"}, Err: errors.New("cluster: a node needs a raft port, a gossip port and an HTTP port")}
	}
	for field, a := range map[string]string{"RaftAdvertise": c.RaftAdvertise, "GossipAdvertise": c.GossipAdvertise} {
		if a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "0" {
			return &SettingError{Fields: []string{field}, Err: fmt.Errorf("cluster: advertised address %q: want ip:port, where the other nodes reach this one", a)}
		}
	}
	if c.Cluster == "" {
		c.Cluster = "braid"
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1"
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.CursorInterval <= 0 {
		c.CursorInterval = raftstore.DefaultCursorInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ReapDeadAfter <= 0 {
		c.ReapDeadAfter = DefaultReapDeadAfter
	}
	if c.InsecureWarnEvery <= 0 {
		c.InsecureWarnEvery = time.Minute
	}
	if gaps, fields := c.unprotected(); len(gaps) > 0 && !c.Insecure {
		return &SettingError{Fields: append(fields, "Insecure"), Err: fmt.Errorf("%w: %s; give them (braid certs makes the certificates and the gossip key, braid users hash the users file's hashes), or make it insecure to run unprotected",
			ErrUnprotected, strings.Join(gaps, "; "))}
	}
	if c.GossipKey != nil && !slices.Contains([]int{16, 24, 32}, len(c.GossipKey)) {
		return &SettingError{Fields: []string{"GossipKey"}, Err: fmt.Errorf("cluster: the gossip key has %d bytes, want 16, 24 or 32: make one with braid certs gossip-key", len(c.GossipKey))}
	}
	return nil
}

// ErrUnprotected: Start refused a node that would be open to anyone who
// reaches it (see Config.Insecure).
var ErrUnprotected = errors.New("cluster: refusing to start unprotected")

// unprotected says what of the node anyone who reaches it could abuse:
// the node port and gossip of a node meant for a cluster of several
// without TLS and a gossip key, and ports on a non-loopback address
// without users. fields are the Config fields that would close the gaps.
func (c *Config) unprotected() (gaps, fields []string) {
	if c.BootstrapExpect > 1 || len(c.Join) > 0 {
		if c.TLS == nil {
			gaps = append(gaps, "the raft port would take any connection (no TLS: CA, certificate and key)")
			fields = append(fields, "TLS")
		}
		if c.GossipKey == nil {
			gaps = append(gaps, "gossip would take any node as a member (no gossip key)")
			fields = append(fields, "GossipKey")
		}
	}
	if c.Users == nil {
		if ip := net.ParseIP(c.Addr); ip == nil || !ip.IsLoopback() {
			gaps = append(gaps, fmt.Sprintf("the HTTP and canal ports on %s would serve anyone (no users file)", c.Addr))
			fields = append(fields, "Users")
		}
	}
	return gaps, fields
}

// Node is one braid server: a member of the Raft group that stores the
// cluster's state, of the gossip that tells which nodes are alive, the
// owner of some destinations (which it runs and serves), and, while it is
// the Raft leader, the one that assigns destinations to nodes.
type Node struct {
	cfg   Config
	log   *slog.Logger
	store *raftstore.Store
	ms    *membership
	reg   *stream.Registry

	httpLn, canalLn net.Listener
	httpSrv         *http.Server
	browsers        *native.Browsers // what the HTTP port refuses to browsers
	sessions        sessions         // the status page's logins (session.go)
	canalSrv        *canal.Server    // nil without a canal port
	peerLn          *connListener    // the node port's HTTP connections (peer.go)
	peerSrv         *http.Server
	peerClient      *http.Client // calls to other nodes' node ports
	box             *secret.Box  // seals passwords for Raft; nil: none
	// life ends when Run returns: what the node port serves for peers
	// (relayed canal connections) ends with it.
	life    context.Context
	endLife context.CancelFunc

	// local is the native API over the destinations this node runs, one
	// for the HTTP port and the node port, so that a state fetched by a
	// peer shows the streams open here; page is the status page.
	local http.Handler
	page  *statusPage

	// takeovers counts the destinations this node took over; renewals its
	// ownership lease renewals (metrics).
	takeovers, renewals atomic.Uint64

	mu     sync.Mutex
	owned  map[string]*owner // destinations this node runs, by name
	memory memoryLimit

	// sinks are the running sinks of the destinations this node runs,
	// by name (*sinkrun.Set), for the native API's sink detail and verify.
	sinks sync.Map
}

// Start opens the node's Raft state, starts gossip and binds its ports;
// Run does the rest.
func Start(cfg Config) (*Node, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.Name), reg: stream.NewRegistry(), owned: map[string]*owner{}}
	n.memory.log = n.log
	n.life, n.endLife = context.WithCancel(context.Background())
	n.local = native.NewHandler(n.reg, n.log.With("part", "http"), native.WithSinks(n.sinkAdmin), native.WithOwner(requestUserName))
	n.page = n.newStatusPage()
	browsers, err := native.NewBrowsers(native.BrowserRules{Listen: cfg.Addr, Hosts: cfg.HTTPHosts, HostHint: cfg.HTTPHostHint, Logger: n.log.With("part", "http")})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.browsers = browsers
	key := cfg.SecretsKey
	if key == nil {
		key = cfg.GossipKey
	}
	if key != nil {
		box, err := secret.NewBox(key)
		if err != nil {
			return nil, fmt.Errorf("cluster: secrets key: %w", err)
		}
		n.box = box
	}
	hostPort := func(port int) string { return net.JoinHostPort(cfg.Addr, strconv.Itoa(port)) }
	if n.httpLn, err = net.Listen("tcp", hostPort(cfg.HTTPPort)); err != nil {
		return nil, &SettingError{Fields: []string{"HTTPPort"}, Err: fmt.Errorf("cluster: http port: %w: is another process using it? choose another", err)}
	}
	n.httpLn = netlimit.Listen(n.httpLn, cfg.MaxConnections, n.log.With("port", "http"))
	if cfg.HTTPTLS != nil {
		n.httpLn = tls.NewListener(n.httpLn, cfg.HTTPTLS)
	}
	if cfg.CanalPort > 0 {
		if n.canalLn, err = net.Listen("tcp", hostPort(cfg.CanalPort)); err != nil {
			n.httpLn.Close()
			return nil, &SettingError{Fields: []string{"CanalPort"}, Err: fmt.Errorf("cluster: canal port: %w: is another process (a canal server?) using it? choose another", err)}
		}
		n.canalLn = netlimit.Listen(n.canalLn, cfg.MaxConnections, n.log.With("port", "canal"))
		n.canalSrv = canal.NewServer(n.canalConfig())
	}
	n.peerClient = n.newPeerClient()
	n.store, err = raftstore.Open(raftstore.Config{NodeID: cfg.Name, DataDir: cfg.DataDir,
		BindAddr: hostPort(cfg.RaftPort), AdvertiseAddr: cfg.RaftAdvertise, Logger: cfg.Logger.With("part", "raft"), // raftstore names the node
		TLS: cfg.TLS, Protocols: n.peerProtocols()})
	if err != nil {
		n.closeListeners()
		return nil, err
	}
	self := Member{Name: cfg.Name, Cluster: cfg.Cluster, RaftAddr: n.store.Addr(), HTTPAddr: n.httpLn.Addr().String()}
	if n.canalLn != nil {
		self.CanalAddr = n.canalLn.Addr().String()
	}
	if n.ms, err = startMembership(self, cfg.Addr, cfg.GossipPort, cfg.GossipAdvertise, cfg.GossipKey, cfg.GossipTransport, cfg.GossipDeadTime, n.log.With("part", "gossip")); err != nil {
		n.store.Shutdown()
		n.closeListeners()
		return nil, err
	}
	if err := n.ms.join(cfg.Join); err != nil {
		if errors.Is(err, errWrongCluster) {
			n.ms.leave(time.Second)
			n.store.Shutdown()
			n.closeListeners()
			return nil, err
		}
		// The others may not be up yet: gossip keeps trying from their
		// side when they join us, and Run retries.
		n.log.Warn("join failed; retrying in the background", "err", err)
	}
	return n, nil
}

// Raft is the node's replicated store, for status pages and tests
// (cluster/clustertest reads leaders and assignments through it). It
// stays the node's: callers must not shut it down.
func (n *Node) Raft() *raftstore.Store { return n.store }

// Members returns the live nodes (alive or suspected) this node's gossip
// sees, by name, this one included.
func (n *Node) Members() []Member { return n.ms.members() }

// Join contacts the given gossip addresses (host:port) now, as
// Config.Join does at start; it succeeds when one answers. It mends a
// gossip partition, which memberlist mends by itself only while the
// sides still gossip to the nodes they declared dead (GossipToTheDeadTime,
// 30 s): after a longer cut each side stays out of the other's view.
func (n *Node) Join(addrs ...string) error { return n.ms.join(addrs) }

// Serving reports whether this node hands dest's events out now: nil, or
// why not (it does not run dest, it is still taking dest over, or its
// ownership lease has run out; see owner.go). It is the check the
// servers make before each batch.
func (n *Node) Serving(dest string) error {
	s, err := n.reg.Lookup(dest)
	if err != nil {
		return err
	}
	return s.CheckLive()
}

func (n *Node) closeListeners() {
	n.httpLn.Close()
	if n.canalLn != nil {
		n.canalLn.Close()
	}
}

// Run serves until ctx ends, then leaves the cluster gracefully (a node
// that is killed instead is detected by gossip and replaced).
func (n *Node) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)

	n.httpSrv = native.NewServer(n.browsers.Wrap(n.handler()))
	wg.Go(func() {
		if err := n.httpSrv.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("cluster: http: %w", err)
		}
	})
	n.peerSrv = native.NewServer(n.peerHandler())
	wg.Go(func() { n.peerSrv.Serve(n.peerLn) })
	if n.canalLn != nil {
		wg.Go(func() {
			if err := n.canalSrv.Serve(ctx, n.canalLn); err != nil {
				errs <- fmt.Errorf("cluster: canal: %w", err)
			}
		})
	}
	n.log.Info("node started", "http", n.httpScheme()+"://"+n.httpLn.Addr().String(), "raft", n.store.Addr(),
		"gossip", n.ms.self.Gossip, "canal", n.ms.self.CanalAddr, "cluster", n.cfg.Cluster)

	wg.Go(func() { n.joinLoop(ctx) })
	wg.Go(func() { n.bootstrapLoop(ctx) })
	wg.Go(func() { n.leaderLoop(ctx) })
	wg.Go(func() { n.ownerLoop(ctx) })
	wg.Go(func() { n.page.sample(ctx) })
	if gaps, _ := n.cfg.unprotected(); len(gaps) > 0 {
		wg.Go(func() { n.warnInsecure(ctx, gaps) })
	}
	if n.box == nil {
		n.log.Warn(clearSecrets + ": give every node the same secrets key (or gossip key); braid certs gossip-key makes one")
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	cancel()
	n.stopAll()
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	n.httpSrv.Shutdown(sctx)
	scancel()
	n.httpSrv.Close()
	n.endLife()
	n.peerSrv.Close()
	n.peerLn.Close()
	wg.Wait()
	n.ms.leave(time.Second)
	if serr := n.store.Shutdown(); err == nil && serr != nil {
		err = serr
	}
	return err
}

// clearSecrets is the warning of a node without a secrets key.
const clearSecrets = "PASSWORDS IN CLEAR: this node has no secrets key, so the source and sink passwords of the specs it stores are kept in Raft " +
	"(raft.db, its snapshots, every node's copy) in clear text"

// httpScheme is the scheme of the nodes' HTTP API: every node of a
// cluster serves it alike.
func (n *Node) httpScheme() string {
	if n.cfg.HTTPTLS != nil {
		return "https"
	}
	return "http"
}

// warnInsecure says, at start and every InsecureWarnEvery, what of an
// insecure node is open to anyone who reaches it.
func (n *Node) warnInsecure(ctx context.Context, gaps []string) {
	t := time.NewTicker(n.cfg.InsecureWarnEvery)
	defer t.Stop()
	for {
		n.log.Warn("running insecure: " + strings.Join(gaps, "; ") + "; see braid certs and braid users")
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// joinLoop retries joining the configured nodes until one answers, then
// keeps rejoining nodes that go missing (rejoinLoop).
func (n *Node) joinLoop(ctx context.Context) {
	for len(n.cfg.Join) > 0 && len(n.ms.members()) < 2 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if err := n.ms.join(n.cfg.Join); err != nil {
			n.log.Debug("join", "err", err)
		}
	}
	n.rejoinLoop(ctx)
}

// RejoinInterval is how often a node looks for nodes it once gossiped
// with that are missing now, and joins them again.
const RejoinInterval = 2 * time.Second

// rejoinLoop is serf's reconnect: memberlist stops gossiping to a node it
// declared dead after GossipDeadTime, so two sides of a partition longer
// than that never meet again by themselves (a node cut off for 35 s still
// saw only itself 20 s after the cut healed). Every RejoinInterval, a
// node joins again each node it once saw that is missing; a crashed one
// costs a refused dial.
func (n *Node) rejoinLoop(ctx context.Context) {
	t := time.NewTicker(RejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for name, addr := range n.ms.missing() {
			if err := n.ms.join([]string{addr}); err != nil {
				n.log.Debug("rejoin", "node", name, "addr", addr, "err", err)
			} else if _, ok := n.ms.member(name); ok {
				n.log.Info("gossip: rejoined a node missing since a partition or restart", "node", name)
			}
		}
	}
}

// bootstrapLoop forms a new cluster: on a node without Raft state and with
// BootstrapExpect set, once that many nodes know each other, each of them
// bootstraps Raft with the same list (the first BootstrapExpect by name),
// which hashicorp/raft accepts from all.
func (n *Node) bootstrapLoop(ctx context.Context) {
	if n.store.HadState() || n.cfg.BootstrapExpect <= 0 {
		return
	}
	for {
		members := n.ms.members()
		if len(members) >= n.cfg.BootstrapExpect {
			var servers []raftstore.Server
			for _, m := range members[:n.cfg.BootstrapExpect] {
				servers = append(servers, raftstore.Server{ID: m.Name, Addr: m.RaftAddr})
			}
			if err := n.store.Bootstrap(servers); err != nil {
				n.log.Info("bootstrap skipped", "err", err)
			} else {
				n.log.Info("bootstrapped a new cluster", "servers", len(servers))
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-n.ms.changes():
		case <-time.After(time.Second):
		}
	}
}
