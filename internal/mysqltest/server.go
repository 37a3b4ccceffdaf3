package mysqltest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to answer after launch.
	readyTimeout = 90 * time.Second
	// stopGrace is how long a server gets to shut down after SIGTERM before
	// it is killed.
	stopGrace = 30 * time.Second
	// cleanupGrace is stopGrace for the end of a test, when the data is
	// thrown away anyway.
	cleanupGrace = 5 * time.Second
	// bindAttempts is how many ports Start tries when another process takes
	// the chosen port first.
	bindAttempts = 5
	// firstServerID is the server id of the first server of a process.
	firstServerID = 100
	// logTailLines is how much of the error log failures show.
	logTailLines = 40
)

var (
	// nextServerID is the default server id of the next server.
	nextServerID atomic.Uint32
	// nextDir numbers the server directories of this process.
	nextDir atomic.Uint32
)

// Option configures a server started by Start or StartN.
type Option func(*config)

type config struct {
	serverID uint32 // 0: the next default id
	args     []string
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

// Server is a running (or stopped) database server owned by one test.
type Server struct {
	// Host is the address the server listens on: "127.0.0.1".
	Host string
	// Port is the server's TCP port; Restart keeps it.
	Port int
	// ServerID is the server's server_id.
	ServerID uint32
	// Flavor is "mariadb" or "mysql", as go-mysql spells flavours.
	Flavor string
	// DataDir is the server's data directory, which holds the binary logs
	// (binlog.000001, ...). It is removed at the end of the test.
	DataDir string
	// Socket is the server's unix socket.
	Socket string

	env    *env
	dir    string   // holds DataDir, Socket and the error log
	errLog string   // the server's error log, also its stdout and stderr
	args   []string // the full command line but the binary
	proc   *process // nil while stopped
	// logShown is set once a failure message has included the error log,
	// so that cleanup does not repeat it.
	logShown bool
}

// Start starts a server and waits until it answers queries. The server is
// shut down and its directory removed when the test ends. Without a server
// installation the test is skipped, or fails if CI=true.
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
	e, err := setup()
	if err != nil {
		failSetup(t, err)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
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
		s := &Server{Host: "127.0.0.1", ServerID: id, Flavor: e.flavor, env: e}
		servers[i] = s
		wg.Go(func() { errs[i] = s.create(cfg.args) })
	}
	wg.Wait()
	for _, s := range servers {
		t.Cleanup(func() { s.cleanup(t) })
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return servers
}

// failSetup ends the test for a setup error: a missing server skips it,
// unless CI=true; anything else fails it.
func failSetup(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errNoServer) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// Addr returns "127.0.0.1:port", for client.Connect and replication configs.
func (s *Server) Addr() string {
	return net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
}

// Stop shuts the server down cleanly (SIGTERM, then SIGKILL if it has not
// exited after 30s) and keeps its data. Stopping a stopped server does
// nothing.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.proc == nil {
		return
	}
	if err := s.proc.stop(stopGrace); err != nil {
		t.Logf("mysqltest: %s: %v", s.Addr(), err)
	}
	s.proc = nil
}

// Kill kills the server with SIGKILL, as a crash would, and keeps its data.
// Killing a stopped server does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if s.proc == nil {
		return
	}
	s.proc.kill()
	s.proc = nil
}

// Restart starts the server again on the same port and data directory, with
// the same arguments, and waits until it answers. A running server is
// stopped first, as by Stop.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t)
	var err error
	for attempt := 0; attempt < bindAttempts; attempt++ {
		var bindErr bool
		if bindErr, err = s.launch(); err == nil || !bindErr {
			break
		}
		time.Sleep(time.Second) // the port is someone else's for a moment
	}
	if err != nil {
		s.logShown = true // err holds the log's tail
		t.Fatal(err)
	}
}

// create sets up the server's directory and launches it on a free port.
func (s *Server) create(extraArgs []string) error {
	s.dir = filepath.Join(s.env.root, "s"+strconv.Itoa(int(nextDir.Add(1))))
	s.DataDir = filepath.Join(s.dir, "data")
	s.Socket = filepath.Join(s.dir, "sock")
	s.errLog = filepath.Join(s.dir, "error.log")
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		return fmt.Errorf("mysqltest: %w", err)
	}
	for attempt := 1; ; attempt++ {
		if err := copyDir(s.env.template, s.DataDir); err != nil {
			return fmt.Errorf("mysqltest: copy template data directory: %w", err)
		}
		port, err := reservePort()
		if err != nil {
			return err
		}
		s.Port = port
		s.args = s.startArgs(extraArgs)
		bindErr, err := s.launch()
		if err == nil {
			return nil
		}
		releasePort(port)
		s.Port = 0
		if !bindErr || attempt == bindAttempts {
			s.logShown = true // err holds the log's tail
			return err
		}
		// Another process took the port between our check and the
		// server's bind: start over with a fresh data directory.
		if err := os.RemoveAll(s.DataDir); err != nil {
			return fmt.Errorf("mysqltest: %w", err)
		}
	}
}

// startArgs returns the server's command line, but the binary.
func (s *Server) startArgs(extra []string) []string {
	args := []string{
		"--no-defaults", // must come first
		"--datadir=" + s.DataDir,
		"--socket=" + s.Socket,
		"--pid-file=" + filepath.Join(s.dir, "pid"),
		"--log-error=" + s.errLog,
		"--bind-address=" + s.Host,
		"--port=" + strconv.Itoa(s.Port),
		"--server-id=" + strconv.FormatUint(uint64(s.ServerID), 10),
		"--log-bin=binlog",
		"--binlog-format=ROW",
		"--binlog-row-image=FULL",
		"--character-set-server=utf8mb4",
		"--skip-name-resolve",
		// Fast start and stop. Durability stays as in production
		// (innodb_flush_log_at_trx_commit=1): with 2, MariaDB delays binlog
		// checkpoints on an idle server and PURGE BINARY LOGS keeps files.
		"--innodb-buffer-pool-load-at-startup=0",
		"--innodb-buffer-pool-dump-at-shutdown=0",
		"--innodb-temp-data-file-path=ibtmp1:4M:autoextend",
	}
	args = append(args, innodbArgs...)
	args = append(args, userArg()...)
	if s.Flavor == "mysql" {
		args = append(args, "--loose-mysqlx=OFF") // its fixed port 33060 would clash
	}
	return append(args, extra...)
}

// cleanup shuts the server down and removes its directory; if the test
// failed, it logs the tail of the error log first.
func (s *Server) cleanup(t testing.TB) {
	t.Helper()
	if t.Failed() && !s.logShown && s.errLog != "" {
		if b, err := os.ReadFile(s.errLog); err == nil && len(b) > 0 {
			t.Logf("mysqltest: %s (server_id %d) error log, last lines:\n%s",
				s.Addr(), s.ServerID, tail(b, logTailLines))
		}
	}
	if s.proc != nil {
		if err := s.proc.stop(cleanupGrace); err != nil {
			t.Logf("mysqltest: %s: %v", s.Addr(), err)
		}
		s.proc = nil
	}
	if s.Port != 0 {
		releasePort(s.Port)
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			t.Errorf("mysqltest: remove %s: %v", s.dir, err)
		}
	}
}
