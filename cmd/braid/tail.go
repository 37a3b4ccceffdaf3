package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/braid-cdc/braid/client"
)

func runTail(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs, "a braid node's HTTP address (several, comma-separated, are tried in turn)")
	clientID := fs.String("client-id", "tail", "the consumer's id: its cursor on the server is kept under it")
	maxMsgs := fs.Int("max", 0, "exit after printing this many messages (0: no limit)")
	timeout := fs.Duration("timeout", 0, "exit after this long, e.g. 30s (0: no limit)")
	logLevel := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: braid tail NAME [--server URL] [--client-id ID] [--max N] [--timeout D]")
		fmt.Fprintln(stderr, "\nPrints destination NAME's stream from a braid node as flat-message JSON lines,")
		fmt.Fprintln(stderr, "acking as it goes: the next tail with the same --client-id goes on after the")
		fmt.Fprintln(stderr, "last transaction printed whole. It reconnects by itself when the connection drops.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	// The destination's name may come before or after the flags.
	name, code, ok := parseNamed(fs, args, stderr)
	if !ok {
		return code
	}
	if name == "" {
		fmt.Fprintln(stderr, "braid tail: name the destination to tail, e.g. braid tail shop --server http://127.0.0.1:8081")
		return 2
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "braid tail:", err)
		return 2
	}
	// It prints the server's JSON lines as they come.
	c, err := conn.client(client.WithLogger(log), client.WithJSONLines())
	if err != nil {
		fmt.Fprintln(stderr, "braid tail:", oneLine(err))
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	// After the --max-th message, tail stops at the next message (which
	// proves the last printed transaction complete, so it is acked) or
	// after a second without one (the server's idle checkpoint does it).
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	printed := 0
	// The lines go out as they came: a view, without decoding rows into
	// maps.
	err = c.StreamViews(sctx, name, *clientID, func(m *client.MessageView) error {
		if *maxMsgs > 0 && printed >= *maxMsgs {
			return errEnough
		}
		out.Write(m.Raw())
		out.WriteByte('\n')
		printed++
		if err := out.Flush(); err != nil {
			return err
		}
		if *maxMsgs > 0 && printed >= *maxMsgs {
			time.AfterFunc(time.Second, stopStream)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		fmt.Fprintln(stderr, "braid tail:", oneLine(err))
		return 1
	}
	return 0
}
