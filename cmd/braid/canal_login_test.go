package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	canalclient "github.com/withlin/canal-go/client"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// writePasswordFile writes body to a file of its own and returns its path.
func writePasswordFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "canal-password")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// usageLine runs args and wants exit 2 and one line on stderr holding
// every one of want.
func usageLine(t *testing.T, args []string, want ...string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 2 {
		t.Fatalf("%q: exit %d, want 2; stderr: %s", args, code, errb.String())
	}
	msg := errb.String()
	if strings.Count(msg, "\n") != 1 {
		t.Errorf("%q: want one line on stderr, got:\n%s", args, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%q: stderr does not say %q: %s", args, w, msg)
		}
	}
}

// TestCanalPasswordFlagRefused: the old --canal-password, in each of the
// flag package's spellings, is refused by capture and server with a line
// that says what to use instead; the password is not echoed back.
func TestCanalPasswordFlagRefused(t *testing.T) {
	for _, cmd := range []string{"capture", "server"} {
		for _, flags := range [][]string{
			{"--canal-password", "hunter2"},
			{"-canal-password", "hunter2"},
			{"--canal-password=hunter2"},
			{"--canal-user", "canal", "-canal-password=hunter2"},
		} {
			args := append([]string{cmd, "--name", "n1", "--data-dir", t.TempDir()}, flags...)
			if cmd == "capture" {
				args = append([]string{cmd, "-f", "spec.yaml"}, flags...)
			}
			usageLine(t, args, "braid "+cmd+":", "--canal-password-file", "BRAID_CANAL_PASSWORD")
			var errb bytes.Buffer
			run(args, &bytes.Buffer{}, &errb)
			if strings.Contains(errb.String(), "hunter2") {
				t.Errorf("%q: stderr repeats the password: %s", args, errb.String())
			}
		}
	}
}

// TestCanalPasswordHelp: --help offers --canal-password-file and the
// environment variable, not the old flag.
func TestCanalPasswordHelp(t *testing.T) {
	old := regexp.MustCompile(`-canal-password\b([^-]|$)`)
	for _, cmd := range []string{"capture", "server"} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd, "--help"}, &out, &errb); code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		help := out.String() + errb.String()
		if !strings.Contains(help, "-canal-password-file") || !strings.Contains(help, "BRAID_CANAL_PASSWORD") {
			t.Errorf("%s --help does not offer --canal-password-file and BRAID_CANAL_PASSWORD:\n%s", cmd, help)
		}
		if old.MatchString(help) {
			t.Errorf("%s --help still offers --canal-password:\n%s", cmd, help)
		}
	}
}

// TestCanalPasswordUsage: a password file that cannot be read, an empty
// one, a file without a user and a user without a password are usage
// errors that name the flag and the file, before anything starts.
func TestCanalPasswordUsage(t *testing.T) {
	t.Setenv("BRAID_CANAL_PASSWORD", "")
	missing := filepath.Join(t.TempDir(), "nope")
	empty := writePasswordFile(t, "\n")
	good := writePasswordFile(t, "s3cret\n")
	dir := t.TempDir()
	for _, cmd := range []string{"capture", "server"} {
		base := []string{cmd, "--name", "n1", "--data-dir", t.TempDir()}
		if cmd == "capture" {
			base = []string{cmd, "-f", "spec.yaml", "--canal-port", "1"}
		}
		with := func(flags ...string) []string { return append(append([]string(nil), base...), flags...) }
		usageLine(t, with("--canal-user", "canal", "--canal-password-file", missing), "--canal-password-file "+missing, "no such file", "give a file")
		usageLine(t, with("--canal-user", "canal", "--canal-password-file", dir), "--canal-password-file "+dir, "give a file")
		usageLine(t, with("--canal-user", "canal", "--canal-password-file", empty), "--canal-password-file "+empty, "is empty")
		usageLine(t, with("--canal-password-file", good), "--canal-password-file "+good, "--canal-user")
		usageLine(t, with("--canal-user", "canal"), "--canal-user canal needs a password", "--canal-password-file", "BRAID_CANAL_PASSWORD")
	}
}

// TestCaptureCanalLogin serves a destination with `braid capture
// --canal-port --canal-user`, the password from --canal-password-file (its
// trailing newline trimmed) and from $BRAID_CANAL_PASSWORD, and logs in
// with canal-go: the password is accepted, a wrong one is not. A file
// given wins over the environment.
func TestCaptureCanalLogin(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY)")
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources:\n  - {name: a, address: '%s', start: earliest}\ntables: ['shop_0\\.orders']\nheartbeat: 100ms\n", srv.Addr()))
	for _, tc := range []struct {
		name, env string
		file      string // content of --canal-password-file; "": no flag
	}{
		{name: "file", file: "s3cret\n", env: "wrong"},
		{name: "env", env: "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("BRAID_CANAL_PASSWORD", tc.env)
			port := nodes.FreePorts(t, 1)[0]
			args := []string{"capture", "-f", spec, "--canal-port", fmt.Sprint(port), "--canal-user", "canal", "--timeout", "8s"}
			if tc.file != "" {
				args = append(args, "--canal-password-file", writePasswordFile(t, tc.file))
			}
			var errb bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- run(args, &bytes.Buffer{}, &errb) }()

			login := func(password string) error {
				c := canalclient.NewSimpleCanalConnector("127.0.0.1", port, "canal", password, "shop", 60000, 60000)
				defer c.DisConnection()
				return c.Connect()
			}
			retry.Until(t, 5*time.Second, func() error {
				err := login("s3cret")
				if err != nil && strings.Contains(err.Error(), "authentication") {
					t.Fatalf("canal login with the password: %v", err)
				}
				if err != nil {
					return fmt.Errorf("canal login with the password: %w", err)
				}
				return nil
			})
			for _, pw := range []string{"wrong", "s3cret\n", ""} {
				if err := login(pw); err == nil || !strings.Contains(err.Error(), "authentication") {
					t.Errorf("canal login with password %q: %v, want an authentication error", pw, err)
				}
			}
			if code := <-done; code != 0 {
				t.Fatalf("capture: exit %d: %s", code, errb.String())
			}
		})
	}
}
