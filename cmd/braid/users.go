package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/braid-cdc/braid/auth"
)

// usersStdin is where braid users hash reads the password; tests replace
// it. The password comes from stdin only: a flag would put it in the
// shell's history and in every process listing.
var usersStdin io.Reader = os.Stdin

// pipeExample is how to give braid users hash a password kept in a shell
// variable (read -s PW): printf is a builtin, so the password is in no
// process's arguments.
var pipeExample = `printf '%s\n' "$PW" | braid users hash`

// maxPasswordLine bounds what braid users hash reads from stdin.
const maxPasswordLine = 64 << 10

// usersCommand is braid users' leaves.
var usersCommand = &command{
	summary: "hash a password for a --users-file, or check such a file",
	about:   "A users file (YAML, braid server --users-file) lists who may call the HTTP API and\nlog in on the canal port, with their roles and password hashes.",
	subs: map[string]*command{
		"hash": {
			summary: "print a password's hash for a users file",
			usage:   "users hash < PASSWORD-FILE",
			about: "Reads a password from the first line of stdin and prints its password_hash for a\n" +
				"users file (braid server --users-file): e.g.\n  " + pipeExample,
			run: runUsersHash,
		},
		"check": {
			summary: "list a users file's users, or every problem it has",
			usage:   "users check --users-file FILE",
			about:   "Reads a users file and lists its users, roles and destinations, or every problem it\nhas.",
			run:     runUsersCheck,
		},
	},
}

func runUsersHash(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("users hash", stderr)
	if code, ok := parseFlags(fs, args, stderr, false); !ok {
		return code
	}
	if fs.NArg() > 0 {
		// Not parseFlags' message: it would repeat the argument, which may
		// be the password.
		fmt.Fprintln(stderr, "braid users hash: takes no arguments: give the password on stdin, e.g. "+pipeExample)
		return 2
	}
	if f, ok := usersStdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintln(stderr, "braid users hash: type the password and press Enter (it shows as you type; a pipe keeps it off the screen)")
		}
	}
	line, err := bufio.NewReader(io.LimitReader(usersStdin, maxPasswordLine)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(stderr, "braid users hash: reading the password from stdin:", oneLine(err))
		return 1
	}
	password := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if password == "" {
		fmt.Fprintln(stderr, "braid users hash: no password on stdin: give it as the first line, e.g. "+pipeExample)
		return 2
	}
	hash, err := auth.HashPassword(password)
	if err != nil {
		fmt.Fprintln(stderr, "braid users hash:", oneLine(err))
		return 1
	}
	fmt.Fprintln(stdout, hash)
	fmt.Fprintln(stderr, "braid users hash: put it in the users file of braid server --users-file (keep that file mode 0600):")
	fmt.Fprintln(stderr, "  users:")
	fmt.Fprintln(stderr, "    - name: app1")
	fmt.Fprintln(stderr, "      password_hash: \"<the hash printed above>\"")
	fmt.Fprintln(stderr, "      role: consumer        # or admin, who may do everything")
	fmt.Fprintln(stderr, "      destinations: [shop]  # what a consumer may stream and ack; \"*\" is all")
	return 0
}

func runUsersCheck(args []string, stdout, stderr io.Writer) int {
	set := newFlags("users check", stderr)
	file := set.String("users-file", "", "the users file to check (YAML; see braid users --help)")
	if code, ok := parseFlags(set, args, stderr, true); !ok {
		return code
	}
	if *file == "" {
		fmt.Fprintln(stderr, "braid users check: name the file with --users-file FILE")
		return 2
	}
	us, err := auth.LoadUsers(*file)
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		fmt.Fprintln(stderr, "braid users check:", oneLine(err))
		return 1
	case err != nil:
		for _, line := range errorLines(err) {
			fmt.Fprintln(stderr, "braid users check:", line)
		}
		return 2
	}
	warnIfShared(*file, stderr)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tDESTINATIONS")
	for _, u := range us.List() {
		dests := strings.Join(u.Destinations, ",")
		if u.IsAdmin() {
			dests = "(all)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, u.Role, dests)
	}
	tw.Flush()
	return 0
}

// warnIfShared warns when others than the file's owner may read the users
// file: its SHA1(SHA1(pw)) parts let whoever reads them log in through
// canal.
func warnIfShared(path string, stderr io.Writer) {
	if runtime.GOOS == "windows" {
		return // no Unix modes
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	fmt.Fprintf(stderr, "braid users check: warning: %s is mode %04o, open to others than its owner: its hashes let a reader log in through canal; chmod 600 %s\n",
		path, fi.Mode().Perm(), path)
}
