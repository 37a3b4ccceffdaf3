package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// consumerCommand is braid consumer's leaves: a destination's client ids
// as its owner sees them, and dropping one with its cursor.
var consumerCommand = &command{
	summary: "list a destination's consumers (client ids), or drop one with its cursor",
	about:   "A destination's consumers are its client ids (canal and native), each with a cursor.",
	subs: map[string]*command{
		"list": {
			summary: "the client ids of a destination, their cursors and state",
			usage:   "consumer list DEST [--server URL] [--json]",
			about: "Lists destination DEST's client ids (canal and native consumers): the seq each\n" +
				"acked, how many events the store holds for it, whether it streams now, is detached\n" +
				"(it held the store full longer than the spec's consumers.detach_after) or replays\n" +
				"history behind the store.",
			run: runConsumerList,
		},
		"drop": {
			summary: "forget a client id and its cursor",
			usage:   "consumer drop DEST CLIENT_ID [--server URL] [--json]",
			about: "Forgets client id CLIENT_ID of destination DEST, its cursor included: the stream\n" +
				"no longer waits for it, and the id starts anew if it comes back. A client id with\n" +
				"a stream open is refused: stop it first.",
			run: runConsumerDrop,
		},
	},
}

func runConsumerDrop(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdmin(newFlags("consumer drop", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	if len(a.names) != 2 {
		fmt.Fprintln(stderr, "braid consumer drop: name the destination and the client id, e.g. braid consumer drop shop 1001 (braid consumer list shop shows them)")
		return 2
	}
	res, err := a.ac.DropConsumer(a.ctx, a.names[0], a.names[1])
	if err != nil {
		return a.fail(err)
	}
	if a.asJSON {
		printJSON(stdout, res)
	} else {
		fmt.Fprintf(stdout, "consumer %s of destination %s dropped (its cursor was at seq %d)\n", res.ClientID, res.Destination, res.AckedSeq)
	}
	return 0
}

func runConsumerList(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdminOnDestination(newFlags("consumer list", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	names, ac, ctx, fail := a.names, a.ac, a.ctx, a.fail
	cs, err := ac.Consumers(ctx, names[0])
	if err != nil {
		return fail(err)
	}
	if a.asJSON {
		printJSON(stdout, cs)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT ID\tACKED SEQ\tHELD\tSTATE\tLAST SEEN")
	for _, c := range cs {
		state := "idle"
		switch {
		case c.Refused != "":
			state = "refused: before a loss (see --json)"
		case c.Streaming:
			state = "streaming"
		case c.Replaying:
			state = "replaying"
		case c.Detached:
			state = "detached"
		}
		if c.Ephemeral {
			state += ", ephemeral"
		}
		seen := "-"
		if c.LastSeen != nil {
			seen = time.Since(*c.LastSeen).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", c.ID, c.AckedSeq, c.Unacked, state, seen)
	}
	tw.Flush()
	return 0
}
