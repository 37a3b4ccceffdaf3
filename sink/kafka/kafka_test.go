package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/kafka"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// partitions is how many partitions the tests' topic shop.orders has.
const partitions = 5

// startCluster starts an in-process Kafka (kfake) of brokers brokers
// holding topics of partitions partitions each.
func startCluster(t testing.TB, brokers int, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// relay is a pipeline and a runner relaying its store to a kafka
// publisher, until stopped.
type relay struct {
	p    *stream.Pipeline
	pub  *kafka.Publisher
	r    *sink.Runner
	stop func()
}

// startRelay starts a pipeline of ds whose sink's cursor is from (nil:
// the start of the stream), and a runner that relays it to a publisher of
// its own, saving its cursor in cursors (nil: nowhere).
func startRelay(t *testing.T, ds *spec.Spec, from *group.Cursor, cursors group.CursorStore) *relay {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	sk := ds.Sinks[0]
	log := testLogger(t)
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{sink.ClientID(sk.Name): from}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sinkrun.Open(ctx, sk, ds.Name, log)
	if err != nil {
		t.Fatal(err)
	}
	r := sinkrun.NewRunner(ds, sk, s, p.Store, cursors, log)
	stop := sinkrun.Go(ctx, r)
	rl := &relay{p: p, pub: sinkrun.Client[*kafka.Publisher](s), r: r}
	rl.stop = func() {
		cancel()
		stop()
		s.Close()
		p.Close()
	}
	return rl
}

// shopColumns are the columns of sinktest.ShopRows.
var shopColumns = []string{"id", "code", "amount", "note", "c"}

// readTopic reads every record of topic shop.orders at addr.
func readTopic(t *testing.T, addr string) []kafkatest.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	recs, n, err := kafkatest.Read(ctx, []string{addr}, "shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	if n != partitions {
		t.Fatalf("shop.orders has %d partitions, want %d", n, partitions)
	}
	return recs
}

// waitTopic waits until the rows rebuilt from topic shop.orders at addr
// equal want, and rl's runner has published through its pipeline's
// head, and returns the topic's records.
func waitTopic(t *testing.T, rl *relay, addr string, want []string) []kafkatest.Record {
	t.Helper()
	var recs []kafkatest.Record
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		recs = readTopic(t, addr)
		got, err := kafkatest.Rows(recs, "id", shopColumns)
		if err != nil {
			t.Fatal(err)
		}
		head := rl.p.Dest.Stats().Seq
		applied, lastErr := rl.r.Applied()
		return slices.Equal(got, want) && applied >= head, fmt.Sprintf("%d rows rebuilt from %d records, sources %d; published through seq %d of %d (last error %q); first differences: %s",
			len(got), len(recs), len(want), applied, head, lastErr, kafkatest.FirstDiff(got, want))
	})
	return recs
}

// checkTopic checks the records of shop.orders (kafkatest.Check) and that
// the rows rebuilt from them equal want; it returns how many there are.
func checkTopic(t *testing.T, recs []kafkatest.Record, want []string) int {
	t.Helper()
	if err := kafkatest.Check(recs, partitions); err != nil {
		t.Fatal(err)
	}
	got, err := kafkatest.Rows(recs, "id", shopColumns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows rebuilt from the topic: %d, sources %d; first differences: %s", len(got), len(want), kafkatest.FirstDiff(got, want))
	}
	return len(recs)
}

// TestProduceFailures: of three brokers, one at a time fails a produce
// request outright (every partition of the request answered
// INVALID_RECORD, nothing written), in the middle of the workload, while
// the others write theirs. Each failure fails a Publish; the runner
// retries from the transaction's first message, the publisher reads the
// partitions' ends again and skips what the same Publish had already
// written to the other brokers' partitions. The topic ends with every
// change once.
func TestProduceFailures(t *testing.T) {
	c := startCluster(t, 3, "shop.orders")
	addr := c.ListenAddrs()[0]
	shards := sinktest.StartShop(t)
	ds := conformance.ShopSpec(t, shards[:3], spec.Sink{Name: "events", Type: "kafka", Brokers: []string{addr}})
	var requests, failed atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n := requests.Add(1); n%7 != 3 || failed.Load() >= 4 {
			return nil, nil, false
		}
		failed.Add(1)
		return invalidRecord(req.(*kmsg.ProduceRequest)), nil, true
	})
	rl := startRelay(t, ds, nil, nil)
	defer func() { rl.stop() }()
	sinktest.WriteShop(t, shards, nil)
	want := sinktest.ShopRows(t, shards)
	n := checkTopic(t, waitTopic(t, rl, addr, want), want)
	if failed.Load() == 0 {
		t.Fatal("no produce request failed")
	}
	t.Logf("%d records, each change once, after %d failed produce requests of %d; %d skipped on retries",
		n, failed.Load(), requests.Load(), rl.pub.Skipped())
}
