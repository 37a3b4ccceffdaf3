package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/api/metrics"
	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/destination"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/netlimit"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// serveOptions are the consumer servers capture runs instead of printing.
type serveOptions struct {
	listen    string // address to listen on
	httpPort  int    // native HTTP API; 0: off
	canalPort int    // canal's TCP protocol; 0: off
	maxConns  int    // connections each port serves at once (netlimit)
	// canalUser and canalPassword authenticate canal clients; no user
	// accepts every client (with a warning at start).
	canalUser, canalPassword string
	// users, from --users-file, authenticate the HTTP API's callers (and
	// canal's, instead of canalUser); nil: every caller is let in, which
	// checkExposed allows on loopback only.
	users *auth.Users
	// httpHosts are --http-host: names the HTTP port answers to beyond
	// localhost, the hostname and listen.
	httpHosts []string
}

func (o serveOptions) enabled() bool { return o.httpPort > 0 || o.canalPort > 0 }

// canalPasswordEnv holds the password of --canal-user when no
// --canal-password-file is given.
const canalPasswordEnv = "BRAID_CANAL_PASSWORD"

// canalLogin is the canal account a serving command (capture, server)
// takes: --canal-user, with its password read from --canal-password-file
// or, without that flag, from $BRAID_CANAL_PASSWORD. Never from the
// command line, which every local user can read in /proc/PID/cmdline.
type canalLogin struct {
	user         string
	passwordFile string
}

// addCanalLoginFlags defines --canal-user (described by userUsage) and
// --canal-password-file on fs.
func addCanalLoginFlags(fs *flag.FlagSet, userUsage string) *canalLogin {
	l := &canalLogin{}
	fs.StringVar(&l.user, "canal-user", "", userUsage)
	fs.StringVar(&l.passwordFile, "canal-password-file", "", "file holding the password of --canal-user (a trailing newline is trimmed); without it, $"+canalPasswordEnv+" holds the password")
	return l
}

// password returns the password of l.user: the content of l.passwordFile
// without trailing newlines, or else getenv(canalPasswordEnv). No user
// needs no password (and $BRAID_CANAL_PASSWORD is then ignored). Its error
// is a usage error of one line that names the flag and says what to do.
func (l *canalLogin) password(getenv func(string) string) (string, error) {
	if l.passwordFile != "" {
		if l.user == "" {
			return "", fmt.Errorf("--canal-password-file %s: it is the password of --canal-user, which is not set: give --canal-user too, or neither to accept every canal client", l.passwordFile)
		}
		b, err := os.ReadFile(l.passwordFile)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("--canal-password-file %s: %v: give a file braid can read that holds the password of --canal-user", l.passwordFile, err)
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return "", fmt.Errorf("--canal-password-file %s is empty: write the password of --canal-user into it", l.passwordFile)
		}
		return pw, nil
	}
	if l.user == "" {
		return "", nil
	}
	pw := getenv(canalPasswordEnv)
	if pw == "" {
		return "", fmt.Errorf("--canal-user %s needs a password: give --canal-password-file FILE (a file holding it) or set %s", l.user, canalPasswordEnv)
	}
	return pw, nil
}

// refuseCanalPasswordFlag reports whether args hold the removed
// --canal-password flag (-canal-password, --canal-password=P), after
// saying on stderr what to use instead. It is not a flag of the FlagSet,
// so --help does not show it.
func refuseCanalPasswordFlag(cmd string, args []string, stderr io.Writer) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		if name == "canal-password" {
			fmt.Fprintf(stderr, "braid %s: --canal-password is no longer accepted (a password on the command line is readable by every local user): use --canal-password-file FILE or set %s instead\n", cmd, canalPasswordEnv)
			return true
		}
	}
	return false
}

// serve runs the destination into a store and serves it to consumers until
// ctx ends.
func serve(ctx context.Context, spec *spec.Spec, opt serveOptions, log *slog.Logger) error {
	// A consumer starting at earliest replays from the spec's start: a
	// `latest` there must name one position for this whole run.
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	err := group.PinStarts(pctx, spec)
	pcancel()
	if err != nil {
		return err
	}
	// The spec's sinks run here too. Their cursors, like the consumers',
	// are kept in memory: a new run reads from the spec's start, and each
	// target's checkpoints skip what it applied before.
	cfg := destination.Config{Spec: spec, Keep: &group.MemKeeper{}, Serve: true, CheckSinks: true, Logger: log}
	return destination.Run(ctx, cfg, func(ctx context.Context, r *destination.Running) error {
		return serveRunning(ctx, spec, r, opt, log)
	})
}

// serveRunning serves r to consumers on opt's ports until ctx ends or
// the pipeline ends.
func serveRunning(ctx context.Context, spec *spec.Spec, r *destination.Running, opt serveOptions, log *slog.Logger) error {
	p, sinks := r.Pipeline, r.Sinks
	reg := stream.NewRegistry()
	reg.Add(r.Served)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	errs := make(chan error, 2)
	if opt.httpPort > 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(opt.listen, strconv.Itoa(opt.httpPort)))
		if err != nil {
			return fmt.Errorf("http port: %w: is another process using it? choose another with --http-port", err)
		}
		l = netlimit.Listen(l, opt.maxConns, log.With("port", "http"))
		admin := native.WithSinks(func(dest string) native.SinkAdmin {
			if dest == spec.Name {
				return sinks
			}
			return nil
		})
		browsers, err := native.NewBrowsers(native.BrowserRules{Listen: opt.listen, Hosts: opt.httpHosts, HostHint: httpHostHint("capture"), Logger: log.With("port", "http")})
		if err != nil {
			return fmt.Errorf("--%s: %w", httpHostFlag, err)
		}
		mux := http.NewServeMux()
		captureHealth(mux, spec.Name, pipelineReady(ctx, p.Done(), p.Err))
		mux.Handle("/", usersGuard(opt.users, metrics.Mount(native.NewHandler(reg, log, admin), metrics.RegistryHandler(reg)), log))
		srv := native.NewServer(browsers.Wrap(mux))
		log.Info("serving the native API", "addr", "http://"+l.Addr().String(), "dest", spec.Name)
		wg.Go(func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			srv.Shutdown(sctx)
			srv.Close() // streams are long-lived: do not wait for them
		})
	}
	if opt.canalPort > 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(opt.listen, strconv.Itoa(opt.canalPort)))
		if err != nil {
			return fmt.Errorf("canal port: %w: is another process (a canal server?) using it? choose another with --canal-port", err)
		}
		l = netlimit.Listen(l, opt.maxConns, log.With("port", "canal"))
		srv := canal.NewServer(canal.Config{Registry: reg, User: opt.canalUser, Password: opt.canalPassword, Login: canalUsers(opt.users), Logger: log})
		log.Info("serving canal's protocol", "addr", l.Addr().String(), "dest", spec.Name)
		wg.Go(func() {
			if err := srv.Serve(ctx, l); err != nil {
				errs <- err
			}
		})
	}
	select {
	case <-ctx.Done():
		return nil
	case <-p.Done():
		return p.Err() // nil only when ctx ended
	case err := <-errs:
		return err
	}
}
