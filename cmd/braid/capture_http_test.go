package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	canalclient "github.com/withlin/canal-go/client"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// TestCaptureHTTPRefusesBrowsers: `braid capture --http-port` answers
// /healthz and /readyz like a server node; refuses a Host that is not
// the machine's (DNS rebinding) with a line naming --http-host, and a
// text/plain form's skip of a shard-DDL lock (the lock stays); the CLI's
// braid ddl list and skip still work. With --users-file it asks for a
// user as a server does (a consumer may read, not skip), and the CLI
// logs in with --token-file, canal's clients with the same users. Beyond loopback it will not start without
// --users-file.
func TestCaptureHTTPRefusesBrowsers(t *testing.T) {
	if out, errs, code := cli("capture", "-f", "nope.yaml", "--http-port", "1", "--listen", "0.0.0.0"); code != 2 || !strings.Contains(errs, "--users-file") || strings.Count(errs, "\n") != 1 {
		t.Errorf("capture on 0.0.0.0 without users: exit %d, %q%q; want exit 2 and one line naming --users-file", code, out, errs)
	}
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY)", "CREATE TABLE shop_1.orders (id INT PRIMARY KEY)",
		"INSERT INTO shop_0.orders VALUES (1)",
		"ALTER TABLE shop_0.orders ADD COLUMN c INT NULL",
		"INSERT INTO shop_0.orders VALUES (2, 20)")
	ds := func() *spec.Spec {
		ds, err := spec.Parse([]byte(fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop_\\d+\\.orders']\nroute: [{match: 'shop_\\d+\\.(\\w+)', to: 'shop.$1'}]\nheartbeat: 100ms\n", srv.Addr())))
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	ports := nodes.FreePorts(t, 3)
	open := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	serveForTest(t, ds(), serveOptions{listen: "127.0.0.1", httpPort: ports[0]}, log)
	call := func(base, method, path, host, token string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader("x=y"))
		if host != "" {
			req.Host = host
		}
		if name, pw, ok := strings.Cut(token, ":"); ok {
			req.SetBasicAuth(name, pw)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var lock wire.DDLLock
	retry.Until(t, 20*time.Second, func() error {
		st, err := nodes.DDLList(cli, "shop", open)
		if err == nil && len(st.Locks) == 1 {
			lock = st.Locks[0]
			return nil
		}
		return fmt.Errorf("no lock: %+v %v", st, err)
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body := call(open, "GET", path, "", ""); status != 200 || !strings.Contains(body, `"ready":true`) {
			t.Errorf("GET %s: %d %s; want 200, ready", path, status, body)
		}
	}
	for _, path := range []string{"/healthz", "/v1/destinations", "/v1/destinations/shop/ddl", "/metrics"} {
		status, body := call(open, "GET", path, "rebind.example:80", "")
		if status != http.StatusMisdirectedRequest || !strings.Contains(body, "braid capture with --http-host rebind.example") {
			t.Errorf("GET %s with a foreign Host: %d %s; want 421 naming --http-host", path, status, body)
		}
	}
	skip := fmt.Sprintf("/v1/destinations/shop/ddl/%d?action=skip", lock.ID)
	for _, h := range [][]string{{"Content-Type", "text/plain"}, {"Content-Type", "application/x-www-form-urlencoded"},
		{"Content-Type", "application/json", "Origin", "http://rebind.example"}} {
		if status, body := call(open, "POST", skip, "", "", h...); status != http.StatusForbidden {
			t.Errorf("a skip sent with %q: %d %s; want 403", h, status, body)
		}
	}
	if st, err := nodes.DDLList(cli, "shop", open); err != nil || len(st.Locks) != 1 || len(st.Decisions) != 0 {
		t.Fatalf("the lock after the refused skips: %+v %v; want it open", st, err)
	}

	// With users: the CLI logs in; a consumer may read, not skip.
	dir := t.TempDir()
	adminHash, _ := auth.HashPassword("admin-pw")
	appHash, _ := auth.HashPassword("app-pw")
	users := filepath.Join(dir, "users.yaml")
	os.WriteFile(users, fmt.Appendf(nil, "users:\n  - {name: admin, password_hash: %q, role: admin}\n  - {name: app, password_hash: %q, role: consumer, destinations: [shop]}\n", adminHash, appHash), 0o600)
	us, err := auth.LoadUsers(users)
	if err != nil {
		t.Fatal(err)
	}
	guarded := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	serveForTest(t, ds(), serveOptions{listen: "127.0.0.1", httpPort: ports[1], canalPort: ports[2], users: us}, log)
	retry.Until(t, 20*time.Second, func() error {
		req, _ := http.NewRequest("GET", guarded+"/v1/destinations/shop/ddl", nil)
		req.SetBasicAuth("app", "app-pw")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && strings.Contains(string(b), `"locks":[{`) {
			return nil
		}
		return fmt.Errorf("the capture with users shows no lock: %s %s", resp.Status, b)
	})
	if status, body := call(guarded, "GET", "/healthz", "", ""); status != 200 {
		t.Errorf("GET /healthz without a credential: %d %s; want 200", status, body)
	}
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/v1/destinations/shop", "", 401},
		{"GET", "/metrics", "", 401},
		{"GET", "/v1/destinations/shop", "app:wrong", 401},
		{"GET", "/v1/destinations/shop", "app:app-pw", 200},
		{"POST", skip, "app:app-pw", 403},
		{"POST", "/v1/destinations/shop/sources/a/accept-lost", "app:app-pw", 403},
		{"POST", "/v1/destinations/shop/sources/a/accept-lost", "admin:admin-pw", 409}, // nothing lost
		{"POST", "/v1/destinations/shop/sources/z/accept-lost", "admin:admin-pw", 404},
	} {
		if status, body := call(guarded, c.method, c.path, "", c.token, "X-Braid-Request", "1"); status != c.want {
			t.Errorf("%s %s as %q: %d %s; want %d", c.method, c.path, c.token, status, body, c.want)
		}
	}
	// Its canal port logs the same users in.
	bad := canalclient.NewSimpleCanalConnector("127.0.0.1", ports[2], "app", "wrong", "shop", 60000, 60000)
	if err := bad.Connect(); err == nil {
		t.Error("canal login with a wrong password accepted")
	}
	bad.DisConnection()
	good := canalclient.NewSimpleCanalConnector("127.0.0.1", ports[2], "app", "app-pw", "shop", 60000, 60000)
	if err := good.Connect(); err != nil {
		t.Errorf("canal login of a user of the users file: %v", err)
	}
	good.DisConnection()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("admin:admin-pw\n"), 0o600)
	for _, base := range []string{guarded, open} {
		if out, errs, code := cli("ddl", "list", "shop", "--server", base, "--token-file", token); code != 0 || !strings.Contains(out, "a/shop_1.orders") {
			t.Fatalf("ddl list on %s: exit %d: %s%s", base, code, out, errs)
		}
		if out, errs, code := cli("ddl", "skip", "shop", fmt.Sprint(lock.ID), "--server", base, "--token-file", token); code != 0 {
			t.Fatalf("ddl skip on %s: exit %d: %s%s", base, code, out, errs)
		}
	}
}
