package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/nodes"
)

// TestTailLeavesNoCursor: braid tail without --client-id reads the newest
// transactions and leaves nothing behind: no consumer, no cursor in Raft.
func TestTailLeavesNoCursor(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	c.OwnerOf(t, "shop")
	done := make(chan string, 1)
	go func() {
		out, errs, code := cli("tail", "shop", "--server", c.Nodes[1].URL(), "--max", "8", "--timeout", "60s")
		done <- fmt.Sprintf("exit %d\n%s%s", code, out, errs)
	}()
	// tail starts at latest: write only once it streams.
	c.WaitFor(t, 20*time.Second, "tail to stream", func() (bool, string) {
		out, _, _ := cli("consumer", "list", "shop", "--server", c.Nodes[0].URL())
		return strings.Contains(out, "ephemeral"), out
	})
	for i := range 8 {
		srvs[0].Exec(t, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 0, 'tail')", 1000+i))
	}
	res := <-done
	if !strings.HasPrefix(res, "exit 0") || strings.Count(res, `"tail"`) != 8 {
		t.Fatalf("tail --max 8: %s", res)
	}
	c.WaitFor(t, 10*time.Second, "no consumer left", func() (bool, string) {
		out, _, code := cli("consumer", "list", "shop", "--server", c.Nodes[0].URL(), "--json")
		return code == 0 && strings.TrimSpace(out) == "[]", out
	})
	// Deleting the destination needs no --force: no cursor holds it.
	if out, errs, code := cli("destination", "delete", "shop", "--server", c.Nodes[0].URL()); code != 0 {
		t.Fatalf("delete after an ephemeral tail: exit %d: %s%s", code, out, errs)
	}
}
