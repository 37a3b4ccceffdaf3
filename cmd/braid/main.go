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
	"slices"
	"sort"
	"strings"
)

// command is one subcommand; each lives in its own file.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"capture":     {"read a destination's sources, merge them, and print the stream as flat-message JSON lines or serve it (canal protocol, HTTP)", runCapture},
	"server":      {"run a node of a braid cluster", runServer},
	"demo":        {"start three shards and a three-node cluster on this machine, stream a live order workload, and show a takeover", runDemo},
	"destination": {"create, list, show or delete a cluster's destinations", runDestination},
	"cluster":     {"show a cluster's nodes and destinations, or remove a dead node", runCluster},
	"consumer":    {"list a destination's consumers (client ids), or drop one with its cursor", runConsumer},
	"ddl":         {"list a destination's shard-DDL locks, or release one (unlock: emit its DDL; skip: emit nothing)", runDDL},
	"sink":        {"a destination's sinks: list and show them (applied seq, lag, rows, errors), verify a target against the sources", runSink},
	"tail":        {"print a destination's stream from a braid node, acking as it goes", runTail},
	"certs":       {"make the CA, node certificates and gossip key a secure cluster needs", runCerts},
	"users":       {"hash a password for a --users-file, or check such a file", runUsers},
	"version":     {"print braid's version", runVersion},
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
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "braid turns the binlogs of MySQL/MariaDB shards into one ordered change stream.")
	fmt.Fprintln(w, "\nUsage: braid COMMAND [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'braid COMMAND --help' for a command's flags, 'braid --version' for the version.")
}

func runVersion(args []string, stdout, stderr io.Writer) int {
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
// exit with code: 0 after --help, 2 after a bad flag (the flag package
// said which) or, with noArgs, a stray argument.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, noArgs bool) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if noArgs && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "braid %s: unexpected argument %q; see braid %s --help\n", fs.Name(), fs.Arg(0), fs.Name())
		return 2, false
	}
	return 0, true
}

// subcommand checks that args start with one of subs; when not, it prints
// usage and ok is false with the exit code: 0 for -h/--help, 2 else.
func subcommand(args []string, usage func(), subs ...string) (code int, ok bool) {
	if len(args) > 0 && slices.Contains(subs, args[0]) {
		return 0, true
	}
	usage()
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		return 0, false
	}
	return 2, false
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
