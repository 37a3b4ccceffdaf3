package mysqltest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/braid-cdc/braid/internal/mariadb"
)

const (
	// firstServerID is the server id of the first server of a process.
	firstServerID = 100
	// logTailLines is how much of the error log a failed test shows.
	logTailLines = 40
)

// nextServerID is the default server id of the next server.
var nextServerID atomic.Uint32

// Option configures a server started by Start or StartN.
type Option func(*config)

type config struct {
	serverID uint32 // 0: the next default id
	args     []string
	// domainID is the first server's gtid_domain_id; without hasDomain
	// the server's default (0) is left alone.
	domainID     uint32
	hasDomain    bool
	sharedDomain bool
	// roleArgs, if set, gives server i's arguments before args, so that
	// args override them (StartTopology's replicas).
	roleArgs func(i int) []string
}

// WithServerID sets the server_id; 0 means the default. Default: distinct for
// every server started by this process, counting up from 100. With StartN,
// the servers get id, id+1, and so on.
func WithServerID(id uint32) Option {
	return func(c *config) { c.serverID = id }
}

// WithArgs appends arguments to the server's command line, after the defaults,
// so they override them: "--binlog-format=STATEMENT", "--skip-log-bin",
// "--binlog-row-metadata=FULL", "--binlog-row-image=MINIMAL". Several
// WithArgs accumulate.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithDomainID sets the gtid_domain_id (MariaDB). With StartN and
// StartTopology the servers get id, id+1, and so on, each its own domain,
// unless WithSharedDomain is given too. Default: Start and StartN leave
// the server's default, 0; StartTopology gives its servers 0, 1, 2, ...
// in start order.
func WithDomainID(id uint32) Option {
	return func(c *config) { c.domainID, c.hasDomain = id, true }
}

// WithSharedDomain gives every server of StartN or StartTopology the
// same gtid_domain_id (WithDomainID's, or 0): a single-domain replication
// topology, where a promoted replica goes on in its old primary's domain
// instead of its own.
func WithSharedDomain() Option {
	return func(c *config) { c.hasDomain, c.sharedDomain = true, true }
}

// domainFor is server i's gtid_domain_id, and whether one is set.
func (c *config) domainFor(i int) (uint32, bool) {
	if !c.hasDomain {
		return 0, false
	}
	if c.sharedDomain {
		return c.domainID, true
	}
	return c.domainID + uint32(i), true
}

// Server is a running (or stopped) database server owned by one test.
type Server struct {
	// Host is the address the server listens on: "127.0.0.1".
	Host string
	// Port is the server's TCP port; Restart keeps it.
	Port int
	// ServerID is the server's server_id.
	ServerID uint32
	// DomainID is the server's gtid_domain_id as set by WithDomainID or
	// StartTopology; 0 (the server's default) otherwise.
	DomainID uint32
	// Flavor is "mariadb" or "mysql", as go-mysql spells flavours.
	Flavor string
	// DataDir is the server's data directory, which holds the binary logs
	// (binlog.000001, ...). It is removed at the end of the test.
	DataDir string
	// Socket is the server's unix socket.
	Socket string

	srv *mariadb.Server
	// logShown is set once a failure message has included the error log,
	// so that cleanup does not repeat it.
	logShown bool
}

// Start starts a server and waits until it answers queries. The server is
// shut down and its directory removed when the test ends. Without a server
// installation the test is skipped, or fails if CI=true; under go test
// -short (make test-short) it is skipped.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return StartN(t, 1, opts...)[0]
}

// StartN starts n servers in parallel, each as Start would, and returns them
// once all answer queries.
func StartN(t testing.TB, n int, opts ...Option) []*Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("mysqltest: StartN(%d): want at least one server", n)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return startN(t, n, &cfg)
}

// startN is StartN with its options applied.
func startN(t testing.TB, n int, cfg *config) []*Server {
	t.Helper()
	if testing.Short() {
		t.Skip("mysqltest: -short: this test starts a mariadbd")
	}
	// Not t.Context(): Start and Restart may be called from a Cleanup, when
	// it is already cancelled. The package bounds start-up itself.
	ctx := context.Background()
	if err := mariadb.Prepare(ctx); err != nil {
		failSetup(t, err)
	}
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		id := cfg.serverID
		if id == 0 {
			id = nextServerID.Add(1) - 1 + firstServerID
		} else {
			id += uint32(i)
		}
		var args []string
		domain, hasDomain := cfg.domainFor(i)
		if hasDomain {
			args = append(args, "--loose-gtid-domain-id="+strconv.FormatUint(uint64(domain), 10))
		}
		if cfg.roleArgs != nil {
			args = append(args, cfg.roleArgs(i)...)
		}
		args = append(args, cfg.args...)
		wg.Go(func() {
			srv, err := mariadb.Launch(ctx, mariadb.Options{ServerID: id, Args: args})
			if err != nil {
				errs[i] = err // it holds the error log's tail
				return
			}
			servers[i] = &Server{
				Host:     srv.Host,
				Port:     srv.Port,
				ServerID: srv.ServerID,
				DomainID: domain,
				Flavor:   srv.Flavor,
				DataDir:  srv.DataDir,
				Socket:   srv.Socket,
				srv:      srv,
			}
		})
	}
	wg.Wait()
	// One cleanup stops them all in parallel: a replica's shutdown waits
	// for its replication threads, and one after another the servers of
	// a topology took seconds.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range servers {
			if s != nil {
				wg.Go(func() { s.cleanup(t) })
			}
		}
		wg.Wait()
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return servers
}

// failSetup ends the test for a setup error: a missing server skips it,
// unless CI=true; anything else fails it.
func failSetup(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, mariadb.ErrNoServer) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// Addr returns "127.0.0.1:port", for client.Connect and replication configs.
func (s *Server) Addr() string {
	return s.srv.Addr()
}

// Stop shuts the server down cleanly (SIGTERM, then SIGKILL if it has not
// exited after 30s) and keeps its data. Stopping a stopped server does
// nothing.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.srv.Stop(); err != nil {
		t.Log(err) // it was killed: stopped all the same
	}
}

// Kill kills the server with SIGKILL, as a crash would, and keeps its data.
// Killing a stopped server does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if err := s.srv.Kill(); err != nil {
		t.Fatal(err)
	}
}

// Restart starts the server again on the same port and data directory, with
// the same arguments, and waits until it answers. A running server is
// stopped first, as by Stop.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t)
	if err := s.srv.Restart(context.Background()); err != nil {
		s.logShown = true // err holds the log's tail
		t.Fatal(err)
	}
}

// cleanup shuts the server down and removes its directory; if the test
// failed, it logs the tail of the error log first.
func (s *Server) cleanup(t testing.TB) {
	t.Helper()
	if t.Failed() && !s.logShown {
		if log := s.srv.LogTail(logTailLines); log != "" {
			t.Logf("mysqltest: %s (server_id %d) error log, last lines:\n%s", s.Addr(), s.ServerID, log)
		}
	}
	if err := s.srv.Remove(); err != nil {
		// A server killed after the grace period is only worth a note; a
		// directory left behind is a failure.
		if _, statErr := os.Stat(s.srv.Dir); statErr == nil {
			t.Errorf("mysqltest: %v", err)
		} else {
			t.Logf("mysqltest: %v", err)
		}
	}
}
