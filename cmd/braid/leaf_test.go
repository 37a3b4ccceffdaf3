package main

import (
	"bytes"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// leafFlags is every leaf command of braid with the flags it takes, as
// this test's own record: a leaf added to the command table without a
// line here fails the test, and so does a flag a leaf gains or loses.
var leafFlags = map[string][]string{
	"capture":                 {"canal-password-file", "canal-port", "canal-user", "cursor-dir", "f", "http-host", "http-port", "listen", "log-level", "max", "max-connections", "quiet", "sandbox", "secrets-dir", "secrets-env-prefix", "timeout", "users-file"},
	"server":                  {"addr", "bootstrap-expect", "canal-password-file", "canal-port", "canal-user", "cluster", "config", "data-dir", "gossip-advertise", "gossip-key-file", "gossip-port", "http-host", "http-port", "http-tls-cert", "http-tls-key", "insecure", "join", "lease", "log-level", "max-connections", "name", "raft-advertise", "raft-port", "reap-dead-after", "secrets-dir", "secrets-env-prefix", "secrets-key-file", "tls-ca", "tls-cert", "tls-key", "users-file"},
	"demo":                    {"dir", "duration", "json", "kill-after", "log-level", "rate"},
	"tail":                    {"ca", "client-id", "from", "log-level", "max", "server", "timeout", "token-file"},
	"version":                 {},
	"destination accept-lost": {"ca", "json", "server", "token-file"},
	"destination create":      {"ca", "f", "json", "server", "token-file"},
	"destination list":        {"ca", "json", "server", "token-file"},
	"destination show":        {"ca", "json", "server", "token-file"},
	"destination delete":      {"ca", "force", "json", "server", "token-file"},
	"cluster status":          {"ca", "json", "server", "token-file"},
	"cluster remove":          {"ca", "json", "server", "token-file"},
	"consumer list":           {"ca", "json", "server", "token-file"},
	"consumer drop":           {"ca", "json", "server", "token-file"},
	"ddl list":                {"ca", "json", "server", "token-file"},
	"ddl unlock":              {"ca", "json", "server", "token-file"},
	"ddl skip":                {"ca", "json", "server", "token-file"},
	"sink list":               {"ca", "json", "server", "token-file"},
	"sink show":               {"ca", "json", "server", "token-file"},
	"sink verify":             {"ca", "f", "json", "sample", "secrets-dir", "secrets-env-prefix", "server", "table", "timeout", "token-file"},
	"certs init":              {"dir"},
	"certs node":              {"addr", "dir", "name"},
	"certs gossip-key":        {"out"},
	"users hash":              {},
	"users check":             {"users-file"},
}

// leaves is every leaf of the command table, by path ("destination
// list"), with the paths of its siblings (the other leaves of its group,
// or the other top-level leaves).
func leaves() map[string][]string {
	out := map[string][]string{}
	var top []string
	for name, c := range commands {
		if c.subs == nil {
			top = append(top, name)
			continue
		}
		var subs []string
		for sub := range c.subs {
			subs = append(subs, name+" "+sub)
		}
		for _, p := range subs {
			out[p] = subs
		}
	}
	for _, p := range top {
		out[p] = top
	}
	return out
}

var (
	// helpFlagRE is a flag's line in the Flags: part of a --help.
	helpFlagRE = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	// synopsisFlagWordRE is a flag in a usage line.
	synopsisFlagWordRE = regexp.MustCompile(`(?:^|[\s\[|])--?([a-z][a-z0-9-]*)`)
)

// TestLeafFlags walks every leaf command of the table: its --help shows
// its own usage, whose lines name only its flags, and lists exactly its
// flags; a flag of a sibling (braid destination list -f x) is refused
// with exit 2 and an error naming the command.
func TestLeafFlags(t *testing.T) {
	all := leaves()
	if got, want := slices.Sorted(maps.Keys(all)), slices.Sorted(maps.Keys(leafFlags)); !slices.Equal(got, want) {
		t.Fatalf("the command table's leaves are\n  %q\nthis test knows\n  %q", got, want)
	}
	for path, siblings := range all {
		args := strings.Fields(path)
		own := leafFlags[path]
		t.Run(strings.ReplaceAll(path, " ", "_"), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(append(slices.Clone(args), "--help"), &out, &errb); code != 0 {
				t.Fatalf("braid %s --help: exit %d, stderr:\n%s", path, code, errb.String())
			}
			help := errb.String()
			if !strings.HasPrefix(help, "Usage: braid "+path) {
				t.Errorf("braid %s --help does not start with its usage:\n%s", path, help)
			}
			var listed []string
			if _, flagsPart, ok := strings.Cut(help, "\nFlags:\n"); ok {
				for _, m := range helpFlagRE.FindAllStringSubmatch(flagsPart, -1) {
					listed = append(listed, m[1])
				}
			}
			slices.Sort(listed)
			if !slices.Equal(listed, own) {
				t.Errorf("braid %s --help lists the flags\n  %q\nwant\n  %q", path, listed, own)
			}
			usage, _, _ := strings.Cut(help, "\n\n")
			for _, m := range synopsisFlagWordRE.FindAllStringSubmatch(usage, -1) {
				if !slices.Contains(own, m[1]) {
					t.Errorf("braid %s's usage names -%s, not one of its flags:\n%s", path, m[1], usage)
				}
			}

			// A sibling's flag, the first (by name) this leaf lacks.
			foreign := "no-such-flag"
		search:
			for _, sib := range slices.Sorted(slices.Values(siblings)) {
				for _, f := range leafFlags[sib] {
					if !slices.Contains(own, f) {
						foreign = f
						break search
					}
				}
			}
			out.Reset()
			errb.Reset()
			code := run(append(slices.Clone(args), "--"+foreign, "x"), &out, &errb)
			want := "braid " + path + ": flag provided but not defined: -" + foreign
			if code != 2 || !strings.Contains(errb.String(), want) || strings.Count(errb.String(), "\n") != 1 {
				t.Errorf("braid %s --%s x: exit %d, stderr %q; want exit 2 and the one line %q", path, foreign, code, errb.String(), want)
			}
			if out.Len() > 0 {
				t.Errorf("braid %s --%s x printed on stdout: %q", path, foreign, out.String())
			}
		})
	}
}

// TestGroupHelp: a group's --help names each of its leaves with its
// usage, and an unknown leaf is refused in one line.
func TestGroupHelp(t *testing.T) {
	for name, c := range commands {
		if c.subs == nil {
			continue
		}
		var out, errb bytes.Buffer
		if code := run([]string{name, "--help"}, &out, &errb); code != 0 {
			t.Errorf("braid %s --help: exit %d", name, code)
		}
		for sub, leaf := range c.subs {
			if first, _, _ := strings.Cut(leaf.usage, "\n"); !strings.Contains(errb.String(), "braid "+first+"\n") {
				t.Errorf("braid %s --help lacks braid %s's usage %q:\n%s", name, sub, first, errb.String())
			}
		}
		errb.Reset()
		if code := run([]string{name, "frobnicate"}, &out, &errb); code != 2 || strings.Count(errb.String(), "\n") != 1 ||
			!strings.Contains(errb.String(), "braid "+name+`: unknown subcommand "frobnicate"`) {
			t.Errorf("braid %s frobnicate: exit %d, stderr %q", name, code, errb.String())
		}
	}
}
