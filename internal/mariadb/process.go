package mariadb

import (
	"bytes"
	"context"
	"errors"
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
		_ = p.kill()
		return fmt.Errorf("SIGTERM failed, killed: %w", err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
		_ = p.kill()
		return fmt.Errorf("no clean shutdown within %v, killed", grace)
	}
}

// kill sends SIGKILL and waits for the process to exit.
func (p *process) kill() error {
	err := p.cmd.Process.Kill()
	<-p.done
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// launch starts the server process and waits until it answers. On failure
// no process is left running, and the error wraps ErrPortInUse if the port
// was taken, which a retry may fix.
func (s *Server) launch(ctx context.Context) error {
	logf, err := os.OpenFile(s.ErrorLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	logStart, _ := logf.Seek(0, io.SeekEnd)
	cmd := exec.Command(s.env.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if s.log != nil {
		w := &teeWriter{file: logf, log: s.log}
		cmd.Stdout, cmd.Stderr = w, w
	}
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("mariadb: start %s: %w", s.env.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()

	if err := s.waitReady(ctx, p); err != nil {
		_ = p.kill()
		log, _ := os.ReadFile(s.ErrorLog)
		if int64(len(log)) >= logStart {
			log = log[logStart:]
		}
		if bytes.Contains(log, []byte("Address already in use")) ||
			bytes.Contains(log, []byte("Bind on TCP/IP port")) {
			err = fmt.Errorf("%v: %w", err, ErrPortInUse)
		}
		return fmt.Errorf("mariadb: server %s (server_id %d, %s) not ready: %w\n"+
			"command: %s %q\nerror log, last lines:\n%s",
			s.Addr(), s.ServerID, s.env.version, err, s.env.bin, s.args, tail(log, logTailLines))
	}
	s.proc = p
	return nil
}

// teeWriter copies the server's output to its error log file and to
// Options.Log. It never fails, so that the server never blocks on a full
// pipe because a writer gave up.
type teeWriter struct {
	file *os.File
	log  io.Writer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	_, _ = w.file.Write(b)
	_, _ = w.log.Write(b)
	return len(b), nil
}

// waitReady polls the server until it answers over TCP as itself, exits,
// readyTimeout passes or ctx is done.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.exited() {
			return fmt.Errorf("exited: %v", p.err)
		}
		lastErr := s.probe(rctx)
		if lastErr == nil {
			return nil
		}
		select {
		case <-p.done:
		case <-tick.C:
		case <-rctx.Done():
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%w (last probe: %v)", err, lastErr)
			}
			return fmt.Errorf("no answer within %v: %v", readyTimeout, lastErr)
		}
	}
}

// probe connects as root and checks that the server behind the port is this
// one, by its socket path.
func (s *Server) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c, err := client.ConnectWithContext(ctx, s.Addr(), "root", "", "", probeTimeout, withTimeouts(probeTimeout))
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
