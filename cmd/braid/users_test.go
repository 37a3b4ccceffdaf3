package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/auth"
)

// usersRun runs braid users args with stdin, and returns the exit code,
// stdout and stderr.
func usersRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	old := usersStdin
	usersStdin = strings.NewReader(stdin)
	t.Cleanup(func() { usersStdin = old })
	var out, errb bytes.Buffer
	code := run(append([]string{"users"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestUsersHash: braid users hash prints, for the first line of stdin, a
// hash that logs in with that password, and a hint on stderr; it never
// repeats the password.
func TestUsersHash(t *testing.T) {
	code, out, errs := usersRun(t, "s3cret pw\r\nsecond line\n", "hash")
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, errs)
	}
	hash := strings.TrimSuffix(out, "\n")
	if strings.Contains(hash, "\n") || !strings.HasPrefix(hash, "braid1$") {
		t.Fatalf("stdout is not one braid1$ hash: %q", out)
	}
	if !strings.Contains(errs, "password_hash:") || !strings.Contains(errs, "--users-file") {
		t.Errorf("stderr does not say how to use it: %s", errs)
	}
	if strings.Contains(out+errs, "s3cret") {
		t.Errorf("the output repeats the password")
	}
	us, err := auth.ParseUsers(fmt.Appendf(nil, "users:\n  - name: ops\n    password_hash: %q\n    role: admin\n", hash))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := us.Login("ops", "s3cret pw"); err != nil {
		t.Errorf("the printed hash does not log in with the first line of stdin: %v", err)
	}
}

// TestUsersHashRefuses: no password, or a password given as an argument,
// is a usage error of one line that does not repeat the argument.
func TestUsersHashRefuses(t *testing.T) {
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"hash"}},
		{"\n", []string{"hash"}},
		{"\r\nhunter2\n", []string{"hash"}},
		{"", []string{"hash", "hunter2"}},
		{"", []string{"hash", "--password", "hunter2"}},
	} {
		code, out, errs := usersRun(t, c.stdin, c.args...)
		if code != 2 || out != "" {
			t.Errorf("%q with stdin %q: exit %d, stdout %q; want 2 and nothing", c.args, c.stdin, code, out)
		}
		if strings.Contains(errs, "hunter2") {
			t.Errorf("%q: stderr repeats the password: %s", c.args, errs)
		}
		if len(c.args) == 2 && strings.Count(errs, "\n") != 1 {
			t.Errorf("%q with stdin %q: want one line on stderr, got:\n%s", c.args, c.stdin, errs)
		}
	}
}

// TestUsersCheck: a good file lists its users without their hashes; a bad
// one gives every problem and exit 2; a missing one exit 1.
func TestUsersCheck(t *testing.T) {
	hash, err := auth.HashPassword("pw")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "users.yaml")
	os.WriteFile(good, fmt.Appendf(nil, `users:
  - name: ops
    password_hash: %[1]q
    role: admin
  - name: app1
    password_hash: %[1]q
    role: consumer
    destinations: [shop, billing]
`, hash), 0o600)
	code, out, errs := usersRun(t, "", "check", "--users-file", good)
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, errs)
	}
	for _, want := range []string{"NAME", "ops", "admin", "(all)", "app1", "consumer", "shop,billing"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout does not list %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errs, "braid1$") || strings.Contains(errs, "warning") {
		t.Errorf("a hash or a warning in the output:\n%s%s", out, errs)
	}

	os.Chmod(good, 0o644)
	if _, _, errs := usersRun(t, "", "check", "--users-file", good); !strings.Contains(errs, "chmod 600") {
		t.Errorf("a users file readable by all gave no warning: %q", errs)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, fmt.Appendf(nil, "users:\n  - name: ops\n    password_hash: %q\n    role: root\n  - name: app1\n    password_hash: nope\n    role: consumer\n", hash), 0o600)
	code, out, errs = usersRun(t, "", "check", "--users-file", bad)
	if code != 2 || out != "" {
		t.Errorf("bad file: exit %d, stdout %q; want 2 and nothing", code, out)
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	if len(lines) != 3 {
		t.Errorf("want 3 problems, one a line, got:\n%s", errs)
	}
	for _, want := range []string{bad + ":4: user 1 \"ops\": role", "user 2 \"app1\": password_hash", "braid users hash", "destinations"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errs)
		}
	}

	if code, _, errs := usersRun(t, "", "check", "--users-file", filepath.Join(dir, "missing.yaml")); code != 1 {
		t.Errorf("missing file: exit %d, want 1; stderr: %s", code, errs)
	}
	if code, _, errs := usersRun(t, "", "check"); code != 2 || !strings.Contains(errs, "--users-file") {
		t.Errorf("no --users-file: exit %d, stderr %q", code, errs)
	}
}

// TestUsersUsage: no subcommand or an unknown one is a usage error; --help
// is not.
func TestUsersUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{nil, 2}, {[]string{"--help"}, 0}, {[]string{"hash", "--help"}, 0}, {[]string{"check", "-h"}, 0},
		{[]string{"add"}, 2}, {[]string{"check", "--users-file", "x", "extra"}, 2},
	} {
		if code, _, errs := usersRun(t, "", c.args...); code != c.code {
			t.Errorf("%q: exit %d, want %d; stderr: %s", c.args, code, c.code, errs)
		}
	}
}
