package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine"
	"github.com/braid-cdc/braid/internal/mysqltest"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// withoutTS parses flat-message lines and drops ts (the time each was
// written), which differs between two readings of one stream.
func withoutTS(t *testing.T, out string) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		delete(m, "ts")
		msgs = append(msgs, m)
	}
	return msgs
}

// TestTailEqualsCapture serves a two-shard destination over the native API
// and reads it with `braid tail`, twice with the same client id (the second
// goes on where the first stopped), and compares it with what `braid
// capture` prints of the same destination: row for row the same.
func TestTailEqualsCapture(t *testing.T) {
	srvs := mysqltest.StartN(t, 2)
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(20))", i))
		for k := 0; k < 5; k++ {
			s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'n%d')", i, 10*i+k, k))
		}
		s.Exec(t, fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u' WHERE id %% 2 = 0", i))
	}
	specText := fmt.Sprintf("name: shop\nsources:\n  - {name: a, address: '%s', start: earliest}\n  - {name: b, address: '%s', start: earliest}\ntables: ['shop_\\d+\\.orders']\nroute: [{match: 'shop_\\d+\\.(\\w+)', to: 'shop.$1'}]\nheartbeat: 100ms\n", srvs[0].Addr(), srvs[1].Addr())
	specFile := writeSpec(t, specText)
	const n = 14 // 2 CREATE TABLE, 10 INSERT, 2 UPDATE

	var printed, errb bytes.Buffer
	if code := run([]string{"capture", "-f", specFile, "--max", fmt.Sprint(n), "--timeout", "60s"}, &printed, &errb); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errb.String())
	}

	spec, err := engine.ParseSpec([]byte(specText))
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, spec, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	var tailed bytes.Buffer
	for _, max := range []int{9, n - 9} {
		var out, errb bytes.Buffer
		deadline := time.Now().Add(10 * time.Second)
		code := 1
		for code != 0 && time.Now().Before(deadline) { // the server may still be starting
			out.Reset()
			errb.Reset()
			code = run([]string{"tail", "shop", "--server", url, "--client-id", "t1", "--max", fmt.Sprint(max), "--timeout", "60s"}, &out, &errb)
			if code != 0 {
				time.Sleep(200 * time.Millisecond)
			}
		}
		if code != 0 {
			t.Fatalf("tail: exit %d: %s", code, errb.String())
		}
		tailed.Write(out.Bytes())
	}
	want, got := withoutTS(t, printed.String()), withoutTS(t, tailed.String())
	if len(got) != len(want) {
		t.Fatalf("tail printed %d messages over two runs, capture %d:\n%s", len(got), len(want), tailed.String())
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("message %d differs:\ntail    %v\ncapture %v", i, got[i], want[i])
		}
	}
}
