package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/internal/pki"
)

// certs runs braid certs with args and returns its exit code and output.
func certs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"certs"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func wantMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

// oneErrLine fails unless stderr is one line holding want.
func oneErrLine(t *testing.T, stderr, want string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want one line with %q", stderr, want)
	}
}

func TestCertsInitAndNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	ca := filepath.Join(dir, "ca.pem")

	code, out, errs := certs(t, "init", "--dir", dir)
	if code != 0 {
		t.Fatalf("init: exit %d: %s", code, errs)
	}
	for _, want := range []string{"wrote " + ca, "wrote " + filepath.Join(dir, "ca-key.pem"), "braid certs node --dir " + dir + " --name NAME"} {
		if !strings.Contains(out, want) {
			t.Errorf("init printed %q, want %q in it", out, want)
		}
	}
	wantMode(t, dir, 0o700)
	wantMode(t, ca, 0o644)
	wantMode(t, filepath.Join(dir, "ca-key.pem"), 0o600)
	caPEM, _ := os.ReadFile(ca)

	code, _, errs = certs(t, "init", "--dir", dir)
	if code != 1 {
		t.Errorf("second init: exit %d, want 1", code)
	}
	oneErrLine(t, errs, "exists already")
	if b, _ := os.ReadFile(ca); !bytes.Equal(b, caPEM) {
		t.Fatal("the second init replaced the CA")
	}

	for _, n := range []string{"n1", "n2"} {
		code, out, errs = certs(t, "node", "--dir", dir, "--name", n, "--addr", "127.0.0.1,10.0.0.5")
		if code != 0 {
			t.Fatalf("node %s: exit %d: %s", n, code, errs)
		}
		cert, key := filepath.Join(dir, n+".pem"), filepath.Join(dir, n+"-key.pem")
		want := "--tls-ca " + ca + " --tls-cert " + cert + " --tls-key " + key
		if !strings.Contains(out, want) {
			t.Errorf("node %s printed %q, want the flags %q", n, out, want)
		}
		wantMode(t, cert, 0o644)
		wantMode(t, key, 0o600)
		// The printed flags are what braid server will load.
		if _, err := pki.LoadNodeTLS(ca, cert, key); err != nil {
			t.Errorf("node %s: %v", n, err)
		}
	}
	// A re-issue replaces the pair.
	if code, _, errs := certs(t, "node", "--dir", dir, "--name", "n1"); code != 0 {
		t.Errorf("re-issue: exit %d: %s", code, errs)
	}
	code, _, errs = certs(t, "node", "--dir", dir, "--name", "bad name")
	if code != 1 {
		t.Errorf("bad name: exit %d, want 1", code)
	}
	oneErrLine(t, errs, `"bad name"`)
}

func TestCertsNodeWithoutCA(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := certs(t, "node", "--dir", dir, "--name", "n1")
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	oneErrLine(t, errs, "run 'braid certs init --dir "+dir+"' first")
}

func TestCertsGossipKey(t *testing.T) {
	code, out, errs := certs(t, "gossip-key")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want one line", code, out, errs)
	}
	printed := filepath.Join(t.TempDir(), "printed.key")
	os.WriteFile(printed, []byte(out), 0o600)
	if k, err := pki.LoadGossipKey(printed); err != nil || len(k) != 32 {
		t.Fatalf("printed key: %d bytes, %v", len(k), err)
	}

	file := filepath.Join(t.TempDir(), "gossip.key")
	code, out, errs = certs(t, "gossip-key", "--out", file)
	if code != 0 {
		t.Fatalf("--out: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "wrote "+file) {
		t.Errorf("--out printed %q, want it to name %s (and not the key)", out, file)
	}
	wantMode(t, file, 0o600)
	first, _ := os.ReadFile(file)
	if strings.Contains(out, strings.TrimSpace(string(first))) {
		t.Error("--out printed the key")
	}
	if _, err := pki.LoadGossipKey(file); err != nil {
		t.Fatal(err)
	}

	code, _, errs = certs(t, "gossip-key", "--out", file)
	if code != 1 {
		t.Errorf("second --out: exit %d, want 1", code)
	}
	oneErrLine(t, errs, "exists already")
	if b, _ := os.ReadFile(file); !bytes.Equal(b, first) {
		t.Fatal("the second --out replaced the key")
	}
}

func TestCertsUsage(t *testing.T) {
	code, _, errs := certs(t, "--help")
	if code != 0 {
		t.Errorf("--help: exit %d", code)
	}
	for _, want := range []string{"certs init --dir", "certs node --dir", "--name", "--addr", "certs gossip-key", "--out"} {
		if !strings.Contains(errs, want) {
			t.Errorf("--help lacks %q:\n%s", want, errs)
		}
	}
	for sub, flags := range map[string][]string{
		"init":       {"-dir"},
		"node":       {"-dir", "-name", "-addr", "127.0.0.1"},
		"gossip-key": {"-out"},
	} {
		code, _, errs := certs(t, sub, "--help")
		if code != 0 {
			t.Errorf("%s --help: exit %d", sub, code)
		}
		for _, f := range flags {
			if !strings.Contains(errs, f) {
				t.Errorf("%s --help lacks %q:\n%s", sub, f, errs)
			}
		}
	}

	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "Usage: braid certs"},
		{[]string{"rotate"}, `unknown subcommand "rotate"`},
		{[]string{"init"}, "--dir DIR"},
		{[]string{"node", "--dir", dir}, "--name NAME"},
		{[]string{"init", "--dir", dir, "extra"}, `unexpected argument "extra"`},
		{[]string{"gossip-key", "--bogus"}, "bogus"},
	} {
		code, out, errs := certs(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
	if code, _, errs := certs(t, "rotate"); strings.Count(errs, "\n") != 1 {
		t.Errorf("unknown subcommand: exit %d, %q; want one line", code, errs)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("usage errors wrote %d files", len(ents))
	}
}
