package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/redistest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/redis"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/sink/verify"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// The target braid sink verify compares.
var _ verify.Target = (*redis.Target)(nil)

// redisAddr is the machine's Redis, the target of the tests; each test
// keeps its keys under a prefix of its own, deleted after.
const redisAddr = "127.0.0.1:6379"

func testLogger(t *testing.T, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// runner runs a sink over a pipeline until stopped.
type runner struct {
	r    *sink.Runner
	stop func()
}

// startRunner runs sink sk of ds, open as s (open), over p's store as
// braid runs it.
func startRunner(ctx context.Context, p *stream.Pipeline, s sink.Sink, ds *spec.Spec, sk spec.Sink, cursors group.CursorStore, log *slog.Logger) *runner {
	r := sinkrun.NewRunner(ds, sk, s, p.Store, cursors, log)
	return &runner{r: r, stop: sinkrun.Go(ctx, r)}
}

// open opens sink sk of destination shop as braid does.
func open(t *testing.T, sk spec.Sink) sink.Sink {
	t.Helper()
	s, err := sinkrun.Open(t.Context(), sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// target is s's Redis target.
func target(s sink.Sink) *redis.Target { return sinkrun.Client[*redis.Target](s) }

var shopCols = []string{"id", "code", "amount", "note", "c"}

// TestVersionsAndVerify: the shop workload (six shard tables on three
// servers, merged to shop.orders) kept in Redis by two sinks, one of each
// format; that the cache ends equal to the sources, restarted mid-batch
// or from an older cursor, is the conformance suite's. A deleted row has
// no value, its version key a tombstone that expires; a live row's
// version has no TTL. braid sink verify's comparison finds the cache
// equal, and names a value then changed, and a key deleted, by hand. The
// whole stream read again from the start by a runner whose checkpoints
// were deleted applies nothing: the versions guard each key (and verify
// through a target opened then, which has applied nothing, still knows
// the table's columns); and a runner blind to the checkpoints is refused
// (sink.ErrBehind).
func TestVersionsAndVerify(t *testing.T) {
	c, prefix := redistest.Prefix(t)
	shards := sinktest.StartShop(t)
	formats := []string{"json", "hash"}
	var sks []spec.Sink
	for _, f := range formats {
		sks = append(sks, spec.Sink{Name: "cache-" + f, Type: "redis", Address: redisAddr, Key: prefix + f + ":{database}:{table}:{pk}", Format: f, Workers: 4, Batch: 30})
	}
	ds := conformance.ShopSpec(t, shards[:3], sks...)
	log := testLogger(t, slog.LevelWarn)
	ctx := t.Context()
	clients := map[string]*group.Cursor{}
	for _, sk := range ds.Sinks {
		clients[sink.ClientID(sk.Name)] = nil
	}
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: clients, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	targets := make([]sink.Sink, len(formats))
	runners := make([]*runner, len(formats))
	for i, sk := range ds.Sinks {
		targets[i] = open(t, sk)
		defer targets[i].Close()
		runners[i] = startRunner(ctx, p, targets[i], ds, sk, nil, log)
	}
	sinktest.WriteShop(t, shards, nil)
	defer func() {
		for _, r := range runners {
			r.stop()
		}
	}()
	want := sinktest.ShopRows(t, shards)
	for i, f := range formats {
		sk := ds.Sinks[i]
		sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
			got := redistest.Rows(t, c, prefix+f+":", f, shopCols)
			applied, lastErr := runners[i].r.Applied()
			return slices.Equal(got, want), fmt.Sprintf("%s: the cache has %d rows, the sources %d (applied seq %d, last error %q)", f, len(got), len(want), applied, lastErr)
		})
		if st := targets[i].Stats(); st.Upserts != 0 || st.Missing != 0 || st.Applied == 0 {
			t.Fatalf("%s: stats %+v: something was applied twice or missed", f, st)
		}
		// Deleted rows: shard 0's round 0 deleted ids 2 and 3, and moved 1 to 51.
		for _, id := range []string{"2", "3", "1"} {
			k := redis.KeyFor(sk.Key, "shop", "orders", []string{id})
			if n := c.Exists(ctx, k).Val(); n != 0 {
				t.Errorf("%s: deleted row %s has a value", f, k)
			}
			if v := c.Get(ctx, redis.VersionKey(k)).Val(); !strings.HasPrefix(v, "d") || c.TTL(ctx, redis.VersionKey(k)).Val() <= 0 {
				t.Errorf("%s: deleted row %s's version %q, TTL %v: want a tombstone that expires", f, k, v, c.TTL(ctx, redis.VersionKey(k)).Val())
			}
		}
		if v, ttl := c.Get(ctx, redis.VersionKey(redis.KeyFor(sk.Key, "shop", "orders", []string{"51"}))).Val(), c.TTL(ctx, redis.VersionKey(redis.KeyFor(sk.Key, "shop", "orders", []string{"51"}))).Val(); v == "" || v[0] == 'd' || ttl != -1 {
			t.Errorf("%s: a live row's version %q, TTL %v: want seq:idx and none", f, v, ttl)
		}
		t.Logf("%s: %d rows equal; %+v", f, len(want), targets[i].Stats())

		// braid sink verify's comparison finds them equal; then the
		// value changed by hand and the key deleted by hand.
		r := runners[i]
		vcfg := verify.Config{Spec: ds, Sink: sk, Target: target(targets[i]), Sample: 1000, Settle: time.Second,
			Progress: func() (uint64, uint64) { a, _ := r.r.Applied(); return p.Dest.Stats().Seq, a }}
		res, err := verify.Run(ctx, vcfg)
		if err != nil || len(res.Differences) != 0 || res.Compared != len(want) {
			t.Fatalf("%s: verify: %v, %d compared of %d, differences %+v", f, err, res.Compared, len(want), res.Differences)
		}
		changed, deleted := redis.KeyFor(sk.Key, "shop", "orders", []string{"4000007"}), redis.KeyFor(sk.Key, "shop", "orders", []string{"5000010"})
		if f == "json" {
			row, _ := redistest.Row(ctx, c, changed, f)
			planted := "999"
			row["amount"] = &planted
			b, _ := json.Marshal(row)
			c.Set(ctx, changed, b, 0)
		} else {
			c.HSet(ctx, changed, "amount", "999")
		}
		c.Del(ctx, deleted)
		res, err = verify.Run(ctx, vcfg)
		if err != nil || len(res.Differences) != 2 {
			t.Fatalf("%s: verify after two changes by hand: %v, differences %+v", f, err, res.Differences)
		}
		for _, d := range res.Differences {
			switch *d.Key[0].Value {
			case "4000007":
				if d.Kind != wire.DiffValues || len(d.Columns) != 1 || d.Columns[0].Column != "amount" || *d.Columns[0].Target != "999" {
					t.Errorf("%s: the changed value: %+v", f, d)
				}
			case "5000010":
				if d.Kind != wire.DiffMissing {
					t.Errorf("%s: the deleted key: %+v", f, d)
				}
			default:
				t.Errorf("%s: a difference not planted: %+v", f, d)
			}
		}
	}

	// The whole stream again, from the start, by runners whose
	// checkpoints are deleted: each change finds its key's version at or
	// past its own, and nothing is written.
	for _, r := range runners {
		r.stop()
	}
	runners = nil
	before := make([][]string, len(formats))
	for i, f := range formats {
		before[i] = redistest.Rows(t, c, prefix+f+":", f, shopCols)
		if n := c.Del(ctx, func() []string {
			var ks []string
			for w := range ds.Sinks[i].Workers {
				ks = append(ks, fmt.Sprintf("%s%s:braid:sink:shop.%s:%d", prefix, f, ds.Sinks[i].Name, w))
			}
			return ks
		}()...).Val(); n != int64(ds.Sinks[i].Workers) {
			t.Fatalf("%s: deleted %d checkpoint keys, want %d", f, n, ds.Sinks[i].Workers)
		}
	}
	last := p.Dest.Stats().Seq
	p.Close()
	clients[sink.ClientID("fence")] = nil
	again, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: clients, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for i, f := range formats {
		tg := open(t, ds.Sinks[i])
		defer tg.Close()
		r := startRunner(ctx, again, tg, ds, ds.Sinks[i], nil, log)
		defer r.stop()
		sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
			applied, lastErr := r.r.Applied()
			return applied >= last, fmt.Sprintf("%s: the replay reached seq %d of %d (last error %q)", f, applied, last, lastErr)
		})
		if st := tg.Stats(); st.Applied != 0 {
			t.Errorf("%s: the stream read again applied %d row changes, want 0", f, st.Applied)
		}
		if got := redistest.Rows(t, c, prefix+f+":", f, shopCols); !slices.Equal(got, before[i]) {
			t.Errorf("%s: the cache changed when the stream was read again", f)
		}
		// A target that has applied nothing knows the table's columns
		// from the target (a hash has no field for NULL): verify finds
		// the two differences planted above, no more.
		fresh := open(t, ds.Sinks[i])
		defer fresh.Close()
		res, err := verify.Run(ctx, verify.Config{Spec: ds, Sink: ds.Sinks[i], Target: target(fresh), Sample: 1000, Settle: time.Second,
			Progress: func() (uint64, uint64) { a, _ := r.r.Applied(); return again.Dest.Stats().Seq, a }})
		if err != nil || len(res.Differences) != 2 {
			t.Errorf("%s: verify through a target that applied nothing: %v, differences %+v", f, err, res.Differences)
		}
	}

	// A runner that does not know the checkpoints (a former owner, say)
	// applies from the start: the first transaction of each Apply finds
	// its worker's checkpoint past its changes (ErrBehind) and writes
	// nothing.
	tg := open(t, ds.Sinks[0])
	defer tg.Close()
	// A second runner of the sink, on a store client of its own.
	r3 := sinkrun.NewRunner(ds, ds.Sinks[0], sink.NewKeyed(ds.Sinks[0], blind{target(tg)}), again.Store, nil, testLogger(t, slog.LevelError))
	r3.Client = sink.ClientID("fence")
	defer sinkrun.Go(ctx, r3)()
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		_, e := r3.Applied()
		return strings.Contains(e, sink.ErrBehind.Error()), fmt.Sprintf("last error %q, want ErrBehind", e)
	})
	if st := tg.Stats(); st.Applied != 0 {
		t.Fatalf("a runner blind to the checkpoints applied %d row changes", st.Applied)
	}
}

// blind is a target whose checkpoints read as none.
type blind struct{ *redis.Target }

func (b blind) Checkpoints(ctx context.Context, n int) ([]sink.Point, error) {
	return make([]sink.Point, n), nil
}
