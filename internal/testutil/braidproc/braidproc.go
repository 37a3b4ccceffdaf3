// Package braidproc is the test half of running real `braid server`
// processes: it builds the braid binary of this module (`go build
// ./cmd/braid`) for the process-level tests and benchmarks, and starts
// clusters of it that a test owns, on top of package internal/localcluster
// (which `braid demo` shares, running its own executable: the shipped
// binary never builds). Like localcluster, it imports no server package:
// a test sees braid as a user runs it. Package internal/testutil/nodes
// wraps its clusters with the helpers the process-level tests share.
//
//	c := braidproc.Start(t, 3, "--log-level", "debug") // stopped when t ends
//	owner, epoch, _, err := c.Owner(t.Context(), "shop", 30*time.Second)
//
// # Concurrency
//
// Build may be called concurrently (each call builds); Binary (or Main,
// a TestMain that builds before the tests run) builds once
// per test process and is safe for concurrent use.
package braidproc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/ports"
)

// Build builds the braid binary (./cmd/braid of this module, found
// with `go env GOMOD`) into dir and returns its path.
func Build(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("braidproc: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("braidproc: go env GOMOD: not inside the braid module")
	}
	bin := filepath.Join(dir, "braid")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/braid")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("braidproc: go build ./cmd/braid: %w\n%s", err, out)
	}
	return bin, nil
}

// buildTimeout bounds Binary's build, on a slow machine with a cold cache.
const buildTimeout = 5 * time.Minute

var binary struct {
	once sync.Once
	path string
	err  error
}

// build builds the binary of Binary and Main, once.
func build() {
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "braid-bin-")
		if err != nil {
			binary.err = fmt.Errorf("braidproc: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		binary.path, binary.err = Build(ctx, dir)
	})
}

// Main is a TestMain for a package whose tests run braid: it builds the
// binary (Binary's) before any test runs, so that no test's timeouts
// count the build, then runs the tests and exits. Under -short it builds
// nothing (Binary skips the tests).
func Main(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		build()
		if binary.err != nil {
			fmt.Fprintln(os.Stderr, binary.err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if binary.path != "" {
		os.RemoveAll(filepath.Dir(binary.path))
	}
	os.Exit(code)
}

// Built is the binary Main or Binary built; "" before either did.
func Built() string { return binary.path }

// Binary returns a braid binary built once per test process (with Build,
// into a temporary directory that lives as long as the process), and
// fails tb if the build failed. Under go test -short (make test-short)
// it skips tb, and so does Start.
func Binary(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("braidproc: -short: this test builds and runs the braid binary")
	}
	build()
	if binary.err != nil {
		tb.Fatal(binary.err)
	}
	return binary.path
}

// LogsEnv names a directory that Start copies its nodes' logs into when a
// test fails, if set.
const LogsEnv = "BRAID_TEST_LOGS"

// Start starts a cluster of size nodes (localcluster.Start) from Binary,
// with data directories under tb.TempDir() and the extra flags args, and
// fails tb if it does not form within a minute. When tb ends it kills the
// nodes; if tb failed it first logs the end of each node's log (LogTail)
// and copies the logs into $BRAID_TEST_LOGS, if set.
func Start(tb testing.TB, size int, args ...string) *localcluster.Cluster {
	tb.Helper()
	bin := Binary(tb)
	c, err := localcluster.Start(tb.Context(), bin, tb.TempDir(), size, args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		if !tb.Failed() {
			return
		}
		dir := os.Getenv(LogsEnv)
		for _, n := range c.Nodes {
			tb.Logf("log of %s (%s), last lines:\n%s", n.Name, n.LogPath(), LogTail(n, 60))
			if dir == "" {
				continue
			}
			b, err := os.ReadFile(n.LogPath())
			if err == nil {
				err = os.MkdirAll(dir, 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(tb.Name(), "/", "-")+"-"+n.Name+".log"), b, 0o644)
			}
			if err != nil {
				tb.Logf("keeping the log of %s in $%s: %v", n.Name, LogsEnv, err)
			}
		}
	})
	return c
}

// LogTail returns the last lines of node n's log above debug level, and
// without Raft's "failed to heartbeat" lines (a dead peer's noise), for
// failure messages.
func LogTail(n *localcluster.Node, lines int) string {
	b, _ := os.ReadFile(n.LogPath())
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.Contains(l, "level=DEBUG") && !strings.Contains(l, "failed to heartbeat") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-lines):], "\n")
}

// NewNode is a node that is no member of a cluster Start started (a
// replacement, of another cluster, or reusing a name): named name, its
// data under dir/name, on free loopback ports, with sec's certificates
// and users (nil: none), logging at debug level with the extra flags
// args. It is not started (Node.Start); it is killed when tb ends.
func NewNode(tb testing.TB, sec *localcluster.Security, name, dir string, args ...string) *localcluster.Node {
	tb.Helper()
	p, err := ports.FreeLoopback(4)
	if err != nil {
		tb.Fatal(err)
	}
	n := &localcluster.Node{Name: name, Dir: filepath.Join(dir, name), Security: sec,
		RaftPort: p[0], GossipPort: p[1], HTTPPort: p[2], CanalPort: p[3],
		Args: append([]string{"--log-level", "debug"}, args...)}
	tb.Cleanup(n.Kill)
	return n
}
