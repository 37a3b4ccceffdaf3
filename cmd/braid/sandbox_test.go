package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/internal/mariadb"
)

// needServerBinary skips the test when no mariadbd (or mysqld) is
// installed, naming the fix, and fails it instead under CI=true, as
// mysqltest.Start does; it starts no server (the sandbox starts its own).
func needServerBinary(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test starts mariadbd servers")
	}
	err := mariadb.Prepare(t.Context())
	if err == nil {
		return
	}
	if errors.Is(err, mariadb.ErrNoServer) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// sandboxLine is what TestSandboxMergesTwoServers reads of a line.
type sandboxLine struct {
	Seq                         uint64
	Type, Database, Table       string
	IsDdl                       bool
	Source                      string
	OriginDatabase, OriginTable string
}

// TestSandboxMergesTwoServers runs the newcomer's first command as the
// README gives it, `braid capture --sandbox --max 40`, and checks that it
// shows what braid is for: rows of one logical table, shop.orders, from
// two servers' shard tables (a's shop_0.orders and b's shop_1.orders),
// merged into one stream with dense seqs.
func TestSandboxMergesTwoServers(t *testing.T) {
	needServerBinary(t)
	var out, errb bytes.Buffer
	if code := run([]string{"capture", "--sandbox", "--max", "40", "--timeout", "120s"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 40 {
		t.Fatalf("%d lines, want 40:\n%s", len(lines), out.String())
	}
	wantOrigin := map[string]string{"a": "shop_0", "b": "shop_1"}
	rows := map[string]int{}
	var last uint64
	for i, l := range lines {
		var m sandboxLine
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i+1, err, l)
		}
		if m.Database+"."+m.Table != "shop.orders" {
			t.Errorf("line %d: table %s.%s, want the logical shop.orders: %s", i+1, m.Database, m.Table, l)
		}
		if m.Seq != last && m.Seq != last+1 {
			t.Errorf("line %d: seq %d after %d: not dense", i+1, m.Seq, last)
		}
		last = m.Seq
		if m.IsDdl {
			continue
		}
		if want, ok := wantOrigin[m.Source]; !ok || m.OriginDatabase != want || m.OriginTable != "orders" {
			t.Errorf("line %d: %s from source %q, %s.%s: want a's shop_0.orders or b's shop_1.orders", i+1, m.Type, m.Source, m.OriginDatabase, m.OriginTable)
		}
		rows[m.Source]++
	}
	if rows["a"] == 0 || rows["b"] == 0 {
		t.Errorf("row messages by source %v: want both servers, a and b, in the merged stream:\n%s", rows, out.String())
	}
	for _, s := range []string{"shop_0.orders", "shop_1.orders"} {
		if !strings.Contains(errb.String(), "sandbox: MariaDB ready; writing orders into "+s) {
			t.Errorf("stderr does not say a server writes %s:\n%s", s, errb.String())
		}
	}
}
