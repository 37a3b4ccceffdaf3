package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/destination"
	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/netlimit"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// errEnough ends a capture that printed --max messages.
var errEnough = errors.New("enough messages")

func runCapture(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "destination spec file (YAML or JSON; see docs/spec.md)")
	maxMsgs := fs.Int("max", 0, "exit after printing this many messages (0: no limit)")
	timeout := fs.Duration("timeout", 0, "exit after this long, e.g. 30s (0: no limit)")
	logLevel := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	cursorDir := fs.String("cursor-dir", "", "keep the stream's cursor (and each sink's) in this directory and resume from it on the next run")
	quiet := fs.Bool("quiet", false, "print no stream: only apply the spec's sinks (needs --cursor-dir)")
	httpPort := fs.Int("http-port", 0, "serve the stream over braid's native HTTP API on this port instead of printing it (read it with braid tail)")
	canalPort := fs.Int("canal-port", 0, "serve the stream over canal's TCP protocol on this port instead of printing it (canal clients; 11111 is canal's)")
	maxConns := fs.Int("max-connections", netlimit.DefaultMax, "with --http-port or --canal-port: connections each port serves at once; past it new ones are closed and those served go on")
	canalAccount := addCanalLoginFlags(fs, "user canal clients must log in as (default: accept every client, with a warning)")
	listen := fs.String("listen", "127.0.0.1", "address the --http-port and --canal-port servers listen on (beyond loopback, --http-port needs --users-file)")
	usersFile := fs.String("users-file", "", "with --http-port or --canal-port: YAML file of the users who may call them, with their roles, as braid server's (see braid users); required for --http-port beyond loopback")
	httpHosts := addHTTPHostFlag(fs, "--listen")
	useSandbox := fs.Bool("sandbox", false, "start two throwaway MariaDB shard servers with a small order workload, routed to one logical table, and capture them (needs mariadbd installed)")
	var refFlags secretRefFlags
	refFlags.add(fs, "directory a spec's password_file may read from besides the spec file's own; comma-separated or repeated")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: braid capture -f spec.yaml [--max N] [--timeout D]")
		fmt.Fprintln(stderr, "       braid capture --sandbox [--max N] [--timeout D]")
		fmt.Fprintln(stderr, "       braid capture -f spec.yaml [--http-port 8081] [--canal-port 11111] [--listen ADDR] [--users-file FILE]   # serve instead of printing")
		fmt.Fprintln(stderr, "\nReads the binlogs of the destination's sources, merges their transactions in")
		fmt.Fprintln(stderr, "commit order (ordering: strict) and prints row changes and DDL as canal")
		fmt.Fprintln(stderr, "flat-message JSON lines on stdout, or serves them to consumers with --canal-port")
		fmt.Fprintln(stderr, "and --http-port; logs go to stderr. Ctrl-C stops it.")
		fmt.Fprintln(stderr, "\nA source's address may list its servers, [db1:3306, db2:3306]: braid reads the")
		fmt.Fprintln(stderr, "first that answers (read_from: primary, the default, prefers a writable one;")
		fmt.Fprintln(stderr, "replica a read_only one) and, once it has lost it for failover_after (default")
		fmt.Fprintln(stderr, "10s), another, resuming there by GTID (docs/sources.md).")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if refuseCanalPasswordFlag("capture", args, stderr) {
		return 2
	}
	if code, ok := parseFlags(fs, args, stderr, false); !ok {
		return code
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "braid capture:", err)
		return 2
	}
	canalPassword, err := canalAccount.password(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "braid capture:", err)
		return 2
	}
	so := serveOptions{listen: *listen, httpPort: *httpPort, canalPort: *canalPort, maxConns: *maxConns, canalUser: canalAccount.user, canalPassword: canalPassword,
		httpHosts: *httpHosts}
	if *usersFile != "" {
		if so.users, err = auth.LoadUsers(*usersFile); err != nil {
			fmt.Fprintln(stderr, "braid capture: --users-file:", oneLine(err))
			return 2
		}
	}
	if err := checkExposed(so); err != nil {
		fmt.Fprintln(stderr, "braid capture:", err)
		return 2
	}
	if (*file == "") == !*useSandbox {
		fmt.Fprintln(stderr, "braid capture: give a spec with -f spec.yaml (docs/spec.md has the format), or --sandbox to try braid on two throwaway MariaDB shards")
		return 2
	}

	ctx, stop := signalContext()
	defer stop()
	// A closed standard output is an error capture reports (EPIPE), not a
	// signal that kills it without a word.
	signal.Ignore(syscall.SIGPIPE)
	var ds *spec.Spec
	if *useSandbox {
		sb, s, err := startSandbox(ctx, log)
		if err != nil {
			fmt.Fprintln(stderr, "braid capture:", oneLine(err))
			return 1
		}
		defer sb.close()
		ds = s
	} else {
		ds, err = spec.Load(*file)
		if err != nil {
			fmt.Fprintln(stderr, "braid capture:", oneLine(err))
			return 2
		}
		// The spec is the operator's own file: its password files may sit
		// beside it, or in a --secrets-dir.
		refs, err := refFlags.refs(fs, specDir(*file))
		if err == nil {
			var resolved spec.Spec
			if resolved, err = refs.Resolve(*ds); err == nil {
				ds = &resolved
			}
		}
		if err != nil {
			for _, line := range errorLines(err) {
				fmt.Fprintln(stderr, "braid capture:", line)
			}
			return 2
		}
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	if so.enabled() {
		if err := serve(ctx, ds, so, log); err != nil {
			printProblems(stderr, "braid capture:", err)
			return 1
		}
		return 0
	}
	if err := capture(ctx, ds, stdout, captureOptions{max: *maxMsgs, cursorDir: *cursorDir, quiet: *quiet}, log); err != nil {
		printProblems(stderr, "braid capture:", err)
		return 1
	}
	return 0
}

// printProblems prints err to w behind prefix: one line per problem when
// it joins several (every source's start-up check), else on one line.
func printProblems(w io.Writer, prefix string, err error) {
	if _, ok := err.(interface{ Unwrap() []error }); !ok {
		fmt.Fprintln(w, prefix, oneLine(err))
		return
	}
	for _, line := range errorLines(err) {
		if line = strings.TrimSpace(line); line != "" {
			fmt.Fprintln(w, prefix, line)
		}
	}
}

// captureOptions are capture's flags beyond the spec.
type captureOptions struct {
	max       int    // exit after this many messages (0: no limit)
	cursorDir string // keep the cursor here and resume from it ("": do not)
	quiet     bool   // print nothing: run the sinks only
}

// cursorEvery is how often capture saves its cursor while streaming: a
// crash repeats at most this much of the stream (same seqs), and the cursor
// is written in batches, not per transaction.
const cursorEvery = 500 * time.Millisecond

// capture streams the destination to w until ctx ends or max messages.
func capture(ctx context.Context, spec *spec.Spec, w io.Writer, opt captureOptions, log *slog.Logger) error {
	if len(spec.Sinks) > 0 && opt.cursorDir == "" {
		return errors.New("the spec has sinks, whose cursors need a place: give --cursor-dir DIR")
	}
	if opt.quiet && len(spec.Sinks) == 0 {
		return errors.New("--quiet prints nothing and the spec has no sinks: add sinks, or leave out --quiet")
	}
	// Every source's start-up check before any reader starts, so that
	// the problems of all sources are printed together, not the first
	// reader's alone. Each reader starts on its source's checked
	// connection, held for it in package binlog (CheckAndHold).
	release, err := checkSources(ctx, spec)
	defer release()
	if err != nil {
		return err
	}
	// Without --cursor-dir nothing outlives the run.
	var keep group.Keeper = &group.MemKeeper{}
	if opt.cursorDir != "" {
		// The cursors, the snapshot's chunks and the shard-DDL decisions
		// are kept in the directory, so that a restart goes on where this
		// run stopped, each chunk where it went.
		keep = group.NewFileKeeper(opt.cursorDir, spec.Name)
	}
	defer keep.Close()
	// The merge fills a bounded store; the printer is one client, printing
	// batches and acking them once they are flushed, and each sink another.
	cfg := destination.Config{Spec: spec, Keep: keep, CheckSinks: true, KeepEvery: cursorEvery, Logger: log}
	if opt.quiet {
		return destination.Run(ctx, cfg, func(ctx context.Context, r *destination.Running) error {
			select {
			case <-ctx.Done():
				return nil
			case <-r.Pipeline.Done():
				return r.Pipeline.Err()
			}
		})
	}
	cfg.Own = []string{printerID}
	return destination.Run(ctx, cfg, func(ctx context.Context, r *destination.Running) error {
		return printStream(ctx, r.Pipeline, w, opt.max, keep)
	})
}

// checkSources runs the start-up check of every source of ds at once
// (binlog.CheckAndHold): every problem of every source, one line each.
// The checked connections are held for the readers to start on; the
// caller releases those no reader took.
func checkSources(ctx context.Context, ds *spec.Spec) (release func(), err error) {
	reports, release := binlog.CheckAndHold(ctx, ds.Name, ds.Sources)
	var errs []error
	for _, r := range reports {
		errs = append(errs, r.Problems())
	}
	return release, errors.Join(errs...)
}

// printerID is the store client capture prints as, and keeps the cursor
// of.
const printerID = "capture"

// printerRefused is the error of the printer refused before an accepted
// loss (stream.ErrBeforeLoss): its line names capture's fix alone, not
// a consumer's (braid consumer drop does not apply to capture).
func printerRefused(err error) error {
	var bl *stream.BeforeLossError
	if !errors.As(err, &bl) {
		return err
	}
	e := *bl // the store's, shared by every read: not changed
	e.Fix = fmt.Sprintf("braid capture prints as client id %s: remove its cursor file, *.%s.cursor.json in --cursor-dir, to print from where the destination resumes",
		printerID, printerID)
	return &e
}

// batchEvents is how many events the printer takes from the store at
// most at a time, firstBatch how many at first (printStream).
const (
	batchEvents = 1024
	firstBatch  = 16
)

// printStream prints p's stream to w as client printerID until ctx ends, the
// pipeline ends or max messages (0: no limit), keeping the cursor of what
// w was given in keep.
func printStream(ctx context.Context, p *stream.Pipeline, w io.Writer, max int, keep group.Keeper) error {
	store := p.Store
	growPipe(w)
	gone := readerGone(w)
	out := newOutput(w)
	fw := &flat.Writer{Markers: true}
	workers := runtime.GOMAXPROCS(0)
	printed := 0
	line := func(b []byte) error {
		if err := out.line(b); err != nil {
			return fmt.Errorf("%w: %w", errOutput, err)
		}
		printed++
		if max > 0 && printed >= max {
			return errEnough
		}
		return nil
	}
	left := func() int {
		if max <= 0 {
			return 0
		}
		return max - printed
	}
	var saved time.Time
	var last *group.Cursor // the mark of the last transaction formatted whole
	save := func() error {
		cursor := out.written.Load()
		if cursor == nil {
			return nil
		}
		saved = time.Now()
		return keep.SaveCursor(printerID, cursor)
	}
	// finish writes what is left, then saves the cursor after it: after
	// what was written, should the write fail.
	finish := func() error {
		err := out.close(last)
		if serr := save(); serr != nil {
			return errors.Join(err, serr)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errOutput, err)
		}
		return nil
	}
	// fail ends the print on err, keeping the cursor after the last
	// transaction written whole first: the README promises the cursor is
	// saved at exit, and a source or output error is an exit too. Without
	// it the cursor was the last periodic save's, up to cursorEvery behind
	// what was printed, and a restart printed those seqs again. Lines not
	// yet handed to the writer (a batch that failed to format) are
	// dropped: the cursor is never ahead of the output.
	fail := func(err error) error {
		out.abort()
		if serr := save(); serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	// The first batches are small: a batch's lines go out once it is
	// formatted whole, and a catch-up's first batch of 1024 events (tens
	// of thousands of row changes) kept the first row back about 190 ms
	// on a loaded two-core machine. From firstBatch events the size grows
	// fourfold a batch to batchEvents.
	size := firstBatch
	for {
		b, err := store.Get(ctx, printerID, size, 200*time.Millisecond)
		if errors.Is(err, stream.ErrClosed) {
			if err := p.Err(); err != nil {
				return fail(err)
			}
			return finish()
		}
		if errors.Is(err, stream.ErrBeforeLoss) {
			// Refused for good: the stream from the printer's cursor
			// cannot be given again (the sinks go on with --quiet).
			return printerRefused(err)
		}
		if ctx.Err() != nil {
			return finish()
		}
		if b.ID < 0 {
			// Idle: nothing is written, so a reader that went away (the
			// end of `| head -5`) is found by asking the pipe.
			if gone() {
				return fail(fmt.Errorf("%w: the reader of standard output has gone", errOutput))
			}
			// A write that failed after the last batch is not left
			// waiting for the next one, which may never come.
			if err := out.failure(); err != nil {
				return fail(fmt.Errorf("%w: %w", errOutput, err))
			}
			continue
		}
		size = min(4*size, batchEvents)
		mark, enough, err := printBatch(fw, b, workers, left, line)
		if mark != nil {
			last = mark
		}
		if err != nil {
			return fail(err)
		}
		if enough {
			return finish()
		}
		if err := out.send(mark); err != nil {
			return fail(fmt.Errorf("%w: %w", errOutput, err))
		}
		// Formatted events are not needed from the store again: the
		// cursor saved is the writer's (out.written), never ahead of it.
		if err := store.Ack(printerID, b.ID); err != nil {
			return fail(err)
		}
		if time.Since(saved) >= cursorEvery {
			if err := save(); err != nil {
				return err
			}
		}
	}
}

// errOutput is wrapped when capture cannot write its standard output.
var errOutput = errors.New("output")

// signalContext is canceled by SIGINT or SIGTERM; a second signal exits at once.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
			return
		}
		select {
		case <-ch:
			os.Exit(130)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
	// go-sql-driver writes its few lines (a connection it dropped, a
	// packet out of order) to stderr through a package-level logger of
	// its own; route them through this one, so they have a level and
	// keys like every other line.
	_ = mysqldriver.SetLogger(driverLog{log})
	return log, nil
}

// driverLog is go-sql-driver's Logger over a *slog.Logger.
type driverLog struct{ log *slog.Logger }

func (d driverLog) Print(v ...any) {
	d.log.Warn("mysql driver: " + strings.TrimSpace(fmt.Sprint(v...)))
}
