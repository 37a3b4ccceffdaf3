package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/braid-cdc/braid/api/wire"
)

// ddlCommand is braid ddl's leaves: a destination's shard-DDL locks as
// its owner sees them, and an operator's decision about one.
var ddlCommand = &command{
	summary: "list a destination's shard-DDL locks, or release one (unlock: emit its DDL; skip: emit nothing)",
	about: "When a route maps several shard tables to one logical table, a DDL on one shard\n" +
		"table holds that table's later rows until every shard table has run it (the spec's\n" +
		"shard_ddl: pessimistic); then one DDL of the logical table goes out, followed by the\n" +
		"rows held. An operator may release a lock sooner: the decision is kept with the\n" +
		"destination (in Raft, or with braid capture's cursor) so that every later owner\n" +
		"agrees. Against braid capture, point --server at its --http-port.",
	subs: map[string]*command{
		"list": {
			summary: "the open shard-DDL locks of a destination",
			usage:   "ddl list DEST [--server URL] [--json]",
			about: "Lists destination DEST's open shard-DDL locks: each lock's DDL, the shard tables\n" +
				"that ran it and those still waiting, since when, and how many rows it holds.\n" +
				"Against braid capture, point --server at its --http-port.",
			run: runDDLList,
		},
		"unlock": {
			summary: "release a lock and emit its DDL now",
			usage:   "ddl unlock DEST LOCK [--server URL] [--json]",
			about: "Releases lock LOCK of destination DEST (braid ddl list numbers them): its DDL goes\n" +
				"out now, followed by the rows it held. The decision is kept with the destination.",
			run: runDDLDecide("unlock"),
		},
		"skip": {
			summary: "release a lock and emit nothing",
			usage:   "ddl skip DEST LOCK [--server URL] [--json]",
			about: "Releases lock LOCK of destination DEST (braid ddl list numbers them) without its\n" +
				"DDL: the rows it held go out under the schema their shard tables have. The\n" +
				"decision is kept with the destination.",
			run: runDDLDecide("skip"),
		},
	},
}

// runDDLDecide is braid ddl unlock or skip (sub).
func runDDLDecide(sub string) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		a, code, ok := startAdmin(newFlags("ddl "+sub, stderr), args, stderr)
		if !ok {
			return code
		}
		defer a.cancel()
		lock, err := 0, error(nil)
		if len(a.names) == 2 {
			lock, err = strconv.Atoi(a.names[1])
		}
		if len(a.names) != 2 || err != nil || lock <= 0 {
			fmt.Fprintf(stderr, "braid ddl %s: name the destination and the lock's number, e.g. braid ddl %s shop 1 (braid ddl list shop shows them)\n", sub, sub)
			return 2
		}
		res, err := a.ac.DecideDDL(a.ctx, a.names[0], lock, sub)
		if err != nil {
			return a.fail(err)
		}
		if a.asJSON {
			printJSON(stdout, res)
		} else {
			what := map[string]string{"unlock": "its DDL went out", "skip": "its DDL was skipped"}[sub]
			fmt.Fprintf(stdout, "lock %d of destination %s released: %s, and the rows it held follow\n", res.Lock, res.Destination, what)
		}
		return 0
	}
}

func runDDLList(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdminOnDestination(newFlags("ddl list", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	names, ac, ctx, fail := a.names, a.ac, a.ctx, a.fail
	st, err := ac.DDL(ctx, names[0])
	if err != nil {
		return fail(err)
	}
	if a.asJSON {
		printJSON(stdout, st)
		return 0
	}
	migrating := map[string]bool{}
	for _, m := range st.Migrations {
		migrating[m.Shard] = true
	}
	defer printMigrations(stdout, st.Migrations)
	if len(st.Locks) == 0 {
		fmt.Fprintf(stdout, "destination %s (shard_ddl: %s) has no open lock\n", st.Destination, st.Mode)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tTABLE\tSINCE\tHELD ROWS\tDONE\tWAITING\tDDL")
	for _, l := range st.Locks {
		var ws []string
		for _, w := range l.Waiting {
			if migrating[w] {
				w += " (migrating)" // copy made, not swapped in yet
			}
			ws = append(ws, w)
		}
		waiting := strings.Join(ws, ",")
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

// printMigrations lists the online schema changes under way, if any.
func printMigrations(stdout io.Writer, ms []wire.DDLMigration) {
	if len(ms) == 0 {
		return
	}
	fmt.Fprintf(stdout, "\nonline schema changes under way (copy made, not swapped in):\n")
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tTABLE\tCOPY\tSINCE\tDDL")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Shard, m.Table, m.Shadow, m.Since, strings.Join(m.DDL, "; "))
	}
	tw.Flush()
}
