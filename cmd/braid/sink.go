package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// runSink is `braid sink list`: a destination's sinks as its owner runs
// them.
func runSink(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "Usage: braid sink list DEST [--server URL] [--json]")
		fmt.Fprintln(stderr, "\nlist shows the sinks of a destination (the spec's sinks:) as the node that runs")
		fmt.Fprintln(stderr, "them sees them: the seq each applied whole, how far it is behind, the row changes")
		fmt.Fprintln(stderr, "it applied, the INSERTs that found their key and the UPDATEs and DELETEs that found")
		fmt.Fprintln(stderr, "no row (never dropped: counted), and its last error while it retries.")
	}
	a, code, ok := startAdmin("sink", args, usage, stderr, "list")
	if !ok {
		return code
	}
	defer a.cancel()
	names, ac, ctx, fail := a.names, a.ac, a.ctx, a.fail
	if len(names) != 1 {
		fmt.Fprintln(stderr, "braid sink list: name the destination, e.g. braid sink list shop")
		return 2
	}
	sinks, err := ac.Sinks(ctx, names[0])
	if err != nil {
		return fail(err)
	}
	if a.asJSON {
		printJSON(stdout, sinks)
		return 0
	}
	if len(sinks) == 0 {
		fmt.Fprintf(stdout, "destination %s has no sinks\n", names[0])
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINK\tTYPE\tADDRESS\tAPPLIED SEQ\tLAG\tROWS\tUPSERTS\tMISSING\tSTATE")
	for _, s := range sinks {
		state := "applying"
		switch {
		case !s.Running:
			state = "connecting: " + s.LastError
		case s.LastError != "":
			state = "retrying: " + s.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Name, s.Type, s.Address, s.AppliedSeq, s.LagSeq, s.Rows, s.Upserts, s.Missing, state)
	}
	tw.Flush()
	return 0
}
