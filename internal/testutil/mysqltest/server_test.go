package mysqltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/internal/mariadb"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// Several servers at once must come up independently: own port, own server
// id, binary log on in ROW format.
func TestStartNConcurrent(t *testing.T) {
	t.Parallel()
	servers := StartN(t, 3)
	ids := map[uint32]bool{}
	ports := map[int]bool{}
	for _, s := range servers {
		got := s.Query(t, "SELECT @@server_id, @@log_bin, @@binlog_format, @@binlog_row_image, @@port")
		want := []string{strconv.Itoa(int(s.ServerID)), "1", "ROW", "FULL", strconv.Itoa(s.Port)}
		if len(got) != 1 || !slices.Equal(got[0], want) {
			t.Errorf("%s: got %q, want %q", s.Addr(), got, want)
		}
		if ids[s.ServerID] || ports[s.Port] {
			t.Errorf("%s: server id %d or port %d used twice", s.Addr(), s.ServerID, s.Port)
		}
		ids[s.ServerID], ports[s.Port] = true, true
		if s.ServerID < firstServerID {
			t.Errorf("%s: default server id %d below %d", s.Addr(), s.ServerID, firstServerID)
		}
		if got := s.Query(t, "SHOW VARIABLES LIKE 'log_bin'"); len(got) != 1 || got[0][1] != "ON" {
			t.Errorf("%s: log_bin = %q, want ON", s.Addr(), got)
		}
	}
}

// Options reach the command line and override the defaults.
func TestOptions(t *testing.T) {
	t.Parallel()
	s := Start(t, WithServerID(4242), WithArgs("--binlog-format=STATEMENT"), WithArgs("--binlog-row-image=MINIMAL"))
	got := s.Query(t, "SELECT @@server_id, @@binlog_format, @@binlog_row_image")
	want := []string{"4242", "STATEMENT", "MINIMAL"}
	if s.ServerID != 4242 || len(got) != 1 || !slices.Equal(got[0], want) {
		t.Fatalf("ServerID %d, variables %q; want 4242, %q", s.ServerID, got, want)
	}
}

// A server without binary log has no master status; the option must win
// over the default --log-bin.
func TestSkipLogBin(t *testing.T) {
	t.Parallel()
	s := Start(t, WithArgs("--skip-log-bin"))
	if got := s.Query(t, "SELECT @@log_bin"); len(got) != 1 || got[0][0] != "0" {
		t.Fatalf("@@log_bin = %q, want 0", got)
	}
}

// Exec keeps one session: SET timestamp applies to the INSERT after it.
// Query shows NULL as "NULL".
func TestExecSessionAndQuery(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Exec(t,
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id INT PRIMARY KEY, at TIMESTAMP NULL, note VARCHAR(10) NULL, f DOUBLE)",
		"SET timestamp = 1700000000",
		"INSERT INTO d.t VALUES (1, NOW(), NULL, 1.5), (2, NULL, 'é', 1e6)",
	)
	got := s.Query(t, "SELECT id, UNIX_TIMESTAMP(at), note, f FROM d.t ORDER BY id")
	want := [][]string{{"1", "1700000000", "NULL", "1.5"}, {"2", "NULL", "é", "1000000"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := s.Query(t, "DO 1"); got != nil {
		t.Fatalf("statement without result set: got %q, want nil", got)
	}
}

// Restart keeps the port, the data and the binary logs; so does a restart
// after SIGKILL, for committed transactions.
func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	s := Start(t)
	port := s.Port
	s.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (1)")
	file1, pos1 := s.MasterStatus(t)

	s.Restart(t)
	if s.Port != port {
		t.Fatalf("port changed from %d to %d", port, s.Port)
	}
	file2, _ := s.MasterStatus(t)
	if file2 <= file1 {
		t.Fatalf("binlog after restart %s, want one after %s", file2, file1)
	}
	logs := s.Query(t, "SHOW BINARY LOGS")
	if len(logs) < 2 || logs[0][0] != file1 || atoi(logs[0][1]) < int(pos1) {
		t.Fatalf("SHOW BINARY LOGS = %q, want %s (size >= %d) kept", logs, file1, pos1)
	}

	s.Exec(t, "INSERT INTO d.t VALUES (2)")
	s.Kill(t)
	s.Kill(t) // idempotent
	s.Restart(t)
	if got := s.Query(t, "SELECT id FROM d.t ORDER BY id"); !slices.EqualFunc(got, [][]string{{"1"}, {"2"}}, slices.Equal) {
		t.Fatalf("rows after kill and restart: %q", got)
	}

	s.Stop(t)
	s.Stop(t) // idempotent
	if _, err := client.Connect(s.Addr(), "root", "", ""); err == nil {
		t.Fatal("stopped server accepts connections")
	}
	s.Restart(t)
	if got := s.Query(t, "SELECT COUNT(*) FROM d.t"); got[0][0] != "2" {
		t.Fatalf("rows after stop and restart: %q", got)
	}
}

// Restart waits for a taken port to come free. (That a taken port is
// recognised as such is tested in internal/mariadb.)
func TestRestartWhilePortTaken(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Stop(t)
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// Free the port once the server has failed to bind it at least once.
	before, _ := os.ReadFile(s.srv.ErrorLog)
	freed := make(chan struct{})
	go func() {
		defer close(freed)
		defer l.Close()
		retry.Wait(context.Background(), 30*time.Second, func() error {
			log, _ := os.ReadFile(s.srv.ErrorLog)
			log = log[min(len(before), len(log)):]
			if bytes.Contains(log, []byte("Address already in use")) ||
				bytes.Contains(log, []byte("Bind on TCP/IP port")) {
				return nil
			}
			return errors.New("no bind error in the log")
		})
	}()
	s.Restart(t)
	<-freed
	if got := s.Query(t, "SELECT @@port"); got[0][0] != strconv.Itoa(s.Port) {
		t.Fatalf("@@port = %q, want %d", got, s.Port)
	}
}

// CreateUser makes an account that logs in with its password only, and may
// read the binary log status.
func TestCreateUser(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.CreateUser(t, "cdc", "s3cret'\\x")
	c, err := client.Connect(s.Addr(), "cdc", "s3cret'\\x", "")
	if err != nil {
		t.Fatalf("login with password: %v", err)
	}
	defer c.Close()
	r, err := c.Execute("SHOW MASTER STATUS")
	if err != nil {
		t.Fatalf("SHOW MASTER STATUS as cdc: %v", err)
	}
	if r.RowNumber() != 1 {
		t.Fatalf("SHOW MASTER STATUS as cdc: %d rows", r.RowNumber())
	}
	r.Close()
	if _, err := c.Execute("CREATE DATABASE nope"); err == nil {
		t.Error("cdc user may create databases; want only replication privileges")
	}
	if c, err := client.Connect(s.Addr(), "cdc", "wrong", ""); err == nil {
		c.Close()
		t.Fatal("login with a wrong password succeeded")
	}
}

// FlushLogs starts a new binary log; PurgeLogsTo removes the ones before.
func TestFlushAndPurgeLogs(t *testing.T) {
	t.Parallel()
	s := Start(t)
	file1, _ := s.MasterStatus(t)
	s.FlushLogs(t)
	file2, pos2 := s.MasterStatus(t)
	if file2 <= file1 || pos2 == 0 {
		t.Fatalf("after flush: %s:%d, want a file after %s", file2, pos2, file1)
	}
	s.PurgeLogsTo(t, file2)
	if got := s.Query(t, "SHOW BINARY LOGS"); len(got) != 1 || got[0][0] != file2 {
		t.Fatalf("SHOW BINARY LOGS after purge = %q, want only %s", got, file2)
	}
}

// Conn hands out independent root sessions.
func TestConn(t *testing.T) {
	t.Parallel()
	s := Start(t)
	a, b := s.Conn(t), s.Conn(t)
	if a.GetConnectionID() == b.GetConnectionID() {
		t.Fatal("two Conns share a session")
	}
	if err := a.Ping(); err != nil {
		t.Fatal(err)
	}
	b.Close() // closing early is fine; Cleanup closes again
}

// Without a server binary a test skips locally and fails in CI, and says how
// to fix it either way.
func TestMissingServer(t *testing.T) {
	for _, c := range []struct {
		ci       string
		wantSkip bool
	}{{"", true}, {"false", true}, {"true", false}} {
		t.Setenv("CI", c.ci)
		r := &recordTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			failSetup(r, mariadb.ErrNoServer)
		}()
		<-done
		msg := r.skipped + r.fatal
		if (r.skipped != "") != c.wantSkip || (r.fatal != "") == c.wantSkip {
			t.Errorf("CI=%q: skipped %q, fatal %q; want skip %v", c.ci, r.skipped, r.fatal, c.wantSkip)
		}
		if !strings.Contains(msg, "apt-get install mariadb-server") {
			t.Errorf("CI=%q: message %q does not name the fix", c.ci, msg)
		}
	}
}

// recordTB records Skip and Fatal instead of acting on them; both end the
// calling goroutine, as the real ones do.
type recordTB struct {
	testing.TB
	skipped, fatal string
}

func (r *recordTB) Helper() {}

func (r *recordTB) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recordTB) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestVersionAtLeast(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{
		{"8.4.3", true}, {"8.2.0-log", true}, {"8.0.36", false}, {"9.1.0", true}, {"5.7.44-log", false}, {"x", false},
	} {
		if got := versionAtLeast(c.v, 8, 2); got != c.want {
			t.Errorf("versionAtLeast(%q, 8, 2) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestQuote(t *testing.T) {
	if got, want := quote(`a'b\c`), `'a\'b\\c'`; got != want {
		t.Fatalf("quote = %s, want %s", got, want)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
