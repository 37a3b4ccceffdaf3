package mariadb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoServer reports that no usable server installation was found. Launch
// wraps it; its message names the fix.
var ErrNoServer = errors.New("mariadb: no mariadbd or mysqld found on PATH or in /usr/sbin " +
	"(fix: apt-get install mariadb-server)")

const (
	// dirPrefix starts the name of every directory this package creates: the
	// template's and each server's.
	dirPrefix = "braid-mariadb-"
	// lockName is the file in such a directory that its owner holds locked
	// for as long as it uses the directory.
	lockName = "lock"
	// staleAge is how old an unlocked directory must be before another
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
// template data directory.
type env struct {
	bin      string   // server binary
	flavor   string   // "mariadb" or "mysql"
	version  string   // first line of bin --version
	root     string   // holds the template; removed by RemoveTemplate or a later process
	lock     *os.File // root's lock, held while root is in use
	template string   // initialised data directory, copied by each server
}

// shared is the process-wide env. Its lock is held for reading while a
// template is copied, so RemoveTemplate cannot pull it away.
var shared struct {
	sync.RWMutex
	env *env
	err error // a setup error that a retry would repeat
}

// setup returns the process-wide env, building it on first use. A failure
// is remembered, unless it came from ctx.
func setup(ctx context.Context) (*env, error) {
	shared.RLock()
	e, err := shared.env, shared.err
	shared.RUnlock()
	if e != nil || err != nil {
		return e, err
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.env != nil || shared.err != nil {
		return shared.env, shared.err
	}
	e, err = newEnv(ctx)
	if err != nil && ctx.Err() == nil {
		shared.err = err
	}
	shared.env = e
	return e, err
}

// Prepare finds the server binary and initialises this process's template
// data directory, which Launch otherwise does on first use; it returns the
// error that Launch would. Call it to fail early, or to report the slow part
// of a first start separately. ctx bounds the initialisation.
func Prepare(ctx context.Context) error {
	_, err := setup(ctx)
	return err
}

// copyTemplate copies the template data directory of e to dst.
func copyTemplate(e *env, dst string) error {
	shared.RLock()
	defer shared.RUnlock()
	if shared.env != e {
		return errors.New("mariadb: template removed while a server was launching")
	}
	if err := copyDir(e.template, dst); err != nil {
		return fmt.Errorf("mariadb: copy template data directory: %w", err)
	}
	return nil
}

// RemoveTemplate removes this process's template data directory, which
// Launch creates on first use and which otherwise stays until a later process
// finds it abandoned. Call it once no more servers will be launched, as braid
// does before it exits; servers already launched are not affected. A later
// Launch creates a new template.
func RemoveTemplate() error {
	shared.Lock()
	defer shared.Unlock()
	e := shared.env
	shared.env, shared.err = nil, nil
	if e == nil {
		return nil
	}
	err := os.RemoveAll(e.root)
	_ = e.lock.Close()
	if err != nil {
		return fmt.Errorf("mariadb: remove template: %w", err)
	}
	return nil
}

func newEnv(ctx context.Context) (*env, error) {
	bin := findServer()
	if bin == "" {
		return nil, ErrNoServer
	}
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mariadb: %s --version: %w: %s", bin, err, tail(out, 10))
	}
	e := &env{bin: bin, flavor: "mysql", version: strings.TrimSpace(firstLine(string(out)))}
	if strings.Contains(string(out), "MariaDB") {
		e.flavor = "mariadb"
	}

	base := tempBase()
	reapStale(base)
	if e.root, e.lock, err = makeLockedDir(base, "tmpl-"); err != nil {
		return nil, err
	}
	e.template = filepath.Join(e.root, "template")
	if err := e.initTemplate(ctx); err != nil {
		_ = os.RemoveAll(e.root)
		_ = e.lock.Close()
		return nil, err
	}
	return e, nil
}

// makeLockedDir creates a directory dirPrefix+infix+random in parent and
// locks it: while the returned file is open, reapStale leaves the directory
// alone.
func makeLockedDir(parent, infix string) (dir string, lock *os.File, err error) {
	dir, err = os.MkdirTemp(parent, dirPrefix+infix)
	if err != nil {
		return "", nil, fmt.Errorf("mariadb: %w", err)
	}
	lock, err = os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = lock.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("mariadb: lock %s: %w", dir, err)
	}
	return dir, lock, nil
}

// reapStale removes directories in base left by processes that died without
// cleaning up: their lock is free and they are old enough not to be in the
// middle of being created.
func reapStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
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
func (e *env) initTemplate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, initTimeout)
	defer cancel()
	tmpdir := filepath.Join(e.root, "tmp") // private, as for servers: see startArgs
	if err := os.Mkdir(tmpdir, 0o700); err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	var cmd *exec.Cmd
	switch e.flavor {
	case "mariadb":
		installDB := findInstallDB(e.bin)
		if installDB == "" {
			return fmt.Errorf("mariadb: %s found but not mariadb-install-db: %w", e.bin, ErrNoServer)
		}
		args := []string{"--no-defaults", "--datadir=" + e.template, "--tmpdir=" + tmpdir,
			"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}
		args = append(append(args, userArg()...), innodbArgs...)
		cmd = exec.CommandContext(ctx, installDB, args...)
	default:
		initSQL := filepath.Join(e.root, "init.sql")
		sql := "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';\n" +
			"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n"
		if err := os.WriteFile(initSQL, []byte(sql), 0o600); err != nil {
			return fmt.Errorf("mariadb: %w", err)
		}
		args := []string{"--no-defaults", "--initialize-insecure", "--datadir=" + e.template, "--tmpdir=" + tmpdir,
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
		return fmt.Errorf("mariadb: initialise template data directory with %s after %v: %w\n%s",
			cmd.Path, time.Since(start).Round(time.Millisecond), err, errorLines(out, 30))
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

// tempBase returns the directory for directories of servers without
// Options.Dir and for the template: os.TempDir, unless its path is so long
// that a unix socket path inside it might pass the 107-byte limit.
func tempBase() string {
	if d := os.TempDir(); len(d) <= 40 {
		return d
	}
	return "/tmp"
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
