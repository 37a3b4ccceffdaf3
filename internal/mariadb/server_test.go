package mariadb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"go.uber.org/goleak"

	"github.com/braid-cdc/braid/internal/testutil/logline"
)

// Every server is removed by its test, so no goroutine may be left; the
// template goes last.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := RemoveTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// launch launches a server removed when the test ends; without a server
// binary it skips the test, unless CI=true, and under -short it skips.
func launch(t *testing.T, opts Options) *Server {
	t.Helper()
	skipShort(t)
	s, err := Launch(t.Context(), opts)
	if errors.Is(err, ErrNoServer) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Remove(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// skipShort skips a test that runs a server binary under go test -short
// (make test-short).
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs mariadbd")
	}
}

// query returns the first column of the first row of sql, as root.
func query(t *testing.T, s *Server, sql string) string {
	t.Helper()
	c, err := client.Connect(s.Addr(), "root", "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer quit(c)
	r, err := c.Execute(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer r.Close()
	v, err := r.GetString(0, 0)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// The life of a sandbox: launch in a chosen directory, write, restart with
// the data and binary logs kept, remove without a trace.
func TestLaunchExecRestartRemove(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	var log logline.Buffer
	s := launch(t, Options{Dir: parent, ServerID: 7, Args: []string{"--binlog-row-metadata=FULL"}, Log: &log})

	if filepath.Dir(s.Dir) != parent || filepath.Dir(s.DataDir) != s.Dir {
		t.Errorf("Dir %s, DataDir %s: want a new directory in %s holding the data", s.Dir, s.DataDir, parent)
	}
	if got := query(t, s, "SELECT CONCAT_WS(' ', @@server_id, @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@port)"); got != "7 ON ROW FULL FULL "+strconv.Itoa(s.Port) {
		t.Errorf("server variables: %q", got)
	}
	if err := s.Exec("CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, at INT)",
		"SET timestamp = 1700000000", "INSERT INTO d.t VALUES (1, UNIX_TIMESTAMP())"); err != nil {
		t.Fatal(err)
	}
	err := s.Exec("INSERT INTO d.t VALUES (1, 0)")
	if err == nil || !strings.Contains(err.Error(), "Duplicate entry") || !strings.Contains(err.Error(), s.Addr()) {
		t.Errorf("duplicate key: got %v, want an error naming the server and the cause", err)
	}
	if !strings.Contains(log.String(), "ready for connections") {
		t.Errorf("Options.Log got %q, want the server's start-up notes", log.String())
	}

	port := s.Port
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s.Port != port {
		t.Fatalf("port changed from %d to %d", port, s.Port)
	}
	if got := query(t, s, "SELECT at FROM d.t WHERE id = 1"); got != "1700000000" {
		t.Fatalf("row after restart: at = %q", got)
	}
	if got := query(t, s, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'd'"); got != "1" {
		t.Fatalf("tables after restart: %s", got)
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil { // a no-op
		t.Fatal(err)
	}
	if err := s.Exec("DO 1"); err == nil {
		t.Fatal("Exec on a killed server succeeded")
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := query(t, s, "SELECT COUNT(*) FROM d.t"); got != "1" {
		t.Fatalf("rows after kill and restart: %s", got)
	}

	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(); err != nil { // a no-op
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove, stat %s: %v", s.Dir, err)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Error("removed server still listens")
	}
	if err := s.Restart(t.Context()); err == nil {
		t.Error("Restart after Remove succeeded")
	}
}

// A taken port is recognised: an explicit Options.Port fails with
// ErrPortInUse and leaves nothing behind, and so does a single launch.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	s := launch(t, Options{})
	if s.ServerID != 1 {
		t.Errorf("default ServerID %d, want 1", s.ServerID)
	}

	parent := t.TempDir()
	_, err := Launch(t.Context(), Options{Dir: parent, Port: s.Port})
	if !errors.Is(err, ErrPortInUse) {
		t.Errorf("Launch on the port of a running server: %v, want ErrPortInUse", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := s.launch(t.Context()); !errors.Is(err, ErrPortInUse) {
		_ = s.Kill()
		t.Fatalf("launch on a taken port: %v, want ErrPortInUse", err)
	}
	releasePort(s.Port) // as if another process held it
	_, err = Launch(t.Context(), Options{Dir: parent, Port: s.Port})
	if !errors.Is(err, ErrPortInUse) {
		t.Errorf("Launch on a port taken by another process: %v, want ErrPortInUse", err)
	}
	claimPort(s.Port)
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("failed Launches left %v in %s", left, parent)
	}
}

// A cancelled context stops a Launch and leaves nothing behind.
func TestLaunchCancelled(t *testing.T) {
	t.Parallel()
	skipShort(t) // Prepare runs mariadb-install-db
	if err := Prepare(t.Context()); errors.Is(err, ErrNoServer) && os.Getenv("CI") != "true" {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	parent := t.TempDir()
	if s, err := Launch(ctx, Options{Dir: parent}); !errors.Is(err, context.Canceled) {
		if err == nil {
			_ = s.Remove()
		}
		t.Fatalf("Launch with a cancelled context: %v, want context.Canceled", err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("failed Launch left %v in %s", left, parent)
	}
}

func TestOptionsValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero Options: %v", err)
	}
	err := Options{Port: 70000, Dir: file}.Validate()
	if err == nil || !strings.Contains(err.Error(), "70000") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("bad port and dir: got %v, want both reported", err)
	}
}

// ErrNoServer names the fix.
func TestErrNoServer(t *testing.T) {
	if !strings.Contains(ErrNoServer.Error(), "apt-get install mariadb-server") {
		t.Fatalf("ErrNoServer = %q, does not name the fix", ErrNoServer)
	}
}

// A failed mariadb-install-db shows the error, not the advice after it.
func TestErrorLines(t *testing.T) {
	out := []byte("note 1\n[ERROR] cause\n[ERROR] Aborting\n\nadvice 1\nadvice 2\n")
	if got, want := errorLines(out, 2), "[ERROR] cause\n[ERROR] Aborting"; got != want {
		t.Errorf("errorLines = %q, want %q", got, want)
	}
	if got, want := errorLines([]byte("a\nb\nc\n"), 2), "b\nc"; got != want {
		t.Errorf("errorLines without errors = %q, want %q", got, want)
	}
}
