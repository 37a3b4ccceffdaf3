package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// runDDL is `braid ddl list|unlock|skip`: a destination's shard-DDL locks
// as its owner sees them, and an operator's decision about one.
func runDDL(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "Usage: braid ddl list DEST [--server URL] [--json]")
		fmt.Fprintln(stderr, "       braid ddl unlock DEST LOCK [--server URL] [--json]")
		fmt.Fprintln(stderr, "       braid ddl skip DEST LOCK [--server URL] [--json]")
		fmt.Fprintln(stderr, "\nWhen a route maps several shard tables to one logical table, a DDL on one shard")
		fmt.Fprintln(stderr, "table holds that table's later rows until every shard table has run it (the spec's")
		fmt.Fprintln(stderr, "shard_ddl: pessimistic); then one DDL of the logical table goes out, followed by the")
		fmt.Fprintln(stderr, "rows held. list shows each open lock: its DDL, the shard tables that ran it and those")
		fmt.Fprintln(stderr, "still waiting, since when, and how many rows it holds. unlock emits the lock's DDL")
		fmt.Fprintln(stderr, "now; skip emits nothing (the held rows go out under the schema their shard tables")
		fmt.Fprintln(stderr, "have). Both release the held rows, and the decision is kept with the destination")
		fmt.Fprintln(stderr, "(in Raft, or with braid capture's cursor) so that every later owner agrees.")
		fmt.Fprintln(stderr, "Against braid capture, point --server at its --http-port.")
	}
	a, code, ok := startAdmin("ddl", args, usage, stderr, "list", "unlock", "skip")
	if !ok {
		return code
	}
	defer a.cancel()
	sub, names, ac, ctx, fail := a.sub, a.names, a.ac, a.ctx, a.fail
	lock := 0
	if sub == "list" && len(names) != 1 {
		fmt.Fprintln(stderr, "braid ddl list: name the destination, e.g. braid ddl list shop")
		return 2
	}
	if sub != "list" {
		var err error
		if len(names) == 2 {
			lock, err = strconv.Atoi(names[1])
		}
		if len(names) != 2 || err != nil || lock <= 0 {
			fmt.Fprintf(stderr, "braid ddl %s: name the destination and the lock's number, e.g. braid ddl %s shop 1 (braid ddl list shop shows them)\n", sub, sub)
			return 2
		}
	}
	if sub != "list" {
		res, err := ac.DecideDDL(ctx, names[0], lock, sub)
		if err != nil {
			return fail(err)
		}
		if a.asJSON {
			printJSON(stdout, res)
		} else {
			what := map[string]string{"unlock": "its DDL went out", "skip": "its DDL was skipped"}[sub]
			fmt.Fprintf(stdout, "lock %d of destination %s released: %s, and the rows it held follow\n", res.Lock, res.Destination, what)
		}
		return 0
	}
	st, err := ac.DDL(ctx, names[0])
	if err != nil {
		return fail(err)
	}
	if a.asJSON {
		printJSON(stdout, st)
		return 0
	}
	if len(st.Locks) == 0 {
		fmt.Fprintf(stdout, "destination %s (shard_ddl: %s) has no open lock\n", st.Destination, st.Mode)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tTABLE\tSINCE\tHELD ROWS\tDONE\tWAITING\tDDL")
	for _, l := range st.Locks {
		waiting := strings.Join(l.Waiting, ",")
		if len(l.Conflicts) > 0 {
			var cs []string
			for shard := range l.Conflicts {
				cs = append(cs, shard)
			}
			sort.Strings(cs)
			waiting += " conflicts:" + strings.Join(cs, ",")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s ago\t%d\t%s\t%s\t%s\n", l.ID, l.Table, time.Since(l.Since).Round(time.Second), l.HeldRows,
			strings.Join(l.Done, ","), waiting, l.SQL)
	}
	tw.Flush()
	return 0
}
