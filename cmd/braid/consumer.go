package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// runConsumer is `braid consumer list|drop`: a destination's client ids
// as its owner sees them, and dropping one with its cursor.
func runConsumer(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "Usage: braid consumer list DEST [--server URL] [--json]")
		fmt.Fprintln(stderr, "       braid consumer drop DEST CLIENT_ID [--server URL] [--json]")
		fmt.Fprintln(stderr, "\nlist shows a destination's client ids (canal and native consumers): the seq each")
		fmt.Fprintln(stderr, "acked, how many events the store holds for it, whether it streams now, is detached")
		fmt.Fprintln(stderr, "(it held the store full longer than the spec's consumers.detach_after) or replays")
		fmt.Fprintln(stderr, "history behind the store. drop forgets one, its cursor included: the stream no")
		fmt.Fprintln(stderr, "longer waits for it, and the id starts anew if it comes back. A client id with a")
		fmt.Fprintln(stderr, "stream open is refused: stop it first.")
	}
	a, code, ok := startAdmin("consumer", args, usage, stderr, "list", "drop")
	if !ok {
		return code
	}
	defer a.cancel()
	sub, names, ac, ctx, fail := a.sub, a.names, a.ac, a.ctx, a.fail
	want := map[string]int{"list": 1, "drop": 2}[sub]
	if len(names) != want {
		if sub == "list" {
			fmt.Fprintln(stderr, "braid consumer list: name the destination, e.g. braid consumer list shop")
		} else {
			fmt.Fprintln(stderr, "braid consumer drop: name the destination and the client id, e.g. braid consumer drop shop 1001 (braid consumer list shop shows them)")
		}
		return 2
	}
	if sub == "drop" {
		res, err := ac.DropConsumer(ctx, names[0], names[1])
		if err != nil {
			return fail(err)
		}
		if a.asJSON {
			printJSON(stdout, res)
		} else {
			fmt.Fprintf(stdout, "consumer %s of destination %s dropped (its cursor was at seq %d)\n", res.ClientID, res.Destination, res.AckedSeq)
		}
		return 0
	}
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
