package e2e

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/rabbittest"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
)

// TestCaptureRabbitMQSinkSurvivesKills: `braid capture --quiet
// --cursor-dir` relays six shard tables on three servers, merged to
// shop.orders, to the machine's RabbitMQ (a vhost of the test's own) with
// queues: per-table, under a workload of single-row and multi-row
// inserts, updates (one changes a key) and deletes, every statement its
// own transaction and so its own message; it is SIGKILLed twice while it
// publishes. A consumer of the shop.orders queue, once it de-duplicates
// by message_id, has every message exactly once (as many as the
// statements, plus the CREATE TABLE) in stream order, and the rows they
// carry, applied in that order, equal the shards'.
func TestCaptureRabbitMQSinkSurvivesKills(t *testing.T) {
	url := rabbittest.Vhost(t)
	shards := sinktest.StartShop(t)
	specFile := nodes.WriteSpec(t, shoptest.SpecYAML(shards[:3], fmt.Sprintf(
		"sinks:\n  - {name: mq, type: rabbitmq, url: '%s', password: guest, queues: per-table}\n", url)))
	cursorDir := t.TempDir()
	capture := newCaptureRun(t, specFile)
	start := func() *exec.Cmd { return capture.start("--quiet", "--cursor-dir", cursorDir) }

	cmd := start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	c := rabbittest.Consume(t, url, "shop.orders")
	const rounds, perRound = 8, 6 * 38 // messages a round: 38 statements on each shard
	written := 1                       // the shards' CREATE TABLE, merged into one
	for round := range rounds {
		killed := make(chan *exec.Cmd, 1)
		if round == 2 || round == 5 {
			// Killed while it publishes this round, as it is written:
			// once the queue holds some of it.
			go func(old *exec.Cmd, n int) {
				for deadline := time.Now().Add(30 * time.Second); len(c.Deliveries()) <= n && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				old.Process.Kill() // SIGKILL
				old.Wait()
				killed <- start()
			}(cmd, written+rand.IntN(perRound/2))
		} else {
			killed <- cmd
		}
		for n, s := range shards {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 40 {
				vals = append(vals, fmt.Sprintf("(%d, 'c%d', %d, 'r%d')", base+int64(k), base+int64(k), k, round))
			}
			stmts := []string{"INSERT INTO shop_%[1]d.orders (id, code, amount, note) VALUES " + strings.Join(vals, ", ")}
			for k := range 20 {
				id := base + 100 + int64(k)
				stmts = append(stmts, fmt.Sprintf("INSERT INTO shop_%%[1]d.orders VALUES (%d, 'c%d', %d, NULL)", id, id, k))
			}
			for k := range 10 {
				stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET amount = amount + 1, note = 'u' WHERE id = %d", base+10+int64(k)))
			}
			stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET id = id + 500 WHERE id = %d", base+1))
			for k := range 5 {
				stmts = append(stmts, fmt.Sprintf("DELETE FROM shop_%%[1]d.orders WHERE id = %d", base+100+2*int64(k)))
			}
			stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET amount = amount * 2 WHERE id BETWEEN %d AND %d", base+20, base+39))
			for _, q := range stmts {
				s.Exec(t, fmt.Sprintf(q, n))
			}
		}
		written += perRound
		cmd = <-killed
	}

	want := sinktest.SourceRows(t, shards, func(n int) string {
		return fmt.Sprintf("SELECT id, code, amount, IFNULL(note, 'NULL') FROM shop_%d.orders", n)
	})
	var got rabbittest.Received
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		got = rabbittest.Dedup(t, c.Deliveries(), "shop")
		rows := got.Rows("id", "id", "code", "amount", "note")
		return len(got.Pos) >= written && slices.Equal(rows, want),
			fmt.Sprintf("the queue has %d messages of %d (%d delivered again; %s), %d rows of %d",
				len(got.Pos), written, got.Dups, got.Gaps(), len(rows), len(want))
	})
	if len(got.Pos) != written {
		t.Fatalf("the queue has %d distinct messages, the shards wrote %d", len(got.Pos), written)
	}
	got.Ordered(t)
	t.Logf("%d messages once each, in stream order, after 2 SIGKILLs (%d delivered again); %d rows equal the shards",
		written, got.Dups, len(want))
}
