// Command braid turns the binlogs of MySQL/MariaDB shards into one ordered
// change stream. See README.md and docs/.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
)

// The command table: every command braid has, each leaf with a FlagSet
// of its own.
//
// Why stdlib flag and not spf13/cobra (which etcdctl, dmctl and vitess
// use, and which the module proxy has): braid has about twenty-five leaf
// commands, two levels deep, and what cobra would add over this table is
// shell completion and generated help. Completion matters little for a
// tool whose commands are typed once in a runbook; the help here is
// written per command (what it does, its exit codes), which cobra would
// not write either; and cobra brings pflag, whose GNU-style parsing
// (--flag only, -f as a shorthand, flags after arguments interleaved)
// differs from the flag package's, so every documented command line
// (README, docs/, the doc tests that run them) would have to be checked
// again. What cobra does give for free is done here in a few lines: one
// FlagSet per leaf (newFlags), help that lists only the leaf's own flags,
// an unknown flag refused with the command's name (parseFlags), and a
// test that walks this table (TestLeafFlags).

// command is a command of braid: a leaf that runs (run), or a group of
// leaves (subs), such as destination's create, list, show and delete.
type command struct {
	summary string // one line, for the parent's list
	// usage is a leaf's synopsis after "braid ", one line per form (a
	// top-level leaf prints its own help and leaves it empty).
	usage string
	// about is what a leaf's --help says after its usage, or a group's
	// --help after its leaves' usages.
	about string
	run   func(args []string, stdout, stderr io.Writer) int
	subs  map[string]*command
}

// commands is set in init: its leaves' run functions read it for their
// help (newFlags), which a variable's initializer could not.
var commands map[string]*command

func init() {
	commands = map[string]*command{
		"capture": {summary: "read a destination's sources, merge them, and print the stream as flat-message JSON lines or serve it (canal protocol, HTTP)", run: runCapture},
		"server":  {summary: "run a node of a braid cluster", run: runServer},
		"demo": {summary: "start three shards and a three-node cluster on this machine, stream a live order workload, and show a takeover",
			usage: "demo [--duration D] [--rate N] [--kill-after D] [--dir DIR] [--json] [--log-level L]",
			about: "Braid on one machine, from nothing: starts three MariaDB shard servers (a, b, c)\n" +
				"holding shop_0 … shop_5 (two schemas each, an orders table in each), three braid\n" +
				"nodes (n1, n2, n3) that form a cluster, and registers the destination shop, which\n" +
				"merges the six orders tables into shop.orders. It then writes orders into the\n" +
				"shards and prints the merged stream, one line per row change, and tells you how\n" +
				"to kill the node that runs shop (kill -9 PID) and watch another take it over; the\n" +
				"demo restarts a killed node so you can do it again. Ctrl-C stops everything and\n" +
				"removes what it made (unless --dir). With --duration it stops by itself, after\n" +
				"checking that every transaction the workload committed arrived, once, in seq order.\n" +
				"\nNeeds mariadbd (on PATH or in /usr/sbin); the system service need not run.\n" +
				"Exits 1 when a step fails (the message says which, and where the logs are).",
			run: runDemo},
		"destination": destinationCommand,
		"cluster":     clusterCommand,
		"consumer":    consumerCommand,
		"ddl":         ddlCommand,
		"sink":        sinkCommand,
		"tail":        {summary: "print a destination's stream from a braid node, acking as it goes", run: runTail},
		"certs":       certsCommand,
		"users":       usersCommand,
		"version":     {summary: "print braid's version", usage: "version", about: "Prints braid's version: the tag or (devel), the VCS revision and time, and the Go version.", run: runVersion},
	}
}

// version, when set at build time with -ldflags "-X main.version=...",
// is braid's version; otherwise buildVersion reads it from the build.
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		return runVersion(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "braid: unknown command %q; run 'braid --help' for the list\n", args[0])
		return 2
	}
	if cmd.subs != nil {
		return runGroup(args[0], cmd, args[1:], stdout, stderr)
	}
	return cmd.run(args[1:], stdout, stderr)
}

// runGroup runs the leaf of group name that args start with; with none,
// or -h/--help/help, it prints the group's help (exit 2 and 0).
func runGroup(name string, g *command, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		groupUsage(stderr, name, g)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	leaf, ok := g.subs[args[0]]
	if !ok {
		subs := sortedNames(g.subs)
		fmt.Fprintf(stderr, "braid %s: unknown subcommand %q: use %s or %s (braid %s --help)\n",
			name, args[0], strings.Join(subs[:len(subs)-1], ", "), subs[len(subs)-1], name)
		return 2
	}
	return leaf.run(args[1:], stdout, stderr)
}

// groupUsage is a group's --help: its leaves' usages, what it does, and
// where each leaf's flags are.
func groupUsage(w io.Writer, name string, g *command) {
	prefix := "Usage: "
	for _, sub := range sortedNames(g.subs) {
		for _, l := range strings.Split(g.subs[sub].usage, "\n") {
			fmt.Fprintf(w, "%sbraid %s\n", prefix, l)
			prefix = "       "
		}
	}
	fmt.Fprintln(w, "\n"+g.about)
	fmt.Fprintln(w)
	for _, sub := range sortedNames(g.subs) {
		fmt.Fprintf(w, "  %-11s %s\n", sub, g.subs[sub].summary)
	}
	fmt.Fprintf(w, "\nRun 'braid %s SUBCOMMAND --help' for its flags.\n", name)
}

// sortedNames is the names of subs, sorted.
func sortedNames(subs map[string]*command) []string {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// leafOf is the leaf command of path ("destination list", "version"),
// or nil.
func leafOf(path string) *command {
	group, sub, ok := strings.Cut(path, " ")
	c := commands[group]
	if ok && c != nil {
		c = c.subs[sub]
	}
	return c
}

// newFlags is the FlagSet of the leaf command path ("destination list"):
// its --help prints, on stderr, the leaf's usage and about (from the
// command table) and its own flags, nothing of its siblings'.
func newFlags(path string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		c := leafOf(path)
		prefix := "Usage: "
		for _, l := range strings.Split(c.usage, "\n") {
			fmt.Fprintf(stderr, "%sbraid %s\n", prefix, l)
			prefix = "       "
		}
		fmt.Fprintln(stderr, "\n"+c.about)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(stderr, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "braid turns the binlogs of MySQL/MariaDB shards into one ordered change stream.")
	fmt.Fprintln(w, "\nUsage: braid COMMAND [flags]\n\nCommands:")
	for _, n := range sortedNames(commands) {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'braid COMMAND --help' for a command's flags, 'braid --version' for the version.")
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	if code, ok := parseFlags(newFlags("version", stderr), args, stderr, true); !ok {
		return code
	}
	fmt.Fprintln(stdout, "braid", buildVersion())
	return 0
}

// buildVersion is braid's version: -X main.version if set, else the
// module version Go recorded (a tag, or "(devel)" for a source tree) with
// the VCS revision, its time and whether the tree was modified.
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (built without module information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (%s %s%s)", rev[:min(12, len(rev))], at, dirty)
	}
	return v + " " + bi.GoVersion
}

// parseFlags parses a command's flags. ok is false when the command must
// exit with code: 0 after --help (fs.Usage printed it), 2 after a bad
// flag or, with noArgs, a stray argument (said on stderr in one line
// naming the command: braid destination list: flag provided but not
// defined: -f).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, noArgs bool) (code int, ok bool) {
	// The flag package prints a bad flag's error and then the whole usage
	// to fs's output; the usage is its on --help only, the error ours.
	out, usage := fs.Output(), fs.Usage
	if usage == nil {
		usage = fs.PrintDefaults
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return 0, false
		}
		fmt.Fprintf(stderr, "braid %s: %v; see braid %s --help\n", fs.Name(), err, fs.Name())
		return 2, false
	}
	if noArgs && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "braid %s: unexpected argument %q; see braid %s --help\n", fs.Name(), fs.Arg(0), fs.Name())
		return 2, false
	}
	return 0, true
}

// parseNamed parses the flags of a command that takes one name, before or
// after its flags (braid tail shop --max 5, braid tail --max 5 shop); code
// and ok are parseFlags'. The name is "" when none is given.
func parseNamed(fs *flag.FlagSet, args []string, stderr io.Writer) (name string, code int, ok bool) {
	names, code, ok := parseNames(fs, args, stderr)
	if len(names) > 0 {
		name = names[0]
	}
	return name, code, ok
}

// parseNames parses a command's flags and the names around them (braid
// consumer drop shop cache --server URL, braid consumer drop --json shop
// cache); code and ok are parseFlags'.
func parseNames(fs *flag.FlagSet, args []string, stderr io.Writer) (names []string, code int, ok bool) {
	for {
		for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			names, args = append(names, args[0]), args[1:]
		}
		if code, ok := parseFlags(fs, args, stderr, false); !ok {
			return nil, code, false
		}
		if fs.NArg() == len(args) || fs.NArg() == 0 {
			return append(names, fs.Args()...), 0, true
		}
		args = fs.Args()
	}
}

// packagePrefix matches the "stream: " a braid package puts before its
// errors: it tells a developer where an error came from, and an operator
// nothing.
var packagePrefix = regexp.MustCompile(`(?m)(^|: |; )(?:spec|change|schema|binlog|group|stream|flat|native|canal|wire|raftstore|cluster|client|auth|pki|secret): `)

// withoutPrefixes is an error's text without braid's package prefixes.
func withoutPrefixes(msg string) string {
	for {
		out := packagePrefix.ReplaceAllString(msg, "$1")
		if out == msg {
			return out
		}
		msg = out
	}
}

// oneLine folds an error (possibly joined, or a YAML error of several
// lines) onto one line for stderr: its lines joined with "; ", without
// braid's package prefixes.
func oneLine(err error) string {
	var b strings.Builder
	for _, l := range strings.Split(withoutPrefixes(err.Error()), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// errorLines is an error of several problems (errors.Join) as one line
// each, for commands that list every problem of their input.
func errorLines(err error) []string {
	return strings.Split(strings.TrimSpace(withoutPrefixes(err.Error())), "\n")
}
