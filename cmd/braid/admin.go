package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
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
	return callError("", server, err)
}

// callError is adminError for the leaf command path, with the flag
// that would change the node's answer (callHint).
func callError(path, server string, err error) error {
	var se *client.Error
	switch {
	case errors.As(err, &se):
		return errors.New(se.Message + callHint(path, se))
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

// destinationCommand is braid destination's leaves.
var destinationCommand = &command{
	summary: "create, list, show or delete a cluster's destinations",
	about:   "Manages a cluster's destinations through any of its nodes.",
	subs: map[string]*command{
		"create": {
			summary: "check a spec's sources and store it: a node takes the destination",
			usage:   "destination create -f SPEC [--server URL] [--json]",
			about: "Reads the destination spec SPEC (YAML or JSON; see docs/spec.md), has a node check\n" +
				"every source (reachable, binlog in ROW format) and stores it in the cluster; a node\n" +
				"takes the destination in a moment (braid destination show NAME).\n" +
				"A source's address may list its servers, [db1:3306, db2:3306]: braid reads the\n" +
				"first that answers (read_from: primary, the default, prefers a writable one;\n" +
				"replica a read_only one) and, once it has lost it for failover_after (default\n" +
				"10s), another, resuming there by GTID (docs/sources.md).",
			run: runDestinationCreate,
		},
		"list": {
			summary: "list the destinations: owner, epoch, sources, seq, lag",
			usage:   "destination list [--server URL] [--json]",
			about:   "Lists the cluster's destinations: the node that runs each (owner) and its epoch,\nits sources, the seq it reached and its largest lag behind a source.",
			run:     runDestinationList,
		},
		"show": {
			summary: "show one destination: its spec, owner, sources and snapshot",
			usage:   "destination show NAME [--server URL] [--json]",
			about:   "Shows destination NAME in full: its owner and epoch, each source's position and\nlag, its snapshot's progress and its spec (passwords hidden).",
			run:     runDestinationShow,
		},
		"accept-lost": {
			summary: "go on without the transactions a failover lost on a source",
			usage:   "destination accept-lost DEST SOURCE [--server URL] [--json]",
			about: "After an asynchronous failover, the promoted server of source SOURCE may lack\n" +
				"transactions braid already emitted: they are lost, and braid waits, naming them\n" +
				"(an error line every 10s; LOST in braid destination show). accept-lost accepts\n" +
				"exactly the loss named now: the source goes on reading the promoted server from\n" +
				"the GTID position it holds (its transactions braid did not emit come next), and a\n" +
				"marker naming the lost transactions goes into the stream where the source went on\n" +
				"(a message of type LOST). The accept is kept with the destination (in Raft; braid\n" +
				"capture --http-port keeps it for its run), so a restart or a new owner finding the\n" +
				"same loss goes on without asking again; another loss needs another accept. Refused\n" +
				"when the source waits on no loss. Needs an admin. Against braid capture, point\n" +
				"--server at its --http-port. See docs/sources.md.",
			run: runDestinationAcceptLost,
		},
		"delete": {
			summary: "delete a destination (refused while consumers have cursors, unless --force)",
			usage:   "destination delete NAME [--force] [--server URL] [--json]",
			about:   "Deletes destination NAME: its owner stops it and its state is forgotten. A destination\nwhose consumers have cursors is refused unless --force (they lose their place).",
			run:     runDestinationDelete,
		},
	},
}

func runDestinationCreate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("destination create", stderr)
	file := fs.String("f", "", "the destination spec file (YAML or JSON; see docs/spec.md)")
	a, code, ok := startAdmin(fs, args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	if len(a.names) > 0 {
		fmt.Fprintf(stderr, "braid destination create: unexpected argument %q: the spec names the destination (-f spec.yaml)\n", a.names[0])
		return 2
	}
	if *file == "" {
		fmt.Fprintln(stderr, "braid destination create: give the spec with -f spec.yaml (docs/spec.md has the format)")
		return 2
	}
	body, err := os.ReadFile(*file)
	if err != nil {
		return a.fail(err)
	}
	// A spec error is the operator's to fix, like a usage error: said
	// here, before any node is asked, with exit code 2.
	if _, err := spec.Parse(body); err != nil {
		fmt.Fprintf(stderr, "braid destination create: %s: %s\n", *file, oneLine(err))
		return 2
	}
	info, err := a.ac.CreateDestination(a.ctx, body)
	if err != nil {
		// The node checked every source: each problem on a line of its own.
		var se *client.Error
		if errors.As(err, &se) && strings.Contains(se.Message, "\n") {
			for _, line := range errorLines(errors.New(se.Message)) {
				fmt.Fprintln(stderr, "braid destination create:", strings.TrimSpace(line))
			}
			return 1
		}
		return a.fail(err)
	}
	if a.asJSON {
		printJSON(stdout, info)
	} else {
		fmt.Fprintf(stdout, "destination %s created with %d sources; a node will take it in a moment (braid destination show %s)\n",
			info.Name, len(destSpec(*info).Sources), info.Name)
	}
	return 0
}

func runDestinationList(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdmin(newFlags("destination list", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	if len(a.names) > 0 {
		fmt.Fprintf(stderr, "braid destination list: unexpected argument %q: it lists every destination (braid destination show NAME shows one)\n", a.names[0])
		return 2
	}
	st, err := a.ac.ClusterStatus(a.ctx)
	if err != nil {
		return a.fail(err)
	}
	if a.asJSON {
		printJSON(stdout, st.Destinations)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tEPOCH\tSOURCES\tSEQ\tMAX LAG")
	for _, d := range st.Destinations {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", d.Name, orDash(d.Owner), d.Epoch, len(destSpec(d).Sources), d.Seq, maxLag(d))
	}
	tw.Flush()
	return 0
}

func runDestinationShow(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdminOnDestination(newFlags("destination show", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	info, err := a.ac.Destination(a.ctx, a.names[0])
	if notACluster(err) {
		info, err = captureDestination(a.ctx, a.ac, a.names[0])
	}
	if err != nil {
		return a.fail(err)
	}
	if a.asJSON {
		printJSON(stdout, info)
		return 0
	}
	showDestination(stdout, *info)
	return 0
}

// notACluster reports whether err is the answer of a node that serves
// destinations without a cluster (braid capture --http-port): it keeps no
// stored spec, so it has no /v1/destinations/{name}/spec route.
func notACluster(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound && strings.HasPrefix(e.Message, "no such endpoint:")
}

// captureDestination is a capture's destination as braid destination
// show prints it: its state, with no owner, epoch or stored spec.
func captureDestination(ctx context.Context, ac *client.Client, name string) (*wire.DestinationInfo, error) {
	st, err := ac.State(ctx, name)
	if err != nil {
		return nil, err
	}
	return &wire.DestinationInfo{Name: st.Name, Seq: st.Seq, Sources: st.Sources, Clients: st.Clients}, nil
}

func runDestinationAcceptLost(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdmin(newFlags("destination accept-lost", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	if len(a.names) != 2 {
		fmt.Fprintln(stderr, "braid destination accept-lost: name the destination and the source, e.g. braid destination accept-lost shop a (braid destination show shop names the lost transactions under LOST)")
		return 2
	}
	res, err := a.ac.AcceptLost(a.ctx, a.names[0], a.names[1])
	if err != nil {
		return a.fail(err)
	}
	if a.asJSON {
		printJSON(stdout, res)
		return 0
	}
	fmt.Fprintf(stdout, "source %s of destination %s goes on without the lost transactions (%s); a marker of type LOST names them in the stream\n",
		res.Source, res.Destination, res.Lost)
	return 0
}

func runDestinationDelete(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("destination delete", stderr)
	force := fs.Bool("force", false, "delete even if consumers have cursors (they lose their place)")
	a, code, ok := startAdminOnDestination(fs, args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	name := a.names[0]
	if err := a.ac.DeleteDestination(a.ctx, name, *force); err != nil {
		return a.fail(err)
	}
	if a.asJSON {
		printJSON(stdout, map[string]string{"deleted": name})
		return 0
	}
	fmt.Fprintf(stdout, "destination %s deleted\n", name)
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
	if info.Spec == nil {
		fmt.Fprintf(w, "destination %s (a braid capture's, no cluster): last seq %d\n", info.Name, info.Seq)
	} else {
		fmt.Fprintf(w, "destination %s: owner %s, epoch %d, last seq %d\n", info.Name, orDash(info.Owner), info.Epoch, info.Seq)
	}
	if info.StateError != "" {
		fmt.Fprintf(w, "state: unavailable (%s)\n", info.StateError)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(info.Sources) > 0 {
		// The snapshot column only for a spec with snapshot: initial.
		snap := slices.ContainsFunc(info.Sources, func(s wire.SourceState) bool { return s.Snapshot != nil })
		header := "\nSOURCE\tPOSITION\tSERVER\tSWITCHES\tLAG\tWAITING"
		if snap {
			header += "\tSNAPSHOT"
		}
		fmt.Fprintln(tw, header)
		for _, s := range info.Sources {
			lag := "-"
			if s.LagMs != nil {
				lag = (time.Duration(*s.LagMs) * time.Millisecond).String()
			}
			// A source of several servers (or behind a virtual IP)
			// shows the one read and how often it changed.
			switches := fmt.Sprint(s.Switches)
			if s.LastSwitchAt != nil {
				switches += ", last " + s.LastSwitchAt.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v", s.Name, s.Pos, orDash(s.Server), switches, lag, s.Waiting)
			if snap {
				fmt.Fprintf(tw, "\t%s", snapshotText(s.Snapshot))
			}
			fmt.Fprintln(tw)
		}
	}
	for _, s := range info.Sources {
		if s.Lost != "" {
			fmt.Fprintf(tw, "\nLOST on source %s: the server it reads (a promoted one) lacks transactions braid emitted: %s\n"+
				"  braid waits; point the address at a server that has them, or go on without them: braid destination accept-lost %s %s\n",
				s.Name, s.Lost, info.Name, s.Name)
		}
		for _, a := range s.Accepted {
			at, marker := "at a time not kept", "not out yet"
			if a.AcceptedAt != nil {
				at = a.AcceptedAt.Local().Format(time.DateTime)
			}
			if a.MarkerSeq != 0 {
				marker = fmt.Sprintf("seq %d", a.MarkerSeq)
			}
			fmt.Fprintf(tw, "\nACCEPTED LOSS on source %s: %s (braid had emitted up to %s), accepted %s; its LOST marker: %s\n",
				s.Name, a.Lost, a.From, at, marker)
		}
	}
	if len(info.Clients) > 0 {
		fmt.Fprintln(tw, "\nCLIENT ID\tACKED SEQ\tUNACKED EVENTS\tSTREAMING")
		for _, c := range info.Clients {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%v\n", c.ID, c.AckedSeq, c.Unacked, c.Streaming)
		}
	}
	tw.Flush()
	if info.Spec == nil {
		return // a capture's: it keeps no stored spec to show
	}
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

// clusterCommand is braid cluster's leaves.
var clusterCommand = &command{
	summary: "show a cluster's nodes and destinations, or remove a dead node",
	about:   "Shows a cluster as one of its nodes sees it, or takes a dead node out of it.",
	subs: map[string]*command{
		"status": {
			summary: "the cluster's nodes and destinations, as one node sees them",
			usage:   "cluster status [--server URL] [--json]",
			about: "Shows the cluster's nodes (gossip state, Raft role, addresses) and destinations\n" +
				"(owner, epoch, seq, largest lag), as the node at --server sees them.",
			run: runClusterStatus,
		},
		"remove": {
			summary: "take a dead node out of the Raft configuration",
			usage:   "cluster remove NODE [--server URL] [--json]",
			about: "Takes dead node NODE out of the Raft configuration, so that the quorum no longer\n" +
				"counts it (the leader does so by itself after braid server's reap-dead-after once\n" +
				"three voters stay without it); a live node is refused: stop it first.",
			run: runClusterRemove,
		},
	},
}

func runClusterStatus(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdmin(newFlags("cluster status", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	if len(a.names) > 0 {
		fmt.Fprintf(stderr, "braid cluster status: unexpected argument %q; see braid cluster status --help\n", a.names[0])
		return 2
	}
	st, err := a.ac.ClusterStatus(a.ctx)
	if err != nil {
		return a.fail(err)
	}
	if a.asJSON {
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

func runClusterRemove(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdmin(newFlags("cluster remove", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	if len(a.names) != 1 {
		fmt.Fprintln(stderr, "braid cluster remove: name the dead node to remove, e.g. braid cluster remove n3 (braid cluster status lists them)")
		return 2
	}
	res, err := a.ac.RemoveNode(a.ctx, a.names[0])
	if err != nil {
		return a.fail(err)
	}
	if a.asJSON {
		printJSON(stdout, res)
		return 0
	}
	fmt.Fprintf(stdout, "removed node %s from raft; voters now: %s\n", res.Removed, strings.Join(res.Voters, ", "))
	return 0
}

// adminCommand is what the leaves of braid's admin commands share: the
// names after the command, the flags startAdmin adds (--server, --json,
// the credential), a client and a context for the call, and how to fail.
type adminCommand struct {
	path   string // "consumer list"
	names  []string
	asJSON bool
	ac     *client.Client
	ctx    context.Context
	cancel context.CancelFunc
	fail   func(error) int // prints "braid PATH: error" on stderr; 1
}

// startAdmin adds the admin flags to fs, a leaf's FlagSet (newFlags,
// with the leaf's own flags defined), and parses args: the names and
// flags in any order. It returns ok false with the exit code when
// parsing ended it (help, a usage error, or a client that cannot be
// made); call cancel when done.
func startAdmin(fs *flag.FlagSet, args []string, stderr io.Writer) (a *adminCommand, code int, ok bool) {
	a = &adminCommand{path: fs.Name()}
	conn, asJSON := adminFlags(fs)
	if a.names, code, ok = parseNames(fs, args, stderr); !ok {
		return nil, code, false
	}
	a.asJSON = *asJSON
	a.fail = func(err error) int {
		fmt.Fprintf(stderr, "braid %s: %s\n", a.path, oneLine(callError(a.path, conn.server, err)))
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

// startAdminOnDestination is startAdmin for a command that takes one
// destination's name, and nothing else, as its argument.
func startAdminOnDestination(fs *flag.FlagSet, args []string, stderr io.Writer) (a *adminCommand, code int, ok bool) {
	if a, code, ok = startAdmin(fs, args, stderr); !ok {
		return nil, code, false
	}
	if !a.oneName(stderr, "destination", "shop") {
		a.cancel()
		return nil, 2, false
	}
	return a, 0, true
}

// oneName checks that the command was given one name, of a what (e.g.
// "destination"), saying on stderr how to give it when not.
func (a *adminCommand) oneName(stderr io.Writer, what, example string) bool {
	if len(a.names) == 1 {
		return true
	}
	fmt.Fprintf(stderr, "braid %s: name the %s, e.g. braid %s %s\n", a.path, what, a.path, example)
	return false
}
