package localcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Node is one `braid server` process, of a Cluster or on its own. Its
// exported fields are set before the first Start.
type Node struct {
	// Name is the node's --name.
	Name string
	// Dir is the node's --data-dir; its log is Dir + ".log".
	Dir string
	// RaftPort, GossipPort, HTTPPort and CanalPort are the node's ports on
	// 127.0.0.1.
	RaftPort, GossipPort, HTTPPort, CanalPort int
	// RaftAdvertise and GossipAdvertise, when set, are where the other
	// nodes reach the node's Raft and gossip ports (--raft-advertise,
	// --gossip-advertise): a proxy in front of it.
	RaftAdvertise, GossipAdvertise string
	// Args are extra flags, after the ones Start gives (later flags win):
	// e.g. --bootstrap-expect 3, --log-level debug.
	Args []string
	// Security, when set, protects the node: its flags come before Args
	// (Security.NodeArgs). Without it the node runs unprotected, which it
	// refuses in a cluster of several unless Args hold --insecure.
	Security *Security
	// OnExit, when set, is called with how each process of the node
	// exited (cmd.Wait's error), on a goroutine of its own.
	OnExit func(err error)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	waitErr error         // how cmd exited, once exited is closed
}

// GossipAddr is where the other nodes reach the node's gossip.
func (n *Node) GossipAddr() string {
	if n.GossipAdvertise != "" {
		return n.GossipAdvertise
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.GossipPort))
}

// URL is the node's HTTP API.
func (n *Node) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", n.HTTPPort) }

// LogPath is the file the node's stderr and stdout go to, over restarts.
func (n *Node) LogPath() string { return n.Dir + ".log" }

// Start runs the node's process, joining the gossip addresses in join.
// A node that runs already is an error.
func (n *Node) Start(bin string, join []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !closed(n.exited) {
		return fmt.Errorf("localcluster: node %s runs already", n.Name)
	}
	args := []string{"server", "--name", n.Name, "--data-dir", n.Dir, "--addr", "127.0.0.1",
		"--raft-port", strconv.Itoa(n.RaftPort), "--gossip-port", strconv.Itoa(n.GossipPort),
		"--http-port", strconv.Itoa(n.HTTPPort), "--canal-port", strconv.Itoa(n.CanalPort),
		"--join", strings.Join(join, ","), "--log-level", "info"}
	if n.RaftAdvertise != "" {
		args = append(args, "--raft-advertise", n.RaftAdvertise)
	}
	if n.GossipAdvertise != "" {
		args = append(args, "--gossip-advertise", n.GossipAdvertise)
	}
	if n.Security != nil {
		sec, err := n.Security.NodeArgs(n.Name)
		if err != nil {
			return err
		}
		args = append(args, sec...)
	}
	args = append(args, n.Args...)
	f, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localcluster: node %s: %w", n.Name, err)
	}
	fmt.Fprintf(f, "=== %s start %v\n", time.Now().Format(time.StampMilli), args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = nodeProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("localcluster: node %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		f.Close()
		n.mu.Lock()
		n.waitErr = err
		n.mu.Unlock()
		close(exited)
		if n.OnExit != nil {
			n.OnExit(err)
		}
	}()
	n.cmd, n.exited, n.waitErr = cmd, exited, nil
	return nil
}

// ExitErr waits for the node's current process to exit and says how it
// did ("exit status 0" when it ended cleanly).
func (n *Node) ExitErr() error {
	exited := n.Exited()
	if exited == nil {
		return errors.New("never started")
	}
	<-exited
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waitErr == nil {
		return errors.New("exit status 0")
	}
	return n.waitErr
}

// Stop sends the node SIGTERM and, if it has not exited after grace,
// SIGKILL; it reports whether it had to kill.
func (n *Node) Stop(grace time.Duration) (killed bool) {
	if !n.Running() {
		return false
	}
	_ = n.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-n.Exited():
		return false
	case <-t.C:
		n.Kill()
		return true
	}
}

// Running reports whether the node's process runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !closed(n.exited)
}

// PID is the process id of the node's current (or last) process, 0 if it
// never started.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Signal sends sig to the node's current process: SIGSTOP and SIGCONT
// stall and resume it as a stuck machine would.
func (n *Node) Signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("localcluster: node %s never started", n.Name)
	}
	return cmd.Process.Signal(sig)
}

// Exited is closed when the node's current process has exited (nil before
// the node first starts).
func (n *Node) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exited
}

// Kill sends the node SIGKILL, as a crash would, and waits until its
// process is gone. Killing a node that does not run does nothing.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || closed(exited) {
		return
	}
	// SIGKILL first: a stopped process (SIGSTOP) that were resumed first
	// could run its handler of a SIGTERM sent before and exit cleanly. The
	// SIGCONT is for kernels that hold a stopped process's death until it
	// runs.
	_ = cmd.Process.Kill()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	<-exited
}

// LogTail returns the last lines of the node's log.
func (n *Node) LogTail(lines int) string {
	b, _ := os.ReadFile(n.LogPath())
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
