package canal

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/braid-cdc/braid/internal/throttle"
	"github.com/braid-cdc/braid/stream"
)

// Config configures a Server. Zero fields take the defaults given.
type Config struct {
	// Registry holds the destinations served; required.
	Registry *stream.Registry
	// User and Password are the one account clients authenticate as, with
	// canal's scramble. An empty User accepts every client (and the server
	// logs a warning when it starts). A relaying server authenticates to
	// the owner with them too: the nodes of a cluster share the account.
	// Default: "".
	User, Password string
	// Login, if set, authenticates clients instead of User and Password:
	// it checks a CLIENTAUTHENTICATION's user name and hex scramble of
	// the password with the connection's seed, for a client at remote
	// (its IP address, so that failures can be bounded per address), and
	// returns which destinations that user may read, or an error (the
	// client is refused with canal's "auth failed for user:NAME").
	// Default: nil.
	Login func(remote, user string, hexScramble, seed []byte) (mayRead func(dest string) bool, err error)
	// PeerUser returns what a user a peer node authenticated may read, on
	// connections served with ServePeer (a relay from another node of the
	// cluster: its node port has authenticated that node with TLS, and the
	// node its client). False refuses the connection. Default: nil, every
	// relayed client reads everything.
	PeerUser func(user string) (mayRead func(dest string) bool, ok bool)
	// DialOwner, if set, connects a relay to the owner Forward named, on
	// the owner's node port (ServePeer serves the other end): the relay
	// then sends its client's user name, which the owner trusts, and no
	// scramble. Default: nil, the relay dials the owner's canal port and
	// authenticates with User and Password.
	DialOwner func(ctx context.Context, addr string) (net.Conn, error)
	// Forward, if set, is asked for the canal address (host:port) of the
	// node that serves a destination missing from Registry; the client's
	// connection is then relayed to that node (see "Relaying" in the
	// package documentation). An error (e.g. "destination shop has no
	// owner right now: retry"), an empty address or an owner that cannot
	// be reached is answered with canal's error ACK (CodeError) and the
	// connection stays usable, as for an unknown destination. It runs on
	// the connection's goroutine, so it may block, briefly. Default: nil,
	// a destination missing from Registry is unknown.
	Forward func(dest string) (addr string, err error)
	// IdleTimeout closes a connection that sends nothing for this long,
	// unless the client set its own net_read_timeout (milliseconds, as
	// canal's clients send it) when it authenticated. It also bounds the
	// time a client has to authenticate and each write. Default: 30s.
	IdleTimeout time.Duration
	// MaxFrame bounds a frame a client may send, in bytes; a longer one
	// closes the connection. Default: MaxClientFrame (16 MiB).
	MaxFrame int
	// Logger receives connection errors and refusals. Default: discard.
	Logger *slog.Logger
}

// Server serves canal's client protocol on listeners.
type Server struct {
	cfg Config
	log *slog.Logger

	// failed holds, per consumer ("dest/client"), when and why its last
	// session failed, for the line saying it came back.
	mu     sync.Mutex
	failed map[string]failure

	// authLog throttles the lines of failed logins: a client may fail
	// as often as it connects, under names of its choosing.
	authLog *throttle.Log
}

// failure is a consumer's failed session.
type failure struct {
	at  time.Time
	err error
}

// maxFailed bounds Server.failed: past it the oldest memories go.
const maxFailed = 10000

// sessionFailed remembers that consumer's session ended with err.
func (s *Server) sessionFailed(consumer string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil || len(s.failed) >= maxFailed {
		s.failed = map[string]failure{}
	}
	s.failed[consumer] = failure{time.Now(), err}
}

// back returns and forgets the failure of consumer's last session.
func (s *Server) back(consumer string) (failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.failed[consumer]
	delete(s.failed, consumer)
	return f, ok
}

// NewServer returns a server; it listens on nothing until Serve.
func NewServer(cfg Config) *Server {
	if cfg.Registry == nil {
		cfg.Registry = stream.NewRegistry()
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = MaxClientFrame
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log.With("api", "canal"), authLog: throttle.New(time.Minute, 10)}
}

// Serve accepts connections on l and serves each on its own goroutine
// until ctx ends; then it closes l and every connection, waits for their
// goroutines and returns nil. If l is closed under it, it returns that
// error (after closing every connection, too); other accept errors are
// logged and retried.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if s.cfg.User == "" && s.cfg.Login == nil {
		s.log.Warn("no user configured: every canal client is accepted without authentication", "addr", l.Addr().String())
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var delay time.Duration
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !errors.Is(err, net.ErrClosed) {
				// Out of file descriptors and the like: wait and retry.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", delay)
				select {
				case <-time.After(delay):
					continue
				case <-ctx.Done():
					return nil
				}
			}
			l.Close()
			return err
		}
		delay = 0
		wg.Go(func() { s.serveConn(ctx, conn, false) })
	}
}

// ServePeer serves one connection a peer node relays from its client
// (Config.DialOwner on that node) until it ends or ctx does, and closes
// it. The client's user name is trusted as the peer sent it (see
// Config.PeerUser), so conn must come from a port only the cluster's
// nodes can speak on.
func (s *Server) ServePeer(ctx context.Context, conn net.Conn) {
	s.serveConn(ctx, conn, true)
}

func (s *Server) serveConn(ctx context.Context, conn net.Conn, peer bool) {
	stopConn := context.AfterFunc(ctx, func() { conn.Close() })
	defer stopConn()
	defer conn.Close()
	sess := &session{s: s, conn: &clientConn{Conn: conn}, peer: peer, readTimeout: s.cfg.IdleTimeout, writeTimeout: s.cfg.IdleTimeout,
		log: s.log.With("remote", conn.RemoteAddr().String())}
	sess.serve(ctx)
}

// scramble is canal's (MySQL 4.1's) password scramble, as its clients
// compute it: SHA1(seed ‖ SHA1(SHA1(pw))) XOR SHA1(pw).
func scramble(password string, seed []byte) []byte {
	stage1 := sha1.Sum([]byte(password))
	stage2 := sha1.Sum(stage1[:])
	h := sha1.New()
	h.Write(seed)
	h.Write(stage2[:])
	out := h.Sum(nil)
	for i := range out {
		out[i] ^= stage1[i]
	}
	return out
}

// readAll is the access of a client that may read every destination.
func readAll(string) bool { return true }

// auth checks a client's user and hex-encoded scramble against Login or
// the configured account, and returns what the client may read; peer
// connections are checked with PeerUser instead.
func (s *Server) auth(remote, user string, hexScramble []byte, seed []byte, peer bool) (mayRead func(string) bool, ok bool) {
	switch {
	case peer && s.cfg.PeerUser != nil:
		return s.cfg.PeerUser(user)
	case peer:
		return readAll, true
	case s.cfg.Login != nil:
		mayRead, err := s.cfg.Login(remote, user, hexScramble, seed)
		return mayRead, err == nil
	}
	return readAll, s.accountOK(user, hexScramble, seed)
}

// accountOK checks a client's user and hex-encoded scramble against
// Config.User and Password.
func (s *Server) accountOK(user string, hexScramble []byte, seed []byte) bool {
	if s.cfg.User == "" {
		return true
	}
	got := make([]byte, hex.DecodedLen(len(hexScramble)))
	if _, err := hex.Decode(got, hexScramble); err != nil {
		return false
	}
	want := scramble(s.cfg.Password, seed)
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.User))
	return userOK&subtle.ConstantTimeCompare(got, want) == 1
}

func newSeed() []byte {
	seed := make([]byte, 8)
	rand.Read(seed) // never fails (crypto/rand)
	return seed
}
