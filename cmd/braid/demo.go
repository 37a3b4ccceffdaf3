package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/braid-cdc/braid/cmd/braid/internal/demo"
)

// runDemo is braid demo: its flags here, the demo in package demo.
func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", stderr)
	var o demo.Options
	fs.DurationVar(&o.Duration, "duration", 0, "stop after streaming this long, e.g. 1m (0: until Ctrl-C)")
	fs.Float64Var(&o.Rate, "rate", 10, "transactions a second the order workload writes, over all six schemas")
	fs.DurationVar(&o.KillAfter, "kill-after", 0, "this long into the stream, kill the node that runs shop (SIGKILL) and report the takeover (0: leave it to you)")
	fs.StringVar(&o.Dir, "dir", "", "keep the demo's files (node logs and data, shard servers, the spec) in this new or empty directory (default: a temp dir, removed at exit)")
	fs.BoolVar(&o.JSON, "json", false, "print the stream as canal flat-message JSON lines on stdout (the narration goes to stderr)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level of the nodes' log files and the consumer's: debug, info, warn or error")
	if code, ok := parseFlags(fs, args, stderr, true); !ok {
		return code
	}
	if err := o.Validate(); err != nil {
		for _, line := range errorLines(err) {
			fmt.Fprintln(stderr, "braid demo:", line)
		}
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	logs, err := demo.Run(ctx, o, stdout, stderr)
	switch {
	case errors.Is(err, demo.ErrNoServer):
		fmt.Fprintln(stderr, demo.Install)
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "braid demo:", oneLine(err))
		if logs != "" {
			fmt.Fprintf(stderr, "braid demo: the logs are in %s\n", logs)
		}
		return 1
	}
	return 0
}
