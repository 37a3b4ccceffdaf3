package localcluster_test

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNodeLifecycle runs a one-node cluster of the real binary through
// what the demo and the tests do to nodes: it forms, is killed (OnExit
// tells), starts again on its data directory, stops on SIGTERM, and a
// stalled node is killed after the grace period.
func TestNodeLifecycle(t *testing.T) {
	bin := braidproc.Binary(t)
	c, err := localcluster.New(bin, t.TempDir(), 1, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := c.Nodes[0]
	exits := make(chan error, 4)
	n.OnExit = func(err error) { exits <- err }
	if _, err := c.LiveStatus(t.Context()); err == nil || !strings.Contains(err.Error(), "no node runs") {
		t.Errorf("status before the start: %v", err)
	}
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bin, nil); err == nil {
		t.Error("a second start of a running node: no error")
	}
	ready := func() {
		t.Helper()
		if err := c.WaitReady(t.Context(), time.Minute); err != nil {
			t.Fatalf("%v\n%s", err, n.LogTail(30))
		}
	}
	ready()
	st, err := c.LiveStatus(t.Context())
	if ok, desc := localcluster.Ready(st, 1); err != nil || !ok || st.Node != "n1" {
		t.Fatalf("status: %v %s", err, desc)
	}

	pid := n.PID()
	n.Kill()
	if err := <-exits; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("OnExit after Kill: %v", err)
	}
	if n.Running() {
		t.Error("running after Kill")
	}
	if err := c.Restart(n); err != nil {
		t.Fatal(err)
	}
	ready()
	if n.PID() == pid {
		t.Error("the restart kept the old process id")
	}

	// SIGTERM: a clean exit, nothing to kill.
	if killed := c.Stop(20 * time.Second); len(killed) != 0 {
		t.Errorf("Stop killed %d nodes", len(killed))
	}
	if err := <-exits; err != nil {
		t.Errorf("exit on SIGTERM: %v", err)
	}
	if got := strings.Count(n.LogTail(10000), "=== "); got != 2 {
		t.Errorf("the log has %d start lines, want 2", got)
	}

	// A stalled node ignores SIGTERM: it is killed after the grace period.
	if err := c.Restart(n); err != nil {
		t.Fatal(err)
	}
	ready()
	if err := n.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if killed := c.Stop(500 * time.Millisecond); len(killed) != 1 || killed[0] != n {
		t.Errorf("Stop of a stalled node killed %v", killed)
	}
	if err := <-exits; err == nil {
		t.Errorf("a killed node exited cleanly:\n%s", n.LogTail(20))
	}
	if err := n.Signal(syscall.SIGCONT); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal to an exited node: %v, want os.ErrProcessDone", err)
	}
}

// TestStartUpPortTaken: a node whose port another process took between
// New and its start exits, and StartUp says so at once with ErrPortTaken
// (which Start answers with fresh ports) instead of waiting a minute for
// a cluster that cannot form.
func TestStartUpPortTaken(t *testing.T) {
	bin := braidproc.Binary(t)
	c, err := localcluster.New(bin, t.TempDir(), 2, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Nodes[1].CanalPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = c.StartUp(t.Context())
	if !errors.Is(err, localcluster.ErrPortTaken) || !strings.Contains(err.Error(), "n2") {
		t.Fatalf("StartUp with n2's canal port taken: %v", err)
	}
	if live := c.Live(); len(live) != 0 {
		t.Errorf("%d nodes still run after StartUp failed", len(live))
	}

	c2, err := localcluster.Start(t.Context(), bin, t.TempDir(), 1, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
}
