package mariadb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// host is the address every server listens on.
const host = "127.0.0.1"

const (
	// readyTimeout bounds how long a server may take to answer after launch.
	readyTimeout = 90 * time.Second
	// probeTimeout bounds one readiness check.
	probeTimeout = 2 * time.Second
	// stopGrace is how long Stop gives a server to shut down after SIGTERM
	// before it is killed.
	stopGrace = 30 * time.Second
	// removeGrace is stopGrace for Remove, when the data is thrown away
	// anyway.
	removeGrace = 5 * time.Second
	// bindAttempts is how many ports Launch tries when another process takes
	// the chosen port first, and how many times Restart tries its port.
	bindAttempts = 5
	// bindRetryDelay is how long Restart waits for a taken port.
	bindRetryDelay = time.Second
	// logTailLines is how much of the error log failures show.
	logTailLines = 40
	// maxSocketPath is the longest unix socket path the kernel accepts.
	maxSocketPath = 107
)

// errRemoved is returned by Restart after Remove.
var errRemoved = errors.New("mariadb: server removed")

// Options configure Launch. The zero value is a server on a free port in a
// new directory under the system temp directory, with server_id 1.
type Options struct {
	// Dir is the directory in which Launch creates the server's own
	// directory (named braid-mariadb-*, see Server.Dir); it must exist.
	// Default: "", the system temp directory (os.TempDir, or /tmp if that
	// path is long), where directories of processes that died without
	// Remove are cleaned up by a later Launch.
	Dir string
	// Port is the TCP port on 127.0.0.1. Default: 0, a free port, preferably
	// below the kernel's ephemeral range. If an explicit port is taken,
	// Launch fails with ErrPortInUse.
	Port int
	// ServerID is the server's server_id. Default: 0, which means 1.
	ServerID uint32
	// Args are appended to the server's command line, after the defaults,
	// so they override them: "--binlog-format=STATEMENT", "--skip-log-bin",
	// "--binlog-row-metadata=FULL". Default: none.
	Args []string
	// Log, if not nil, receives a copy of everything the server writes to
	// its error log (Server.ErrorLog), as it is written, from a goroutine of
	// the package. Write errors are ignored; Write must not block for long,
	// and must be safe for concurrent use if several servers share it.
	// Default: nil, the error log is only written to its file.
	Log io.Writer
}

// Validate reports every problem with o at once. It does not change o.
func (o Options) Validate() error {
	var errs []error
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("mariadb: port %d out of range 0-65535", o.Port))
	}
	if o.Dir != "" {
		if fi, err := os.Stat(o.Dir); err != nil {
			errs = append(errs, fmt.Errorf("mariadb: dir: %w", err))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("mariadb: dir %s is not a directory", o.Dir))
		}
	}
	return errors.Join(errs...)
}

// Server is a running (or stopped) database server started by Launch. Its
// exported fields are set by Launch and never change.
type Server struct {
	// Host is the address the server listens on: "127.0.0.1".
	Host string
	// Port is the server's TCP port; Restart keeps it.
	Port int
	// ServerID is the server's server_id.
	ServerID uint32
	// Flavor is "mariadb" or "mysql", as go-mysql spells flavours.
	Flavor string
	// Dir is the directory Launch created for the server; it holds DataDir,
	// Socket and ErrorLog, and Remove deletes it.
	Dir string
	// DataDir is the server's data directory, which holds the binary logs
	// (binlog.000001, ...).
	DataDir string
	// Socket is the server's unix socket.
	Socket string
	// ErrorLog is the file that receives the server's error log (its
	// standard output and error), across restarts.
	ErrorLog string

	env  *env
	args []string  // the full command line but the binary
	log  io.Writer // Options.Log
	lock *os.File  // Dir's lock, held until Remove

	mu      sync.Mutex // guards proc and removed; held by Stop, Kill, Restart, Remove
	proc    *process   // nil while stopped
	removed bool
}

// Launch creates a server directory, initialises a data directory in it,
// starts the server and waits until it answers queries as root over TCP.
// ctx bounds the start-up only: the server runs until Stop, Kill or Remove,
// or until this process exits (on Linux it is killed with it). The first
// Launch of a process also finds the server binary and initialises a
// template data directory (about two seconds), which later Launches copy.
//
// Without a server installation Launch fails with an error wrapping
// ErrNoServer. On any failure nothing is left running or on disk, but the
// template.
func Launch(ctx context.Context, opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e, err := setup(ctx)
	if err != nil {
		return nil, err
	}
	parent := opts.Dir
	if parent == "" {
		parent = tempBase()
	}
	dir, lock, err := makeLockedDir(parent, "")
	if err != nil {
		return nil, err
	}
	s := &Server{
		Host:     host,
		ServerID: opts.ServerID,
		Flavor:   e.flavor,
		Dir:      dir,
		DataDir:  filepath.Join(dir, "data"),
		Socket:   filepath.Join(dir, "sock"),
		ErrorLog: filepath.Join(dir, "error.log"),
		env:      e,
		log:      opts.Log,
		lock:     lock,
	}
	if s.ServerID == 0 {
		s.ServerID = 1
	}
	if err = os.Mkdir(s.tmpDir(), 0o700); err != nil {
		err = fmt.Errorf("mariadb: %w", err)
	} else if len(s.Socket) > maxSocketPath {
		err = fmt.Errorf("mariadb: socket path %s is longer than %d bytes: choose a shorter Dir",
			s.Socket, maxSocketPath)
	} else {
		err = s.firstLaunch(ctx, opts.Port, slices.Clone(opts.Args))
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		_ = lock.Close()
		return nil, err
	}
	return s, nil
}

// firstLaunch copies the template and launches the server on port, or on a
// free port if port is 0. If another process takes a free port before the
// server binds it, it starts over with a fresh data directory and port.
func (s *Server) firstLaunch(ctx context.Context, port int, extraArgs []string) error {
	for attempt := 1; ; attempt++ {
		if err := copyTemplate(s.env, s.DataDir); err != nil {
			return err
		}
		if port != 0 {
			if !claimPort(port) {
				return fmt.Errorf("mariadb: port %d is used by another server of this process: %w",
					port, ErrPortInUse)
			}
			s.Port = port
		} else {
			p, err := reservePort()
			if err != nil {
				return err
			}
			s.Port = p
		}
		s.args = s.startArgs(extraArgs)
		err := s.launch(ctx)
		if err == nil {
			return nil
		}
		releasePort(s.Port)
		if port != 0 || !errors.Is(err, ErrPortInUse) || attempt == bindAttempts {
			return err
		}
		// A server that failed to bind may have written to its data
		// directory (a first binary log): start over from the template.
		if err := os.RemoveAll(s.DataDir); err != nil {
			return fmt.Errorf("mariadb: %w", err)
		}
	}
}

// startArgs returns the server's command line, but the binary.
func (s *Server) startArgs(extra []string) []string {
	args := []string{
		"--no-defaults", // must come first
		"--datadir=" + s.DataDir,
		"--socket=" + s.Socket,
		"--pid-file=" + filepath.Join(s.Dir, "pid"),
		// A private tmpdir: a starting server deletes every #sql* file in
		// its tmpdir, which in a shared /tmp includes the temporary tables
		// of other servers, and fails a concurrent mariadb-install-db
		// ("Unknown table 'mysql.tmp_proxies_priv'").
		"--tmpdir=" + s.tmpDir(),
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

// tmpDir is the server's private --tmpdir.
func (s *Server) tmpDir() string {
	return filepath.Join(s.Dir, "tmp")
}

// Addr returns "127.0.0.1:port", for client.Connect and replication configs.
func (s *Server) Addr() string {
	return net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
}

// Stop shuts the server down cleanly (SIGTERM, then SIGKILL if it has not
// exited after 30s) and keeps its data. The error reports a server that had
// to be killed; it is stopped either way. Stopping a stopped server does
// nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop(stopGrace)
}

func (s *Server) stop(grace time.Duration) error {
	if s.proc == nil {
		return nil
	}
	err := s.proc.stop(grace)
	s.proc = nil
	if err != nil {
		return fmt.Errorf("mariadb: %s: %w", s.Addr(), err)
	}
	return nil
}

// Kill kills the server with SIGKILL, as a crash would, keeps its data and
// waits until the process is gone. Killing a stopped server does nothing.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	err := s.proc.kill()
	s.proc = nil
	if err != nil {
		return fmt.Errorf("mariadb: %s: kill: %w", s.Addr(), err)
	}
	return nil
}

// Restart starts the server again on the same port and data directory, with
// the same arguments, and waits until it answers; ctx bounds the start-up. A
// running server is stopped first, as by Stop; if it has to be killed, that
// is noted in Options.Log. If the port is taken, Restart tries again every
// second, five times in all, then fails with ErrPortInUse. On failure the
// server is stopped.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return errRemoved
	}
	if err := s.stop(stopGrace); err != nil && s.log != nil {
		fmt.Fprintf(s.log, "%v\n", err)
	}
	for attempt := 1; ; attempt++ {
		err := s.launch(ctx)
		if err == nil || !errors.Is(err, ErrPortInUse) || attempt == bindAttempts {
			return err
		}
		t := time.NewTimer(bindRetryDelay) // the port is someone else's for a moment
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		}
	}
}

// Remove stops the server if it runs (SIGTERM, then SIGKILL after 5s: the
// data is thrown away) and deletes its directory. The error reports a server
// that had to be killed or a directory that could not be deleted. Afterwards
// the Server must not be used but for Addr and its fields; Remove again does
// nothing.
func (s *Server) Remove() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil
	}
	s.removed = true
	stopErr := s.stop(removeGrace)
	releasePort(s.Port)
	err := os.RemoveAll(s.Dir)
	_ = s.lock.Close()
	if err != nil {
		err = fmt.Errorf("mariadb: remove %s: %w", s.Dir, err)
	}
	return errors.Join(stopErr, err)
}

// LogTail returns the last n lines of the server's error log, or "" if it
// cannot be read.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.ErrorLog)
	if err != nil {
		return ""
	}
	return tail(b, n)
}
