package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/braid-cdc/braid/engine"
)

// errEnough ends a capture that printed --max messages.
var errEnough = errors.New("enough messages")

func runCapture(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "destination spec file (YAML or JSON; see README)")
	maxMsgs := fs.Int("max", 0, "exit after printing this many messages (0: no limit)")
	timeout := fs.Duration("timeout", 0, "exit after this long, e.g. 30s (0: no limit)")
	logLevel := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	useSandbox := fs.Bool("sandbox", false, "start a throwaway MariaDB with a small order workload and capture it (needs mariadbd installed)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: braid capture -f spec.yaml [--max N] [--timeout D]")
		fmt.Fprintln(stderr, "       braid capture --sandbox [--max N] [--timeout D]")
		fmt.Fprintln(stderr, "\nReads the destination's source binlog and prints its row changes and DDL as")
		fmt.Fprintln(stderr, "canal flat-message JSON lines on stdout; logs go to stderr. Ctrl-C stops it.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "braid capture:", err)
		return 2
	}
	if (*file == "") == !*useSandbox {
		fmt.Fprintln(stderr, "braid capture: give a spec with -f spec.yaml (see README for the format), or --sandbox to try braid on a throwaway MariaDB")
		return 2
	}

	ctx, stop := signalContext()
	defer stop()
	var spec *engine.Spec
	if *useSandbox {
		sb, s, err := startSandbox(ctx, log)
		if err != nil {
			fmt.Fprintln(stderr, "braid capture:", oneLine(err))
			return 1
		}
		defer sb.close()
		spec = s
	} else {
		spec, err = engine.LoadSpec(*file)
		if err != nil {
			fmt.Fprintln(stderr, "braid capture:", oneLine(err))
			return 2
		}
	}
	if len(spec.Sources) != 1 {
		fmt.Fprintf(stderr, "braid capture: %s has %d sources; capture reads one source for now (multi-source merge is not built yet)\n", *file, len(spec.Sources))
		return 2
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	if err := capture(ctx, spec, stdout, *maxMsgs, log); err != nil {
		fmt.Fprintln(stderr, "braid capture:", oneLine(err))
		return 1
	}
	return 0
}

// capture streams spec's single source to w until ctx ends or max messages.
func capture(ctx context.Context, spec *engine.Spec, w io.Writer, max int, log *slog.Logger) error {
	filter, err := engine.CompileTableFilter(spec.Tables)
	if err != nil {
		return err
	}
	p, err := engine.NewParser(engine.ParserConfig{
		Destination: spec.Name,
		Source:      spec.Sources[0],
		Tables:      filter,
		Heartbeat:   time.Duration(spec.Heartbeat),
		Logger:      log.With("dest", spec.Name),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := bufio.NewWriterSize(w, 64<<10)
	defer out.Flush()
	fw := &engine.FlatWriter{}
	printed := 0
	line := func(b []byte) error {
		out.Write(b)
		out.WriteByte('\n')
		printed++
		if max > 0 && printed >= max {
			return errEnough
		}
		return nil
	}
	err = p.Run(ctx, func(ev *engine.Event) error {
		err := fw.Write(ev, line)
		if ev.Type == engine.EventCommit || ev.Type == engine.EventDDL || err != nil {
			if ferr := out.Flush(); ferr != nil {
				cancel(ferr)
				return ferr
			}
		}
		if errors.Is(err, errEnough) {
			cancel(errEnough)
		}
		return err
	})
	if cause := context.Cause(ctx); errors.Is(cause, errEnough) {
		return nil
	}
	return err
}

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
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
