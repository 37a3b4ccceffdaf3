package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	canalclient "github.com/withlin/canal-go/client"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
)

// TestServerRefusesToRunUnprotected: a node meant for a cluster of several
// without TLS and a gossip key, and one on a non-loopback address without
// users, exit 2 with one line naming the flags; --insecure runs it, with
// a warning.
func TestServerRefusesToRunUnprotected(t *testing.T) {
	p := nodes.FreePorts(t, 4)
	ports := []string{"--raft-port", fmt.Sprint(p[0]), "--gossip-port", fmt.Sprint(p[1]), "--http-port", fmt.Sprint(p[2]), "--canal-port", fmt.Sprint(p[3])}
	base := append([]string{"server", "--name", "n1", "--data-dir", t.TempDir()}, ports...)
	usageLine(t, append(base, "--bootstrap-expect", "3"), "--tls-ca", "--gossip-key-file", "--insecure")
	usageLine(t, append(base, "--join", "127.0.0.1:1"), "--tls-ca", "--gossip-key-file", "--insecure")
	usageLine(t, append(base, "--addr", "0.0.0.0"), "--users-file", "--insecure")

	n := nodes.NewNode(t, nil, "n1", t.TempDir(), "--insecure", "--bootstrap-expect", "3")
	n.MustStart(t, braidproc.Binary(t), []string{"127.0.0.1:1"})
	retry.Until(t, 15*time.Second, func() error {
		if strings.Contains(n.Tail(), "running insecure") {
			return nil
		}
		if !n.Running() {
			t.Fatalf("the node exited; an --insecure node does not warn:\n%s", n.Tail())
		}
		return fmt.Errorf("an --insecure node does not warn:\n%s", n.Tail())
	})
}

// TestSourcePasswordNeverShown: with password X in a spec, no answer of
// the API or the CLI, no log, no raft.db and no process's command line
// holds X, and the destination runs with it.
func TestSourcePasswordNeverShown(t *testing.T) {
	const password = "Xq7-never-shown-9z"
	srvs := shoptest.Shards(t)
	for _, s := range srvs {
		s.Exec(t, fmt.Sprintf("CREATE USER 'braid'@'%%' IDENTIFIED BY '%s'", password),
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, SELECT ON *.* TO 'braid'@'%'")
	}
	c := nodes.Start(t, cli)
	spec := fmt.Sprintf(`name: shop
sources:
  - {name: a, address: '%s', user: braid, password: '%s', start: earliest}
  - {name: b, address: '%s', user: braid, password: '%s', start: earliest}
  - {name: c, address: '%s', user: braid, password: '%s', start: earliest}
tables: ['shop_\d+\.orders']
heartbeat: 100ms
`, srvs[0].Addr(), password, srvs[1].Addr(), password, srvs[2].Addr(), password)
	var shown []string
	say := func(what, s string) { shown = append(shown, what+": "+s) }
	out, errs, code := cli("destination", "create", "-f", nodes.WriteSpec(t, spec), "--server", c.Nodes[0].URL())
	if code != 0 {
		t.Fatalf("create: %s", errs)
	}
	say("destination create", out+errs)
	srvs[1].Exec(t, "INSERT INTO shop_2.orders VALUES (1, 2, 'ran with the password')")
	out, errs, code = cli("tail", "shop", "--server", c.Nodes[1].URL(), "--client-id", "t", "--max", "7", "--timeout", "30s")
	if code != 0 || !strings.Contains(out, "ran with the password") {
		t.Fatalf("tail: exit %d: %s\n%s", code, errs, out)
	}
	for _, args := range [][]string{
		{"destination", "show", "shop"}, {"destination", "show", "shop", "--json"}, {"destination", "list", "--json"},
		{"cluster", "status"}, {"cluster", "status", "--json"},
	} {
		out, errs, _ := cli(append(args, "--server", c.Nodes[2].URL())...)
		say(strings.Join(args, " "), out+errs)
	}
	admin := c.Security.Admin
	for _, path := range []string{"/v1/cluster", "/v1/destinations", "/v1/destinations/shop/spec", "/v1/destinations/shop"} {
		for _, n := range c.Nodes {
			req, _ := http.NewRequest(http.MethodGet, n.URL()+path, nil)
			req.SetBasicAuth(admin.User, admin.Password)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			say("GET "+path+" on "+n.Name, string(b))
		}
	}
	for _, n := range c.Nodes {
		b, _ := os.ReadFile(n.LogPath())
		say("log of "+n.Name, string(b))
		for _, line := range strings.Split(string(b), "\n") {
			if k := repeatedKey(line); k != "" {
				t.Errorf("log of %s: key %s twice in %s", n.Name, k, line)
			}
		}
		filepath.Walk(n.Dir, func(path string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				b, _ := os.ReadFile(path)
				say(path, string(b))
			}
			return nil
		})
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		say(p, string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	for _, s := range shown {
		if strings.Contains(s, password) {
			what, _, _ := strings.Cut(s, ": ")
			t.Errorf("%s holds the source password", what)
		}
	}
	if len(shown) < 20 {
		t.Fatalf("looked at only %d places", len(shown))
	}
}

// repeatedKey is a key that a slog text line holds twice ("" if none).
func repeatedKey(line string) string {
	seen := map[string]bool{}
	for _, m := range logKey.FindAllStringSubmatch(line, -1) {
		if seen[m[1]] {
			return m[1]
		}
		seen[m[1]] = true
	}
	return ""
}

// logKey matches a slog text key, after the line's start or a space and
// outside quoted values (a value's inner "k=v" is inside quotes).
var logKey = regexp.MustCompile(`(?:^| )([a-z_.]+)=(?:"(?:[^"\\]|\\.)*"|\S*)`)

// TestCanalLoginAgainstUsers: on a cluster's canal port, canal-go with a
// user of the users file and a wrong password is refused, with the right
// one served, through a node that relays to the owner too.
func TestCanalLoginAgainstUsers(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	owner, _ := c.OwnerOf(t, "shop")
	app := c.Security.Consumer
	srvs[0].Exec(t, "INSERT INTO shop_0.orders VALUES (1, 0, 'through canal')")
	// Once a tail has its rows, the owner serves (its takeover wait is over).
	if _, errs, code := cli("tail", "shop", "--server", owner.URL(), "--client-id", "warm", "--max", "7", "--timeout", "30s"); code != 0 {
		t.Fatalf("tail: %s", errs)
	}
	for _, n := range c.Nodes {
		bad := canalclient.NewSimpleCanalConnector("127.0.0.1", n.CanalPort, app.User, "wrong", "shop", 60000, 60000)
		if err := bad.Connect(); err == nil {
			t.Errorf("%s: canal login with a wrong password accepted", n.Name)
		}
		bad.DisConnection()
		admin := canalclient.NewSimpleCanalConnector("127.0.0.1", n.CanalPort, "nobody", app.Password, "shop", 60000, 60000)
		if err := admin.Connect(); err == nil {
			t.Errorf("%s: canal login of an unknown user accepted", n.Name)
		}
		admin.DisConnection()
	}
	entry := c.Nodes[0]
	if entry == owner {
		entry = c.Nodes[1]
	}
	var good *canalclient.SimpleCanalConnector
	retry.Until(t, 20*time.Second, func() error {
		good = canalclient.NewSimpleCanalConnector("127.0.0.1", entry.CanalPort, app.User, app.Password, "shop", 60000, 60000)
		good.ClientIdentity.ClientId = 5
		err := good.Connect()
		if err == nil {
			if err = good.Subscribe(`.*\..*`); err == nil {
				return nil
			}
		}
		good.DisConnection()
		return fmt.Errorf("canal login and subscribe through %s (owner %s): %w", entry.Name, owner.Name, err)
	})
	defer good.DisConnection()
	// A client id that joins late starts at what comes next (issue 19).
	srvs[1].Exec(t, "INSERT INTO shop_2.orders VALUES (2, 2, 'through canal too')")
	var rows int
	retry.Until(t, 30*time.Second, func() error {
		msg, err := good.Get(100, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range msg.Entries {
			if msg.Entries[i].GetEntryType() == 2 { // ROWDATA
				rows++
			}
		}
		if rows == 0 {
			return errors.New("canal-go with the right password got no row")
		}
		return nil
	})
}

// TestReadmeSecureNode follows the README's steps for a protected node:
// braid certs, braid users hash, a server with TLS between nodes, a
// users file and HTTPS, then the CLI with $BRAID_TOKEN and --ca.
func TestReadmeSecureNode(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	step := func(args ...string) string {
		t.Helper()
		out, errs, code := cli(args...)
		if code != 0 {
			t.Fatalf("braid %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}
	step("certs", "init", "--dir", certs)
	step("certs", "node", "--dir", certs, "--name", "n1", "--addr", "127.0.0.1")
	step("certs", "gossip-key", "--out", filepath.Join(certs, "gossip.key"))
	usersStdin = strings.NewReader("ops-password\n")
	defer func() { usersStdin = os.Stdin }()
	hash := strings.TrimSpace(step("users", "hash"))
	users := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(users, []byte(fmt.Sprintf("users:\n  - {name: ops, password_hash: %q, role: admin}\n", hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	step("users", "check", "--users-file", users)
	ca, cert, key := filepath.Join(certs, "ca.pem"), filepath.Join(certs, "n1.pem"), filepath.Join(certs, "n1-key.pem")
	n := nodes.NewNode(t, nil, "n1", dir, "--bootstrap-expect", "1", "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key,
		"--gossip-key-file", filepath.Join(certs, "gossip.key"), "--users-file", users,
		"--http-tls-cert", cert, "--http-tls-key", key)
	n.MustStart(t, braidproc.Binary(t), nil)
	server := fmt.Sprintf("https://127.0.0.1:%d", n.HTTPPort)
	t.Setenv(tokenEnv, "ops:ops-password")
	retry.Until(t, 20*time.Second, func() error {
		out, errs, code := cli("cluster", "status", "--server", server, "--ca", ca)
		if code == 0 && strings.Contains(out, "leader: n1") {
			return nil
		}
		if !n.Running() {
			t.Fatalf("the node exited; cluster status over https: exit %d: %s%s\n%s", code, out, errs, n.Tail())
		}
		return fmt.Errorf("cluster status over https: exit %d: %s%s\n%s", code, out, errs, n.Tail())
	})
	if _, errs, code := cli("cluster", "status", "--server", server); code == 0 {
		t.Error("https without --ca: the node's certificate was trusted")
	} else if !strings.Contains(errs, "certificate") {
		t.Errorf("https without --ca: %s", errs)
	}
	t.Setenv(tokenEnv, "ops:wrong")
	if _, errs, code := cli("cluster", "status", "--server", server, "--ca", ca); code == 0 || !strings.Contains(errs, "wrong name or password") {
		t.Errorf("a wrong password: exit %d: %s", code, errs)
	}
}
