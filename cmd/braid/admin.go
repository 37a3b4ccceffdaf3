package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/braid-cdc/braid/cluster"
)

// adminClient talks to a node's HTTP API for the operator commands.
type adminClient struct {
	base string
	hc   *http.Client
}

func newAdminClient(server string) (*adminClient, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q is not a node's HTTP address such as http://127.0.0.1:8081", server)
	}
	return &adminClient{base: strings.TrimRight(server, "/"), hc: &http.Client{Timeout: 30 * time.Second}}, nil
}

// do sends a request and decodes a 2xx answer into out; any other status
// becomes the node's error message.
func (a *adminClient) do(method, path string, body []byte, out any) error {
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %v: is a braid server running there?", a.base, rootErr(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func rootErr(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// adminFlags are the flags every operator command takes.
func adminFlags(fs *flag.FlagSet) (server *string, asJSON *bool) {
	server = fs.String("server", "http://127.0.0.1:8081", "a braid node's HTTP address (any node of the cluster)")
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
	server, asJSON := adminFlags(fs)
	file := fs.String("f", "", "create: the destination spec file (YAML or JSON; see README)")
	force := fs.Bool("force", false, "delete: even if consumers have cursors (they lose their place)")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if code, ok := parseFlags(fs, args, stderr, false); !ok {
		return code
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "braid destination %s: %s\n", sub, oneLine(err))
		return 1
	}
	ac, err := newAdminClient(*server)
	if err != nil {
		return fail(err)
	}
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
			fmt.Fprintln(stderr, "braid destination create: give the spec with -f spec.yaml (see README for the format)")
			return 2
		}
		spec, err := os.ReadFile(*file)
		if err != nil {
			return fail(err)
		}
		var info cluster.DestinationInfo
		if err := ac.do(http.MethodPost, "/v1/destinations", spec, &info); err != nil {
			return fail(err)
		}
		if *asJSON {
			printJSON(stdout, info)
		} else {
			fmt.Fprintf(stdout, "destination %s created with %d sources; a node will take it in a moment (braid destination show %s)\n",
				info.Name, len(info.Spec.Sources), info.Name)
		}
	case "list":
		var st cluster.ClusterStatus
		if err := ac.do(http.MethodGet, "/v1/cluster", nil, &st); err != nil {
			return fail(err)
		}
		if *asJSON {
			printJSON(stdout, st.Destinations)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tOWNER\tEPOCH\tSOURCES\tSEQ\tMAX LAG")
		for _, d := range st.Destinations {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", d.Name, orDash(d.Owner), d.Epoch, len(d.Spec.Sources), d.Seq, maxLag(d))
		}
		tw.Flush()
	case "show":
		if !needName() {
			return 2
		}
		var info cluster.DestinationInfo
		if err := ac.do(http.MethodGet, "/v1/destinations/"+url.PathEscape(name)+"/spec", nil, &info); err != nil {
			return fail(err)
		}
		if *asJSON {
			printJSON(stdout, info)
			return 0
		}
		showDestination(stdout, info)
	case "delete":
		if !needName() {
			return 2
		}
		path := "/v1/destinations/" + url.PathEscape(name)
		if *force {
			path += "?force=true"
		}
		if err := ac.do(http.MethodDelete, path, nil, nil); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "destination %s deleted\n", name)
	default:
		fmt.Fprintf(stderr, "braid destination: unknown subcommand %q: use create, list, show or delete\n", sub)
		return 2
	}
	return 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// maxLag is the largest lag of a destination's sources, as text.
func maxLag(d cluster.DestinationInfo) string {
	if d.StateError != "" {
		return "? (" + d.StateError + ")"
	}
	var most int64 = -1
	for _, s := range d.Sources {
		if s.LagMs != nil && *s.LagMs > most {
			most = *s.LagMs
		}
	}
	if most < 0 {
		return "-"
	}
	return (time.Duration(most) * time.Millisecond).Round(time.Millisecond).String()
}

func showDestination(w io.Writer, info cluster.DestinationInfo) {
	fmt.Fprintf(w, "destination %s: owner %s, epoch %d, last seq %d\n", info.Name, orDash(info.Owner), info.Epoch, info.Seq)
	if info.StateError != "" {
		fmt.Fprintf(w, "state: unavailable (%s)\n", info.StateError)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(info.Sources) > 0 {
		fmt.Fprintln(tw, "\nSOURCE\tPOSITION\tLAG\tWAITING")
		for _, s := range info.Sources {
			lag := "-"
			if s.LagMs != nil {
				lag = (time.Duration(*s.LagMs) * time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", s.Name, s.Pos, lag, s.Waiting)
		}
	}
	if len(info.Clients) > 0 {
		fmt.Fprintln(tw, "\nCLIENT ID\tACKED SEQ\tUNACKED EVENTS\tSTREAMING")
		for _, c := range info.Clients {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%v\n", c.ID, c.AckedSeq, c.Unacked, c.Streaming)
		}
	}
	tw.Flush()
	spec, _ := yaml.Marshal(info.Spec)
	fmt.Fprintf(w, "\nspec:\n%s", indent(string(spec), "  "))
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
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, "Usage: braid cluster status [--server URL] [--json]")
		fmt.Fprintln(stderr, "\nShows the cluster's nodes (gossip state, Raft role, addresses) and destinations")
		fmt.Fprintln(stderr, "(owner, epoch, per-source lag), as one node sees them.")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	fs := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server, asJSON := adminFlags(fs)
	if code, ok := parseFlags(fs, args[1:], stderr, false); !ok {
		return code
	}
	ac, err := newAdminClient(*server)
	if err != nil {
		fmt.Fprintln(stderr, "braid cluster status:", oneLine(err))
		return 1
	}
	var st cluster.ClusterStatus
	if err := ac.do(http.MethodGet, "/v1/cluster", nil, &st); err != nil {
		fmt.Fprintln(stderr, "braid cluster status:", oneLine(err))
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
