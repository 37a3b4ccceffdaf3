package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// configFlags is a small FlagSet named like braid server's, with one flag
// of each kind applyConfig meets, parsed from args.
type configFlags struct {
	fs       *flag.FlagSet
	name     string
	httpPort int
	insecure bool
	lease    time.Duration
	join     string
	config   string
}

func newConfigFlags(t *testing.T, args ...string) *configFlags {
	t.Helper()
	f := &configFlags{fs: flag.NewFlagSet("server", flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard)
	f.fs.StringVar(&f.name, "name", "", "node name")
	f.fs.IntVar(&f.httpPort, "http-port", 8081, "HTTP port")
	f.fs.BoolVar(&f.insecure, "insecure", false, "run unprotected")
	f.fs.DurationVar(&f.lease, "lease", 5*time.Second, "ownership lease")
	f.fs.StringVar(&f.join, "join", "", "comma-separated gossip addresses to join")
	f.fs.StringVar(&f.config, "config", "", "YAML file of flags")
	if err := f.fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "n1.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// env is a getenv over a map.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestApplyConfigFileOnly: every kind of flag takes the file's value; a
// list is joined with commas; a key the file lacks keeps its default.
func TestApplyConfigFileOnly(t *testing.T) {
	f := newConfigFlags(t)
	path := writeConfig(t, `# node one
name: n1
http-port: 9001
insecure: true
join: [127.0.0.1:7102, 127.0.0.1:7103]
`)
	if err := applyConfig(f.fs, path, env(nil)); err != nil {
		t.Fatal(err)
	}
	if f.name != "n1" || f.httpPort != 9001 || !f.insecure || f.join != "127.0.0.1:7102,127.0.0.1:7103" || f.lease != 5*time.Second {
		t.Errorf("got name=%q http-port=%d insecure=%v join=%q lease=%v", f.name, f.httpPort, f.insecure, f.join, f.lease)
	}
}

// TestApplyConfigPrecedence: the command line beats $BRAID_<FLAG>, which
// beats the file, which beats the default; the file's underscore
// spelling is the same key.
func TestApplyConfigPrecedence(t *testing.T) {
	for _, tc := range []struct {
		why  string
		args []string
		file string
		env  map[string]string
		want int
	}{
		{"default", nil, "name: n1\n", nil, 8081},
		{"file", nil, "http-port: 9001\n", nil, 9001},
		{"underscore key", nil, "http_port: 9002\n", nil, 9002},
		{"env beats file", nil, "http-port: 9001\n", map[string]string{"BRAID_HTTP_PORT": "9003"}, 9003},
		{"empty env is unset", nil, "http-port: 9001\n", map[string]string{"BRAID_HTTP_PORT": ""}, 9001},
		{"flag beats env", []string{"--http-port", "9004"}, "http-port: 9001\n", map[string]string{"BRAID_HTTP_PORT": "9003"}, 9004},
		{"flag beats file", []string{"--http-port=9005"}, "http-port: 9001\n", nil, 9005},
		{"a flag given its default still wins", []string{"--http-port", "8081"}, "http-port: 9001\n", map[string]string{"BRAID_HTTP_PORT": "9003"}, 8081},
	} {
		t.Run(tc.why, func(t *testing.T) {
			f := newConfigFlags(t, tc.args...)
			if err := applyConfig(f.fs, writeConfig(t, tc.file), env(tc.env)); err != nil {
				t.Fatal(err)
			}
			if f.httpPort != tc.want {
				t.Errorf("http-port = %d, want %d", f.httpPort, tc.want)
			}
		})
	}
	t.Run("env without file", func(t *testing.T) {
		f := newConfigFlags(t)
		if err := applyConfig(f.fs, "", env(map[string]string{"BRAID_REAP_DEAD_AFTER": "x", "BRAID_LEASE": "9s", "BRAID_JOIN": "a:1,b:2"})); err != nil {
			t.Fatal(err)
		}
		if f.lease != 9*time.Second || f.join != "a:1,b:2" {
			t.Errorf("lease=%v join=%q", f.lease, f.join)
		}
	})
}

// TestApplyConfigReadsOnlyFlagVariables: applyConfig asks only for the
// variables of flags (never $BRAID_CONFIG), so BRAID_TOKEN and
// BRAID_CANAL_PASSWORD, which are no flags, keep their own meaning.
func TestApplyConfigReadsOnlyFlagVariables(t *testing.T) {
	f := newConfigFlags(t)
	vars := map[string]string{"BRAID_TOKEN": "admin:pw", "BRAID_CANAL_PASSWORD": "pw", "BRAID_CONFIG": "/nonexistent.yaml", "BRAID_HELP": "1"}
	var asked []string
	getenv := func(k string) string { asked = append(asked, k); return vars[k] }
	if err := applyConfig(f.fs, "", getenv); err != nil {
		t.Fatal(err)
	}
	slices.Sort(asked)
	if want := []string{"BRAID_HTTP_PORT", "BRAID_INSECURE", "BRAID_JOIN", "BRAID_LEASE", "BRAID_NAME"}; !slices.Equal(asked, want) {
		t.Errorf("asked for %q, want %q", asked, want)
	}
	if f.config != "" {
		t.Errorf("--config = %q from the environment", f.config)
	}
}

// TestApplyConfigErrors: every problem of the file and the environment
// comes at once, one line each, naming the file and line or the variable,
// in the order of the file.
func TestApplyConfigErrors(t *testing.T) {
	path := writeConfig(t, `name: n1
nmae: n2
http-port: "x"
http_port: 9001
config: other.yaml
help: true
lease: 10
insecure: maybe
name: [a, b]
join: {a: 1}
`)
	f := newConfigFlags(t)
	err := applyConfig(f.fs, path, env(map[string]string{"BRAID_JOIN": "a:1", "BRAID_LEASE": "soon"}))
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		"--config " + path + ":2: nmae: not a flag of braid server: see braid server --help",
		"--config " + path + ":3: http-port: \"x\": invalid value (parse error): give a whole number",
		"--config " + path + ":4: http_port: given twice (also line 3): keep one",
		"--config " + path + ":5: config: a config file cannot name another: give --config on the command line",
		"--config " + path + ":6: help: not a setting: run braid server --help",
		"--config " + path + ":8: insecure: \"maybe\": invalid value (parse error): give true or false",
		"--config " + path + ":9: name: given twice (also line 1): keep one",
		"--config " + path + ":10: join: a mapping, but --join takes one value",
		"$BRAID_LEASE=\"soon\": invalid value (parse error): give a duration such as 10s or 1m30s",
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	// lease: 10 was overridden by the environment, so never parsed; a
	// file's valid keys are applied despite the errors.
	if f.name != "n1" {
		t.Errorf("name = %q", f.name)
	}
}

// TestApplyConfigFileErrors: a file that is no mapping, a list for a flag
// of one value, an empty key, and files that cannot be read or parsed.
func TestApplyConfigFileErrors(t *testing.T) {
	for _, tc := range []struct {
		why, file string
		env       map[string]string
		want      []string
	}{
		{"not a mapping", "- http-port: 1\n", map[string]string{"BRAID_HTTP_PORT": "x"}, []string{
			"--config FILE:1: not a mapping of flag names to values but a list: write one key a line (http-port: 8081)",
			"$BRAID_HTTP_PORT=\"x\": invalid value (parse error): give a whole number",
		}},
		{"a single value", "http-port 8081\n", nil, []string{
			"--config FILE:1: not a mapping of flag names to values but a single value: write one key a line (http-port: 8081)",
		}},
		{"list for one value", "\nname: [a, b]\nhttp-port:\n", nil, []string{
			"--config FILE:2: name: a list, but --name takes one value",
			"--config FILE:3: http-port: no value: give one, or remove the key",
		}},
		{"syntax", "name: n1\n  http-port: 1\n", nil, []string{
			"--config FILE: line 2: mapping values are not allowed in this context: write a YAML mapping of flag names to values (http-port: 8081)",
		}},
		{"two documents", "name: n1\n---\nname: n2\n", nil, []string{
			"--config FILE:2: a second YAML document: keep one mapping of flag names to values",
		}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			path := writeConfig(t, tc.file)
			err := applyConfig(newConfigFlags(t).fs, path, env(tc.env))
			if err == nil {
				t.Fatal("no error")
			}
			if got := strings.Split(strings.ReplaceAll(err.Error(), path, "FILE"), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "none.yaml")
		err := applyConfig(newConfigFlags(t).fs, path, env(nil))
		if want := "--config " + path + ": no such file or directory: give a YAML file braid can read"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %s", err, want)
		}
	})
	for _, empty := range []string{"", "# nothing yet\n", "~\n"} {
		if err := applyConfig(newConfigFlags(t).fs, writeConfig(t, empty), env(nil)); err != nil {
			t.Errorf("file %q: %v", empty, err)
		}
	}
}

// TestServerConfigRefusesBadKey: braid server reads --config before it
// starts anything, and exits 2 with a line naming the file, the line and
// the key.
func TestServerConfigRefusesBadKey(t *testing.T) {
	p := nodes.FreePorts(t, 4)
	path := writeConfig(t, fmt.Sprintf(`name: n1
data-dir: %s
raft-port: %d
gossip-port: %d
http-port: %d
canal-port: %d
bootstrap-expect: 1
bootstrap-expected: 1
`, t.TempDir(), p[0], p[1], p[2], p[3]))
	var out, errb bytes.Buffer
	if code := run([]string{"server", "--config", path}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2; stderr: %s", code, errb.String())
	}
	if want := "braid server: --config " + path + ":8: bootstrap-expected: not a flag of braid server: see braid server --help\n"; errb.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errb.String(), want)
	}
}

// TestServerConfigFileStartsNode: a node whose file says bootstrap-expect:
// 1 forms a cluster of its own and leads it; its ports come from the
// command line, which wins over the file.
func TestServerConfigFileStartsNode(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, "bootstrap-expect: 1\ncluster: fromfile\nhttp-port: 1\n")
	n := nodes.NewNode(t, nil, "n1", dir, "--config", path)
	n.MustStart(t, braidproc.Binary(t), nil)
	hc := &http.Client{Timeout: 2 * time.Second}
	retry.Until(t, 20*time.Second, func() error {
		if !n.Running() {
			t.Fatalf("n1 exited:\n%s", n.Tail())
		}
		resp, err := hc.Get(n.URL() + "/v1/cluster")
		if err != nil {
			return fmt.Errorf("n1 leading the cluster of its file: %w\n%s", err, n.Tail())
		}
		defer resp.Body.Close()
		var st wire.ClusterStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return fmt.Errorf("n1 leading the cluster of its file: %s: %v\n%s", resp.Status, err, n.Tail())
		}
		if st.Leader != "n1" {
			return fmt.Errorf("n1 leading the cluster of its file: leader %q\n%s", st.Leader, n.Tail())
		}
		return nil
	})
}
