package mysqltest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// process is one run of a server binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // how it exited; read after done is closed
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace for the process to exit, then kills it.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.exited() {
		p.kill()
		return fmt.Errorf("SIGTERM failed, killed: %w", err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
		p.kill()
		return fmt.Errorf("no clean shutdown within %v, killed", grace)
	}
}

// kill sends SIGKILL and waits for the process to exit.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// launch starts the server process and waits until it answers. On failure
// no process is left running; bindErr reports that the failure was the port
// being taken, which a retry can fix.
func (s *Server) launch() (bindErr bool, err error) {
	logf, err := os.OpenFile(s.errLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return false, fmt.Errorf("mysqltest: %w", err)
	}
	logStart, _ := logf.Seek(0, io.SeekEnd)
	cmd := exec.Command(s.env.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	err = cmd.Start()
	_ = logf.Close() // the child has its own copy
	if err != nil {
		return false, fmt.Errorf("mysqltest: start %s: %w", s.env.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	if err := s.waitReady(p); err != nil {
		p.kill()
		log, _ := os.ReadFile(s.errLog)
		if int64(len(log)) >= logStart {
			log = log[logStart:]
		}
		bindErr = bytes.Contains(log, []byte("Address already in use")) ||
			bytes.Contains(log, []byte("Bind on TCP/IP port"))
		return bindErr, fmt.Errorf("mysqltest: server %s (server_id %d, %s) not ready: %w\n"+
			"command: %s %q\nerror log %s, last lines:\n%s",
			s.Addr(), s.ServerID, s.env.version, err, s.env.bin, s.args, s.errLog, tail(log, logTailLines))
	}
	s.proc = p
	return false, nil
}

// waitReady polls the server until it answers over TCP as itself, exits, or
// readyTimeout passes.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for {
		if p.exited() {
			return fmt.Errorf("exited: %v", p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %v: %v", readyTimeout, lastErr)
		}
		if lastErr = s.probe(); lastErr == nil {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// probe connects as root and checks that the server behind the port is this
// one, by its socket path.
func (s *Server) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := client.ConnectWithContext(ctx, s.Addr(), "root", "", "", 2*time.Second, withTimeouts(2*time.Second))
	if err != nil {
		return err
	}
	defer quit(c)
	r, err := c.Execute("SELECT @@socket")
	if err != nil {
		return err
	}
	defer r.Close()
	sock, err := r.GetString(0, 0)
	if err != nil {
		return err
	}
	if sock != s.Socket {
		return fmt.Errorf("another server (socket %s) answers on port %d", sock, s.Port)
	}
	return nil
}

// withTimeouts bounds every read and write of a connection.
func withTimeouts(d time.Duration) client.Option {
	return func(c *client.Conn) error {
		c.ReadTimeout, c.WriteTimeout = d, d
		return nil
	}
}
