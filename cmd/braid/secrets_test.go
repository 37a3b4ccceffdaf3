package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/roguemysql"
)

// startNode starts a one-node cluster with the extra flags args, the
// test's CLI calls its admin's.
func startNode(t *testing.T, args ...string) *nodes.Cluster {
	t.Helper()
	return nodes.StartSize(t, cli, 1, args...)
}

// TestServerPasswordReferences: a spec submitted to braid server may name
// only password files in the node's --secrets-dir and variables under its
// --secrets-env-prefix. /etc/hostname, a link out of the directory and a
// path with .. out of it are refused with the message of a missing file,
// BRAID_TOKEN like an unset variable; the node connects nowhere with them
// (the rogue server at the spec's address sees no connection).
func TestServerPasswordReferences(t *testing.T) {
	rogue := roguemysql.Start(t, roguemysql.ClearText)
	secrets, other := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "pw"), []byte("outside-9z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(secrets, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, "pw"), filepath.Join(secrets, "side")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BRAID_TEST_OUTSIDE_PW", "outside-9z")
	c := startNode(t, "--secrets-dir", secrets)
	create := func(ref string) string {
		t.Helper()
		spec := nodes.WriteSpec(t, "name: shop\nsources: [{name: a, address: '"+rogue.Addr()+"', user: braid, "+ref+", start: earliest}]\n")
		out, errs, code := cli("destination", "create", "-f", spec, "--server", c.Nodes[0].URL())
		if code == 0 {
			t.Errorf("%s: created: %s", ref, out)
		}
		if strings.Contains(errs, "outside-9z") {
			t.Errorf("%s: the refusal shows the file: %s", ref, errs)
		}
		return errs
	}
	const missingPath = "/etc/braid-no-such-file"
	missing := create("password_file: " + missingPath)
	if !strings.Contains(missing, "secrets directories") {
		t.Errorf("the refusal does not say where password files may be: %s", missing)
	}
	for _, path := range []string{
		"/etc/hostname",
		filepath.Join(other, "pw"),
		secrets + "/../" + filepath.Base(other) + "/pw",
		filepath.Join(secrets, "out"),
		filepath.Join(secrets, "side"),
	} {
		if got := create("password_file: '" + path + "'"); strings.ReplaceAll(got, path, missingPath) != missing {
			t.Errorf("%s:\n%s\nwant the line of a missing file:\n%s", path, got, missing)
		}
	}
	for _, name := range []string{"BRAID_TOKEN", "BRAID_TEST_OUTSIDE_PW", "HOME", "BRAID_SECRET_NOT_SET"} {
		if got := create("password_env: " + name); !strings.Contains(got, "BRAID_SECRET_") {
			t.Errorf("password_env %s: %s", name, got)
		}
	}
	if n := len(rogue.Conns()); n != 0 {
		t.Errorf("the node connected to the spec's address %d times with a refused reference", n)
	}
	if b, _ := os.ReadFile(c.Nodes[0].LogPath()); strings.Contains(string(b), "PASSWORDS IN CLEAR") {
		t.Errorf("a node with a gossip key warns of passwords in clear")
	}
}

// rogueGotNothing: every connection to the rogue server sent neither the
// password nor an answer to its request for it.
func rogueGotNothing(t *testing.T, rogue *roguemysql.Server, password string) {
	t.Helper()
	// The rogue server records a connection once it has served it, which
	// can be a moment after braid has given up on it and exited.
	var conns []roguemysql.Conn
	retry.Until(t, 15*time.Second, func() error {
		if conns = rogue.Conns(); len(conns) == 0 {
			return errors.New("nothing connected to the rogue server")
		}
		return nil
	})
	for _, c := range conns {
		if strings.Contains(string(c.Raw), password) {
			t.Errorf("the rogue server received the password: %q", c.Raw)
		}
		if len(c.After) > 0 {
			t.Errorf("braid answered the rogue server's request for the password: %q", c.After)
		}
	}
}

// TestNoClearTextPasswordToRogueSource: a source whose server asks for
// the password in clear (or encrypted with its own key) gets none, from
// braid capture and from a node checking a spec, and the error is one
// line naming the source and the cause.
func TestNoClearTextPasswordToRogueSource(t *testing.T) {
	const password = "pw-Rg7-not-for-rogues"
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "pw"), []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startNode(t, "--secrets-dir", secrets)
	for name, ask := range map[string]roguemysql.Ask{"clear": roguemysql.ClearText, "full": roguemysql.FullAuth} {
		t.Run(name, func(t *testing.T) {
			rogue := roguemysql.Start(t, ask)
			spec := nodes.WriteSpec(t, "name: shop\nsources: [{name: rogue, address: '"+rogue.Addr()+"', user: braid, password_file: '"+filepath.Join(secrets, "pw")+"', start: earliest}]\n")
			_, errs, code := cli("capture", "-f", spec, "--secrets-dir", secrets, "--timeout", "30s")
			t.Logf("capture: %s", errs)
			if code != 1 || !strings.Contains(errs, "source rogue") || !strings.Contains(errs, "clear text") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("capture: exit %d:\n%s", code, errs)
			}
			_, errs, code = cli("destination", "create", "-f", spec, "--server", c.Nodes[0].URL())
			t.Logf("create: %s", errs)
			if code == 0 || !strings.Contains(errs, "source rogue") || !strings.Contains(errs, "clear text") {
				t.Errorf("create: exit %d:\n%s", code, errs)
			}
			rogueGotNothing(t, rogue, password)
		})
	}
}

// TestNoClearTextPasswordToRogueSink: a MySQL sink's target that asks for
// the password encrypted with its own key (go-sql-driver would send it)
// gets none, and capture says which sink and why.
func TestNoClearTextPasswordToRogueSink(t *testing.T) {
	const password = "pw-Sk4-not-for-rogues"
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	rogue := roguemysql.Start(t, roguemysql.FullAuth)
	t.Setenv("BRAID_SECRET_SINK_PW", password)
	spec := nodes.WriteSpec(t, "name: shop\nsources: [{name: a, address: '"+srv.Addr()+"', start: earliest}]\n"+
		"sinks: [{name: copy, type: mysql, address: '"+rogue.Addr()+"', user: braid, password_env: BRAID_SECRET_SINK_PW, tables: [{from: shop.orders, to: copy.orders}]}]\n")
	_, errs, code := cli("capture", "-f", spec, "--quiet", "--cursor-dir", t.TempDir(), "--timeout", "30s")
	t.Logf("capture: %s", errs)
	if code != 1 || !strings.Contains(errs, "sink copy") || !strings.Contains(errs, "clear text") {
		t.Errorf("capture: exit %d:\n%s", code, errs)
	}
	rogueGotNothing(t, rogue, password)
}

// TestClearSecretsWarning: a node without a secrets key or a gossip key
// keeps passwords in Raft in clear, and says so loudly at start and when
// it stores one; a node with a key says nothing of the kind.
func TestClearSecretsWarning(t *testing.T) {
	const password = "pw-Cw3-kept-in-clear"
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE USER 'braid'@'%' IDENTIFIED BY '"+password+"'",
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, SELECT ON *.* TO 'braid'@'%'")
	n := nodes.NewNode(t, nil, "n1", t.TempDir(), "--bootstrap-expect", "1")
	n.MustStart(t, braidproc.Binary(t), nil)
	const warning = "PASSWORDS IN CLEAR"
	waitLog := func(what string, count int) {
		t.Helper()
		retry.Until(t, 20*time.Second, func() error {
			b, _ := os.ReadFile(n.LogPath())
			if strings.Count(string(b), what) >= count {
				return nil
			}
			if !n.Running() {
				t.Fatalf("the node exited; the log does not say %q %d times:\n%s", what, count, n.Tail())
			}
			return fmt.Errorf("the log does not say %q %d times:\n%s", what, count, n.Tail())
		})
	}
	waitLog(warning, 1)
	spec := nodes.WriteSpec(t, "name: shop\nsources: [{name: a, address: '"+srv.Addr()+"', user: braid, password: '"+password+"', start: earliest}]\n")
	retry.Until(t, 20*time.Second, func() error {
		if _, errs, code := cli("destination", "create", "-f", spec, "--server", n.URL()); code != 0 {
			return fmt.Errorf("create: %s", errs)
		}
		return nil
	})
	waitLog(warning, 2)
	b, _ := os.ReadFile(n.LogPath())
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, warning) && !strings.Contains(line, "level=WARN") {
			t.Errorf("not a warning: %s", line)
		}
		if strings.Contains(line, password) {
			t.Errorf("the log shows the password: %s", line)
		}
	}
	if !strings.Contains(string(b), "dest=shop") {
		t.Errorf("the warning does not name the destination:\n%s", n.Tail())
	}
}

// TestSecretsFlagsInConfig: secrets-dir is a list in a config file, each
// directory checked at start; a prefix covering BRAID_TOKEN is refused.
func TestSecretsFlagsInConfig(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	cfg := filepath.Join(dir, "braid.yaml")
	if err := os.WriteFile(cfg, []byte("secrets-dir: ['"+dir+"', '"+missing+"']\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"server", "--name", "n1", "--data-dir", t.TempDir(), "--config", cfg}
	if _, errs, code := cli(base...); code != 2 || !strings.Contains(errs, missing) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("a missing secrets directory: exit %d: %s", code, errs)
	}
	if _, errs, code := cli(append(base, "--secrets-dir", dir, "--secrets-env-prefix", "BRAID_")...); code != 2 || !strings.Contains(errs, "BRAID_TOKEN") {
		t.Errorf("a prefix covering BRAID_TOKEN: exit %d: %s", code, errs)
	}
}

// TestOwnerResolvesUnderItsOwnRules: the node that runs a destination
// reads its password references again when it takes it over, under its
// own rules: a password file replaced, after the spec was accepted, by a
// link out of the secrets directory is refused, with the line of a
// missing file in the log, and the source never sees the linked file's
// content.
func TestOwnerResolvesUnderItsOwnRules(t *testing.T) {
	const password = "pw-Ow2-in-the-dir"
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE USER 'braid'@'%' IDENTIFIED BY '"+password+"'",
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, SELECT ON *.* TO 'braid'@'%'",
		"CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)")
	secrets, other := t.TempDir(), t.TempDir()
	pw := filepath.Join(secrets, "pw")
	if err := os.WriteFile(pw, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startNode(t, "--secrets-dir", secrets)
	n := c.Nodes[0]
	spec := nodes.WriteSpec(t, "name: shop\nsources: [{name: a, address: '"+srv.Addr()+"', user: braid, password_file: '"+pw+"', start: earliest}]\ntables: ['shop\\.orders']\n")
	if _, errs, code := cli("destination", "create", "-f", spec, "--server", n.URL()); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	srv.Exec(t, "INSERT INTO shop.orders VALUES (1)")
	if out, errs, code := cli("tail", "shop", "--server", n.URL(), "--client-id", "t", "--max", "1", "--timeout", "30s"); code != 0 {
		t.Fatalf("tail: exit %d: %s\n%s", code, errs, out)
	}
	n.Stop(10 * time.Second)
	// The file now a link out of the directory, to a file holding the
	// same password.
	outside := filepath.Join(other, "pw")
	if err := os.WriteFile(outside, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pw); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, pw); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(n.LogPath())
	if err := c.Restart(n.Node); err != nil {
		t.Fatal(err)
	}
	want := "password_file " + pw + ": no readable password file there in the node's secrets directories"
	retry.Until(t, 30*time.Second, func() error {
		b, _ := os.ReadFile(n.LogPath())
		after := string(b[len(before):])
		if !strings.Contains(after, want) {
			return fmt.Errorf("the node does not refuse the link:\n%s", n.Tail())
		}
		if strings.Contains(after, "source ready") {
			t.Errorf("the source was read after the refusal:\n%s", n.Tail())
		}
		return nil
	})
}
