package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/spec"
)

// adminTimeout bounds an operator command's call to a node (creating a
// destination waits for the node to check every source).
const adminTimeout = 30 * time.Second

// adminContext is an operator command's context: it ends at Ctrl-C or
// after adminTimeout.
func adminContext() (context.Context, context.CancelFunc) {
	ctx, stop := signalContext()
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	return ctx, func() { cancel(); stop() }
}

// adminError is a failed call as one line for the operator: the node's own
// message when it answered, else what kept it from answering.
func adminError(server string, err error) error {
	var se *client.Error
	switch {
	case errors.As(err, &se):
		return errors.New(se.Message)
	case errors.Is(err, client.ErrUnreachable):
		return fmt.Errorf("cannot reach %s: %v: is a braid server running there?", server, rootErr(err))
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s did not answer within %v", server, adminTimeout)
	}
	return err
}

func rootErr(err error) error {
	for {
		var u error
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			u = e.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := e.Unwrap(); len(errs) > 0 {
				u = errs[len(errs)-1]
			}
		}
		if u == nil {
			return err
		}
		err = u
	}
}

// adminFlags are the flags every operator command takes.
func adminFlags(fs *flag.FlagSet) (conn *connFlags, asJSON *bool) {
	conn = addConnFlags(fs, "a braid node's HTTP address (any node of the cluster; several, comma-separated, are tried in turn)")
	asJSON = fs.Bool("json", false, "print JSON instead of a table")
	return
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func runDestination(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "Usage: braid destination create -f SPEC [--server URL]")
		fmt.Fprintln(stderr, "       braid destination list [--server URL] [--json]")
		fmt.Fprintln(stderr, "       braid destination show NAME [--server URL] [--json]")
		fmt.Fprintln(stderr, "       braid destination delete NAME [--force] [--server URL]")
		fmt.Fprintln(stderr, "\nManages a cluster's destinations through any of its nodes. create checks every")
		fmt.Fprintln(stderr, "source (reachable, binlog in ROW format) before storing the spec; delete refuses a")
		fmt.Fprintln(stderr, "destination whose consumers have cursors unless --force.")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("destination "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(); fmt.Fprintln(stderr, "\nFlags:"); fs.PrintDefaults() }
	conn, asJSON := adminFlags(fs)
	file := fs.String("f", "", "create: the destination spec file (YAML or JSON; see docs/spec.md)")
	force := fs.Bool("force", false, "delete: even if consumers have cursors (they lose their place)")
	name, code, ok := parseNamed(fs, args, stderr)
	if !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "braid destination %s: %s\n", sub, oneLine(err))
		return 1
	}
	ac, err := conn.client()
	if err != nil {
		return fail(err)
	}
	ctx, cancel := adminContext()
	defer cancel()
	needName := func() bool {
		if name == "" {
			fmt.Fprintf(stderr, "braid destination %s: name the destination, e.g. braid destination %s shop\n", sub, sub)
			return false
		}
		return true
	}
	switch sub {
	case "create":
		if *file == "" {
			fmt.Fprintln(stderr, "braid destination create: give the spec with -f spec.yaml (docs/spec.md has the format)")
			return 2
		}
		body, err := os.ReadFile(*file)
		if err != nil {
			return fail(err)
		}
		// A spec error is the operator's to fix, like a usage error:
		// said here, before any node is asked, with exit code 2.
		if _, err := spec.Parse(body); err != nil {
			fmt.Fprintf(stderr, "braid destination create: %s: %s\n", *file, oneLine(err))
			return 2
		}
		info, err := ac.CreateDestination(ctx, body)
		if err != nil {
			return fail(adminError(conn.server, err))
		}
		if *asJSON {
			printJSON(stdout, info)
		} else {
			fmt.Fprintf(stdout, "destination %s created with %d sources; a node will take it in a moment (braid destination show %s)\n",
				info.Name, len(destSpec(*info).Sources), info.Name)
		}
	case "list":
		st, err := ac.ClusterStatus(ctx)
		if err != nil {
			return fail(adminError(conn.server, err))
		}
		if *asJSON {
			printJSON(stdout, st.Destinations)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tOWNER\tEPOCH\tSOURCES\tSEQ\tMAX LAG")
		for _, d := range st.Destinations {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", d.Name, orDash(d.Owner), d.Epoch, len(destSpec(d).Sources), d.Seq, maxLag(d))
		}
		tw.Flush()
	case "show":
		if !needName() {
			return 2
		}
		info, err := ac.Destination(ctx, name)
		if err != nil {
			return fail(adminError(conn.server, err))
		}
		if *asJSON {
			printJSON(stdout, info)
			return 0
		}
		showDestination(stdout, *info)
	case "delete":
		if !needName() {
			return 2
		}
		if err := ac.DeleteDestination(ctx, name, *force); err != nil {
			return fail(adminError(conn.server, err))
		}
		fmt.Fprintf(stdout, "destination %s deleted\n", name)
	default:
		fmt.Fprintf(stderr, "braid destination: unknown subcommand %q: use create, list, show or delete\n", sub)
		return 2
	}
	return 0
}

// destSpec is a destination's spec, parsed from its JSON form (a zero
// spec if the node sent none it could parse: the command still shows the
// rest).
func destSpec(info wire.DestinationInfo) spec.Spec {
	var s spec.Spec
	_ = json.Unmarshal(info.Spec, &s)
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// maxLag is the largest lag of a destination's sources, as text.
func maxLag(d wire.DestinationInfo) string {
	if d.StateError != "" {
		return "? (" + d.StateError + ")"
	}
	// How far reading trails each source (0 for an idle one, however
	// old its last commit), not the time since its last commit.
	var most int64 = -1
	down := 0
	for _, s := range d.Sources {
		most = max(most, s.BehindMs)
		if !s.Connected {
			down++
		}
	}
	if most < 0 {
		return "-"
	}
	lag := (time.Duration(most) * time.Millisecond).Round(time.Millisecond).String()
	if down > 0 {
		lag += fmt.Sprintf(" (%d down)", down)
	}
	return lag
}

func showDestination(w io.Writer, info wire.DestinationInfo) {
	fmt.Fprintf(w, "destination %s: owner %s, epoch %d, last seq %d\n", info.Name, orDash(info.Owner), info.Epoch, info.Seq)
	if info.StateError != "" {
		fmt.Fprintf(w, "state: unavailable (%s)\n", info.StateError)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(info.Sources) > 0 {
		// The snapshot column only for a spec with snapshot: initial.
		snap := slices.ContainsFunc(info.Sources, func(s wire.SourceState) bool { return s.Snapshot != nil })
		header := "\nSOURCE\tPOSITION\tLAG\tWAITING"
		if snap {
			header += "\tSNAPSHOT"
		}
		fmt.Fprintln(tw, header)
		for _, s := range info.Sources {
			lag := "-"
			if s.LagMs != nil {
				lag = (time.Duration(*s.LagMs) * time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v", s.Name, s.Pos, lag, s.Waiting)
			if snap {
				fmt.Fprintf(tw, "\t%s", snapshotText(s.Snapshot))
			}
			fmt.Fprintln(tw)
		}
	}
	if len(info.Clients) > 0 {
		fmt.Fprintln(tw, "\nCLIENT ID\tACKED SEQ\tUNACKED EVENTS\tSTREAMING")
		for _, c := range info.Clients {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%v\n", c.ID, c.AckedSeq, c.Unacked, c.Streaming)
		}
	}
	tw.Flush()
	text, _ := yaml.Marshal(destSpec(info))
	fmt.Fprintf(w, "\nspec:\n%s", indent(string(text), "  "))
}

// snapshotText is a source's initial-snapshot progress on one line:
// "3/6 tables, 120,000 rows, 45,000 rows/s, eta 12s", or "done"; "-"
// for a source without a snapshot. The rate and the time left are left
// out while not known.
func snapshotText(sn *wire.SnapshotState) string {
	switch {
	case sn == nil:
		return "-"
	case sn.Done:
		return "done"
	}
	text := fmt.Sprintf("%d/%d tables, %s rows", sn.TablesDone, sn.Tables, groupDigits(sn.Rows))
	if sn.RowsPerSecond > 0 {
		text += fmt.Sprintf(", %s rows/s", groupDigits(int64(math.Round(sn.RowsPerSecond))))
	}
	if sn.EtaSeconds > 0 {
		text += ", eta " + time.Duration(math.Ceil(sn.EtaSeconds)*float64(time.Second)).String()
	}
	return text
}

// groupDigits writes n with a comma between each group of three digits.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

func runCluster(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "Usage: braid cluster status [--server URL] [--json]")
		fmt.Fprintln(stderr, "       braid cluster remove NODE [--server URL] [--json]")
		fmt.Fprintln(stderr, "\nstatus shows the cluster's nodes (gossip state, Raft role, addresses) and")
		fmt.Fprintln(stderr, "destinations (owner, epoch, per-source lag), as one node sees them.")
		fmt.Fprintln(stderr, "remove takes a dead node out of the Raft configuration, so that the quorum no")
		fmt.Fprintln(stderr, "longer counts it (the leader does so by itself after --reap-dead-after once three")
		fmt.Fprintln(stderr, "voters stay without it); a live node is refused: stop it first.")
	}
	if code, ok := subcommand(args, usage, "status", "remove"); !ok {
		return code
	}
	if args[0] == "remove" {
		return runClusterRemove(args[1:], stdout, stderr, usage)
	}
	fs := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn, asJSON := adminFlags(fs)
	if code, ok := parseFlags(fs, args[1:], stderr, false); !ok {
		return code
	}
	ac, err := conn.client()
	if err != nil {
		fmt.Fprintln(stderr, "braid cluster status:", oneLine(err))
		return 1
	}
	ctx, cancel := adminContext()
	defer cancel()
	st, err := ac.ClusterStatus(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "braid cluster status:", oneLine(adminError(conn.server, err)))
		return 1
	}
	if *asJSON {
		printJSON(stdout, st)
		return 0
	}
	fmt.Fprintf(stdout, "as seen by %s; raft leader: %s\n\n", st.Node, orDash(st.Leader))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tRAFT\tHTTP\tCANAL\tDESTINATIONS")
	for _, n := range st.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", n.Name, n.State, orDash(n.Raft), orDash(n.HTTPAddr), orDash(n.CanalAddr), n.Destinations)
	}
	fmt.Fprintln(tw, "\nDESTINATION\tOWNER\tEPOCH\tSEQ\tMAX LAG")
	for _, d := range st.Destinations {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", d.Name, orDash(d.Owner), d.Epoch, d.Seq, maxLag(d))
	}
	tw.Flush()
	return 0
}

func runClusterRemove(args []string, stdout, stderr io.Writer, usage func()) int {
	fs := flag.NewFlagSet("cluster remove", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(); fmt.Fprintln(stderr, "\nFlags:"); fs.PrintDefaults() }
	conn, asJSON := adminFlags(fs)
	name, code, ok := parseNamed(fs, args, stderr)
	if !ok {
		return code
	}
	if name == "" {
		fmt.Fprintln(stderr, "braid cluster remove: name the dead node to remove, e.g. braid cluster remove n3 (braid cluster status lists them)")
		return 2
	}
	ac, err := conn.client()
	if err != nil {
		fmt.Fprintln(stderr, "braid cluster remove:", oneLine(err))
		return 1
	}
	ctx, cancel := adminContext()
	defer cancel()
	res, err := ac.RemoveNode(ctx, name)
	if err != nil {
		fmt.Fprintln(stderr, "braid cluster remove:", oneLine(adminError(conn.server, err)))
		return 1
	}
	if *asJSON {
		printJSON(stdout, res)
		return 0
	}
	fmt.Fprintf(stdout, "removed node %s from raft; voters now: %s\n", res.Removed, strings.Join(res.Voters, ", "))
	return 0
}

// adminCommand is what `braid CMD SUB NAME...` admin commands share: the
// subcommand, its flags (--server, --json, the credential), the names
// after it, a client and a context for the call, and how to fail.
type adminCommand struct {
	sub    string
	names  []string
	asJSON bool
	ac     *client.Client
	ctx    context.Context
	cancel context.CancelFunc
	fail   func(error) int // prints "braid CMD SUB: error" on stderr; 1
}

// startAdmin parses `braid cmd` args for one of subs. It returns ok false
// with the exit code when parsing ended it (help, a usage error, or a
// client that cannot be made); call cancel when done.
func startAdmin(cmd string, args []string, usage func(), stderr io.Writer, subs ...string) (a *adminCommand, code int, ok bool) {
	if code, ok := subcommand(args, usage, subs...); !ok {
		return nil, code, false
	}
	a = &adminCommand{sub: args[0]}
	fs := flag.NewFlagSet(cmd+" "+a.sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(); fmt.Fprintln(stderr, "\nFlags:"); fs.PrintDefaults() }
	conn, asJSON := adminFlags(fs)
	if a.names, code, ok = parseNames(fs, args[1:], stderr); !ok {
		return nil, code, false
	}
	a.asJSON = *asJSON
	a.fail = func(err error) int {
		fmt.Fprintf(stderr, "braid %s %s: %s\n", cmd, a.sub, oneLine(adminError(conn.server, err)))
		return 1
	}
	ac, err := conn.client()
	if err != nil {
		return nil, a.fail(err), false
	}
	a.ac = ac
	a.ctx, a.cancel = adminContext()
	return a, 0, true
}
