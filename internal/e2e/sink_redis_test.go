package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/redistest"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink/redis"
)

// TestClusterRedisSinkSurvivesOwnerKills: a cluster destination with a
// redis sink, which runs on the owner node and moves with it: the owner
// is SIGKILLed twice while the sink applies the round just written, each
// time once a key of that round has its value. The new owner's sink goes
// on from the checkpoints in Redis, and once caught up every key holds
// its source row, no deleted row has a value, and braid sink list shows
// the sink caught up and clean.
func TestClusterRedisSinkSurvivesOwnerKills(t *testing.T) {
	rc, prefix := redistest.Prefix(t)
	srvs := shoptest.Shards(t)
	c := nodes.Start(t, cli)
	tmpl := prefix + "{table}:{pk}"
	specFile := nodes.WriteSpec(t, shoptest.SpecYAML(srvs, fmt.Sprintf("sinks:\n  - {name: cache, type: redis, address: '127.0.0.1:6379', key: '%s', workers: 4}\n", tmpl)))
	if out, errs, code := cli("destination", "create", "-f", specFile, "--server", c.Nodes[0].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	shards := make([]*mysqltest.Server, 6) // shoptest.Shards puts shop_n on server n/2
	for n := range shards {
		shards[n] = srvs[n/2]
	}
	for round := range 6 {
		for n, s := range shards {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 50 {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'r%d')", base+int64(k), n, round))
			}
			s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")),
				fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u%d' WHERE id >= %d AND id < %d", n, round, base, base+40),
				fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id >= %d AND id < %d", n, base+40, base+45))
		}
		if round == 1 || round == 4 {
			k := redis.KeyFor(tmpl, "shop", "orders", []string{fmt.Sprint(int64(rand.IntN(6))*1_000_000 + int64(round)*1000 + int64(rand.IntN(40)))})
			c.WaitFor(t, 30*time.Second, "a key of round "+fmt.Sprint(round), func() (bool, string) {
				return rc.Exists(context.Background(), k).Val() == 1, "no value at " + k + " yet"
			})
			owner, epoch := c.OwnerOf(t, "shop")
			owner.Kill()
			c.WaitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
				_, e := c.OwnerOf(t, "shop")
				return e != epoch, "no takeover yet"
			})
			owner.MustStart(t, c.Bin, c.JoinOf(owner))
		}
	}
	want := sinktest.SourceRows(t, shards, func(n int) string {
		return fmt.Sprintf("SELECT id, shard, IFNULL(note, 'NULL') FROM shop_%d.orders", n)
	})
	var got []string
	c.WaitFor(t, 90*time.Second, "the cache equal to the shards", func() (bool, string) {
		got = redistest.Rows(t, rc, prefix, "json", []string{"id", "shard", "note"})
		return slices.Equal(got, want), fmt.Sprintf("the cache has %d rows, the shards %d", len(got), len(want))
	})
	c.WaitFor(t, 20*time.Second, "the sink caught up in braid sink list", func() (bool, string) {
		out, errs, code := cli("sink", "list", "shop", "--json", "--server", c.Nodes[0].URL())
		var sinks []wire.SinkState
		if code != 0 || json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 {
			return false, fmt.Sprintf("exit %d: %s%s", code, out, errs)
		}
		s := sinks[0]
		return s.Name == "cache" && s.Type == "redis" && s.Running && s.LagSeq == 0 && s.AppliedSeq > 0 && s.LastError == "", fmt.Sprintf("%+v", s)
	})
	t.Logf("%d rows equal after 2 owner SIGKILLs", len(got))
}
