package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The demo's braid server child processes.

// demoNode is one braid server process of the demo, and its restarts.
type demoNode struct {
	name, dir, logPath        string
	raft, gossip, http, canal int
	args                      []string // the command line but the binary
	cmd                       *exec.Cmd
	exited                    chan struct{} // closed when the process exits
	waitErr                   error         // how it exited, once exited is closed
}

func (n *demoNode) url() string { return "http://127.0.0.1:" + strconv.Itoa(n.http) }

func (n *demoNode) pid() int { return n.cmd.Process.Pid }

// start runs the node; when its process exits, the exit is sent on deaths
// (which has room: a node has at most one exit not yet read).
func (n *demoNode) start(bin string, deaths chan<- nodeExit) error {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s braid demo starts %s %s\n", time.Now().Format(time.StampMilli), bin, strings.Join(n.args, " "))
	cmd := exec.Command(bin, n.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting node %s: %w", n.name, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.waitErr = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		f.Close()
		n.waitErr = err
		close(exited)
		select {
		case deaths <- nodeExit{node: n, err: err}:
		default:
		}
	}()
	return nil
}

// running reports whether the node's process runs.
func (n *demoNode) running() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// exitErr is how the process exited; call after running reports false.
func (n *demoNode) exitErr() error {
	if n.exited == nil {
		return errors.New("never started")
	}
	<-n.exited
	if n.waitErr == nil {
		return errors.New("exit status 0")
	}
	return n.waitErr
}

// stop sends SIGTERM and, after grace, SIGKILL; it reports whether it had
// to kill.
func (n *demoNode) stop(grace time.Duration) bool {
	if !n.running() {
		return false
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-n.exited:
		return false
	case <-t.C:
		_ = n.cmd.Process.Kill()
		<-n.exited
		return true
	}
}

// logTail returns the last n lines of the node's log.
func (n *demoNode) logTail(lines int) string {
	b, _ := os.ReadFile(n.logPath)
	l := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return string(bytes.Join(l[max(0, len(l)-lines):], []byte("\n")))
}
