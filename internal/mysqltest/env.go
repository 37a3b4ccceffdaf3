package mysqltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// errNoServer reports that no usable server installation was found.
var errNoServer = errors.New("mysqltest: no mariadbd or mysqld found on PATH or in /usr/sbin " +
	"(fix: apt-get install mariadb-server)")

const (
	// rootPrefix names the per-process directory that holds the template and
	// every server's directory.
	rootPrefix = "mysqltest-"
	// lockName is the file in a root directory that its process holds locked
	// for as long as it lives.
	lockName = "lock"
	// staleAge is how old an unlocked root directory must be before another
	// process removes it: younger ones may still be being set up.
	staleAge = time.Minute
	// initTimeout bounds the template initialisation.
	initTimeout = 3 * time.Minute
)

// innodbArgs size InnoDB small. They are passed both when the template is
// initialised and when a server starts, so no server resizes its redo log.
var innodbArgs = []string{
	"--innodb-buffer-pool-size=32M",
	"--innodb-log-file-size=8M",
}

// env is what every server of this process shares: the binary and the
// template data directory. It is built once, by setup.
type env struct {
	bin      string // server binary
	flavor   string // "mariadb" or "mysql"
	version  string // first line of bin --version
	root     string // per-process directory, removed by a later process
	template string // initialised data directory, copied by each server
}

var (
	envOnce   sync.Once
	sharedEnv *env
	envErr    error
	// rootLock is held open for the life of the process: closing it (or the
	// garbage collector finalising it) would release the lock.
	rootLock *os.File
)

// setup returns the process-wide env, building it on first use.
func setup() (*env, error) {
	envOnce.Do(func() { sharedEnv, envErr = newEnv() })
	return sharedEnv, envErr
}

func newEnv() (*env, error) {
	bin := findServer()
	if bin == "" {
		return nil, errNoServer
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mysqltest: %s --version: %w: %s", bin, err, tail(out, 10))
	}
	e := &env{bin: bin, flavor: "mysql", version: strings.TrimSpace(firstLine(string(out)))}
	if strings.Contains(string(out), "MariaDB") {
		e.flavor = "mariadb"
	}

	base := tempBase()
	reapStale(base)
	e.root, err = os.MkdirTemp(base, rootPrefix)
	if err != nil {
		return nil, fmt.Errorf("mysqltest: %w", err)
	}
	rootLock, err = os.OpenFile(filepath.Join(e.root, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(rootLock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		return nil, fmt.Errorf("mysqltest: lock %s: %w", e.root, err)
	}
	e.template = filepath.Join(e.root, "template")
	if err := e.initTemplate(); err != nil {
		return nil, err
	}
	return e, nil
}

// findServer returns the path of mariadbd or mysqld, or "".
func findServer() string {
	for _, name := range []string{"mariadbd", "mysqld"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if p := filepath.Join("/usr/sbin", name); isExecutable(p) {
			return p
		}
	}
	return ""
}

// findInstallDB returns the path of mariadb-install-db or mysql_install_db, or "".
func findInstallDB(serverBin string) string {
	dirs := []string{
		filepath.Dir(serverBin),
		filepath.Join(filepath.Dir(serverBin), "..", "bin"),
		filepath.Join(filepath.Dir(serverBin), "..", "scripts"),
		"/usr/bin", "/usr/local/bin",
	}
	for _, name := range []string{"mariadb-install-db", "mysql_install_db"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, d := range dirs {
			if p := filepath.Join(d, name); isExecutable(p) {
				return p
			}
		}
	}
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// initTemplate creates the template data directory: system tables, and a root
// user without password reachable as root@localhost and root@127.0.0.1.
func (e *env) initTemplate() error {
	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	var cmd *exec.Cmd
	switch e.flavor {
	case "mariadb":
		installDB := findInstallDB(e.bin)
		if installDB == "" {
			return fmt.Errorf("mysqltest: %s found but not mariadb-install-db: %w", e.bin, errNoServer)
		}
		args := []string{"--no-defaults", "--datadir=" + e.template,
			"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}
		args = append(append(args, userArg()...), innodbArgs...)
		cmd = exec.CommandContext(ctx, installDB, args...)
	default:
		initSQL := filepath.Join(e.root, "init.sql")
		sql := "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';\n" +
			"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n"
		if err := os.WriteFile(initSQL, []byte(sql), 0o600); err != nil {
			return fmt.Errorf("mysqltest: %w", err)
		}
		args := []string{"--no-defaults", "--initialize-insecure", "--datadir=" + e.template,
			"--init-file=" + initSQL, "--log-error=" + filepath.Join(e.root, "init.log")}
		args = append(append(args, userArg()...), innodbArgs...)
		cmd = exec.CommandContext(ctx, e.bin, args...)
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		if b, rerr := os.ReadFile(filepath.Join(e.root, "init.log")); rerr == nil {
			out = append(out, b...)
		}
		return fmt.Errorf("mysqltest: initialise template data directory with %s after %v: %w\n%s",
			cmd.Path, time.Since(start).Round(time.Millisecond), err, tail(out, 30))
	}
	return nil
}

// userArg returns --user=root when running as root, which mariadbd requires.
func userArg() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

// tempBase returns the directory for root directories: os.TempDir, unless
// its path is so long that a unix socket path inside it might pass the
// 107-byte limit.
func tempBase() string {
	if d := os.TempDir(); len(d) <= 40 {
		return d
	}
	return "/tmp"
}

// reapStale removes root directories in base left by test processes that
// died without cleaning up: their lock is free and they are old enough not to
// be in the middle of being created.
func reapStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, rootPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < staleAge {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
		if err != nil {
			continue // not ours, or not set up: leave it
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir)
		}
		_ = f.Close()
	}
}

// copyDir copies the regular files and directories under src to dst, which
// must not exist.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm())
		case info.Mode().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		default:
			return nil // sockets, pid files: nothing a server needs
		}
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// ports hands out loopback TCP ports, never the same one twice to servers of
// this process that are alive at the same time.
var ports = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// reservePort returns a port that was free a moment ago. It prefers ports
// below the kernel's ephemeral range, so that no outgoing connection can sit
// on a server's port while the server is down for a Restart; it falls back to
// one chosen by the kernel.
func reservePort() (int, error) {
	lo := ephemeralLow()
	for i := 0; i < 50; i++ {
		port := 0
		if i < 40 && lo > 20000 {
			port = 15000 + rand.IntN(lo-15000)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		ports.Lock()
		taken := ports.used[port]
		ports.used[port] = true
		ports.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, errors.New("mysqltest: no free loopback port found")
}

func releasePort(port int) {
	ports.Lock()
	delete(ports.used, port)
	ports.Unlock()
}

// ephemeralLow returns the first port of the kernel's ephemeral range, or 0 if
// it is unknown.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
