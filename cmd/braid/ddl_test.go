package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// TestCaptureServesDDLLocks: against `braid capture --http-port`, `braid
// ddl list` shows a lock and `braid ddl skip` releases it; `braid tail`
// then gets the held row after nothing but the rows of the other shard.
func TestCaptureServesDDLLocks(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY)", "CREATE TABLE shop_1.orders (id INT PRIMARY KEY)",
		"INSERT INTO shop_0.orders VALUES (1)",
		"ALTER TABLE shop_0.orders ADD COLUMN c INT NULL",
		"INSERT INTO shop_0.orders VALUES (2, 20)",
		"INSERT INTO shop_1.orders VALUES (3)")
	ds, err := spec.Parse([]byte(fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop_\\d+\\.orders']\nroute: [{match: 'shop_\\d+\\.(\\w+)', to: 'shop.$1'}]\nheartbeat: 100ms\nddl_lock_warn_after: 1s\n", srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	var lock wire.DDLLock
	retry.Until(t, 20*time.Second, func() error {
		st, err := nodes.DDLList(cli, "shop", url)
		if err == nil && len(st.Locks) == 1 && st.Locks[0].HeldRows == 1 {
			lock = st.Locks[0]
			return nil
		}
		return fmt.Errorf("no lock holding one row: %+v %v", st, err)
	})
	if !slices.Equal(lock.Done, []string{"a/shop_0.orders"}) || !slices.Equal(lock.Waiting, []string{"a/shop_1.orders"}) {
		t.Fatalf("lock %+v", lock)
	}
	if out, errs, code := cli("ddl", "list", "shop", "--server", url); code != 0 || !strings.Contains(out, "a/shop_1.orders") || !strings.Contains(out, "HELD ROWS") {
		t.Fatalf("ddl list: exit %d: %s%s", code, out, errs)
	}
	// Past ddl_lock_warn_after, the lock counts as pending.
	retry.Until(t, 10*time.Second, func() error {
		body := ""
		if resp, err := http.Get(url + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		if strings.Contains(body, `braid_ddl_lock_pending{dest="shop"} 1`) && strings.Contains(body, `braid_ddl_held_rows{dest="shop"} 1`) {
			return nil
		}
		return fmt.Errorf("metrics do not show the pending lock:\n%s", body)
	})
	if out, errs, code := cli("ddl", "skip", "shop", fmt.Sprint(lock.ID), "--server", url); code != 0 {
		t.Fatalf("ddl skip: exit %d: %s%s", code, out, errs)
	}
	out, errs, code := cli("tail", "shop", "--server", url, "--client-id", "t", "--from", "earliest", "--max", "4", "--timeout", "20s")
	if code != 0 {
		t.Fatalf("tail: exit %d: %s", code, errs)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct {
			Type  string              `json:"type"`
			Table string              `json:"table"`
			Data  []map[string]string `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		what := m.Type
		if len(m.Data) > 0 {
			what += " " + m.Data[0]["id"]
		}
		kinds = append(kinds, what)
	}
	// The CREATE once; row 1; row 3 flowed while row 2 was held; the skip
	// emits no DDL and releases row 2.
	if want := []string{"CREATE", "INSERT 1", "INSERT 3", "INSERT 2"}; !slices.Equal(kinds, want) {
		t.Fatalf("stream %q, want %q", kinds, want)
	}
}

// serveForTest runs serve (braid capture's serving mode) until the test
// ends, and fails the test if it ended with an error.
func serveForTest(t *testing.T, ds *spec.Spec, opt serveOptions, log *slog.Logger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ds, opt, log) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}
