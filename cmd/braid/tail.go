package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	conn := addConnFlags(fs, "a braid node's HTTP address (several, comma-separated, are tried in turn); tail learns the cluster's other nodes from it and fails over to them")
	clientID := fs.String("client-id", "", "a durable consumer's id: the server keeps its cursor under it (none: an ephemeral tail-XXXXXXXX that leaves no cursor)")
	from := fs.String("from", "", "where a client id new to the destination starts: earliest, latest, seq:N or time:RFC3339 (none: latest for an ephemeral tail, the destination's consumers.start with --client-id; ignored for a client id that has a cursor)")
	maxMsgs := fs.Int("max", 0, "exit after printing this many messages (0: no limit)")
	timeout := fs.Duration("timeout", 0, "exit after this long, e.g. 30s (0: no limit)")
	logLevel := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: braid tail NAME [--server URL] [--client-id ID] [--from POS] [--max N] [--timeout D]")
		fmt.Fprintln(stderr, "\nPrints destination NAME's stream from a braid node as flat-message JSON lines.")
		fmt.Fprintln(stderr, "\nWithout --client-id it is ephemeral, like tail -f: it starts at what is committed")
		fmt.Fprintln(stderr, "from now on (or at --from), under a client id of its own (tail-XXXXXXXX) of which")
		fmt.Fprintln(stderr, "the server keeps no cursor: nothing is left behind when it exits.")
		fmt.Fprintln(stderr, "\nWith --client-id it is durable and acks as it goes: the next tail with the same")
		fmt.Fprintln(stderr, "--client-id goes on after the last transaction printed whole; --from only says")
		fmt.Fprintln(stderr, "where a client id the server has no cursor of starts.")
		fmt.Fprintln(stderr, "\n--from is earliest (the destination's start), latest, seq:N (the transaction of")
		fmt.Fprintln(stderr, "seq N) or time:RFC3339 (e.g. time:2026-01-02T15:04:05Z).")
		fmt.Fprintln(stderr, "\nIt reconnects by itself when the connection drops, to the same node or to any")
		fmt.Fprintln(stderr, "other of the cluster's nodes, which it learns from the one it reaches, and goes")
		fmt.Fprintln(stderr, "on after the last transaction printed whole: nothing skipped, nothing repeated.")
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
	if *from != "" {
		if err := client.CheckFrom(*from); err != nil {
			fmt.Fprintf(stderr, "braid tail: --from %q: want earliest, latest, seq:N (N from 1) or time:RFC3339 (e.g. time:2026-01-02T15:04:05Z)\n", *from)
			return 2
		}
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "braid tail:", err)
		return 2
	}
	// It prints the server's JSON lines as they come.
	opts := []client.Option{client.WithLogger(log), client.WithJSONLines()}
	id := *clientID
	if id == "" {
		// Ephemeral, like tail -f: from now on, and no cursor left behind.
		id = ephemeralID()
		opts = append(opts, client.WithEphemeral(), client.WithFrom("latest"))
		log.Info("tailing as an ephemeral client id: the server keeps no cursor of it", "client", id)
	}
	if *from != "" {
		opts = append(opts, client.WithFrom(*from))
	}
	c, err := conn.client(opts...)
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
	err = c.StreamViews(sctx, name, id, func(m *client.MessageView) error {
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
		var se *client.Error
		if errors.As(err, &se) {
			err = fmt.Errorf("%w%s", err, callHint("tail", se))
		}
		fmt.Fprintln(stderr, "braid tail:", oneLine(err))
		return 1
	}
	return 0
}

// ephemeralID is a client id of tail's own: tail- and 8 random hex digits.
func ephemeralID() string {
	b := make([]byte, 4)
	rand.Read(b) // never fails (crypto/rand)
	return "tail-" + hex.EncodeToString(b)
}
