package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/redistest"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink/redis"
)

// TestCaptureRedisSinkSurvivesKills: `braid capture --quiet --cursor-dir`
// keeps six shard tables' rows in Redis (a redis sink, format json) while
// they are written to (inserts, updates, deletes), and is SIGKILLed
// twice while it applies. Once caught up, each key holds its source row
// and no deleted row has a value. Then `braid capture --http-port` runs
// the sink (it reads the stream from the start, and the checkpoints and
// versions apply nothing again), and `braid sink verify` through it
// finds no difference (exit 0), then names a value changed by hand and
// a key deleted by hand (exit 1).
func TestCaptureRedisSinkSurvivesKills(t *testing.T) {
	c, prefix := redistest.Prefix(t)
	shards := sinktest.StartShards(t, "(id BIGINT PRIMARY KEY, amount INT NOT NULL, note VARCHAR(40))")
	tmpl := prefix + "{table}:{pk}"
	specFile := nodes.WriteSpec(t, shoptest.SpecYAML(shards[:3], fmt.Sprintf("sinks:\n  - {name: cache, type: redis, address: '127.0.0.1:6379', key: '%s', workers: 4, batch: 20}\n", tmpl)))
	cursorDir := t.TempDir()
	capture := newCaptureRun(t, specFile)
	start := capture.start
	quiet := func() *exec.Cmd { return start("--quiet", "--cursor-dir", cursorDir) }
	key := func(id int64) string { return redis.KeyFor(tmpl, "shop", "orders", []string{fmt.Sprint(id)}) }

	// Each shard, each round: 60 rows inserted, all updated, some updated
	// again, ten deleted, and one of the round before deleted.
	cmd := quiet()
	for round := range 6 {
		for n, s := range shards {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 60 {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'r%d')", base+int64(k), k, round))
			}
			stmts := []string{
				fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")),
				fmt.Sprintf("UPDATE shop_%d.orders SET amount = amount + 1 WHERE id >= %d AND id < %d", n, base, base+60),
				fmt.Sprintf("UPDATE shop_%d.orders SET note = NULL WHERE id >= %d AND id < %d", n, base+20, base+30),
				fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id >= %d AND id < %d", n, base+50, base+60),
			}
			if round > 0 {
				stmts = append(stmts, fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id = %d", n, base-1000+40))
			}
			s.Exec(t, stmts...)
		}
		if round == 1 || round == 4 {
			// Killed while it applies this round: once a key of it, of a
			// shard drawn at random, has its value.
			k := key(int64(rand.IntN(sinktest.Shards))*1_000_000 + int64(round)*1000 + int64(rand.IntN(20)))
			sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
				return c.Exists(context.Background(), k).Val() == 1, "no value at " + k + " yet"
			})
			cmd.Process.Kill() // SIGKILL
			cmd.Wait()
			cmd = quiet()
		}
	}
	want := sinktest.SourceRows(t, shards, func(n int) string {
		return fmt.Sprintf("SELECT id, amount, IFNULL(note, 'NULL') FROM shop_%d.orders", n)
	})
	var got []string
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		got = redistest.Rows(t, c, prefix, "json", []string{"id", "amount", "note"})
		return slices.Equal(got, want), fmt.Sprintf("the cache has %d rows, the shards %d", len(got), len(want))
	})
	for _, id := range []int64{50, 1_000_040, 5_004_059} {
		if v := c.Get(context.Background(), redis.VersionKey(key(id))).Val(); !strings.HasPrefix(v, "d") {
			t.Errorf("deleted row %d: version %q, want a tombstone", id, v)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Logf("%d rows equal after 2 SIGKILLs", len(got))

	// braid sink verify, through a capture that serves the sink.
	port := nodes.FreePorts(t, 1)[0]
	cmd = start("--http-port", fmt.Sprint(port))
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		out, errs, code := cli("sink", "list", "shop", "--json", "--server", url)
		var sinks []wire.SinkState
		if code != 0 || json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 {
			return false, fmt.Sprintf("sink list: exit %d: %s%s", code, out, errs)
		}
		s := sinks[0]
		return s.Running && s.LagSeq == 0 && s.AppliedSeq > 0 && s.LastError == "", fmt.Sprintf("sink list: %+v", s)
	})
	verify := func() (wire.SinkVerify, int) {
		t.Helper()
		out, errs, code := cli("sink", "verify", "shop", "cache", "--json", "--sample", "5000", "--server", url)
		var rep wire.SinkVerify
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("verify: exit %d: %v: %s%s", code, err, out, errs)
		}
		return rep, code
	}
	rep, code := verify()
	if code != 0 || len(rep.Differences) != 0 || rep.Compared != len(want) || !rep.Settled {
		t.Fatalf("verify of a cache in step: exit %d, %d compared of %d, %+v", code, rep.Compared, len(want), rep.Differences)
	}
	ctx := context.Background()
	c.Set(ctx, key(2_003_005), `{"id":"2003005","amount":"999","note":"planted"}`, 0)
	c.Del(ctx, key(3_002_007))
	rep, code = verify()
	if code != 1 || len(rep.Differences) != 2 {
		t.Fatalf("verify after two changes by hand: exit %d, differences %+v", code, rep.Differences)
	}
	for _, d := range rep.Differences {
		switch {
		case *d.Key[0].Value == "2003005" && d.Kind == wire.DiffValues && len(d.Columns) == 2:
		case *d.Key[0].Value == "3002007" && d.Kind == wire.DiffMissing && d.Origin == "a/shop_3.orders":
		default:
			t.Errorf("a difference not planted, or not as planted: %+v", d)
		}
	}
}
