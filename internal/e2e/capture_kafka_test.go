package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
)

// kafkaPartitions is how many partitions the crash test's topic has.
const kafkaPartitions = 5

// kafkaRead reads topic shop.orders at addr whole.
func kafkaRead(t *testing.T, addr string) []kafkatest.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	recs, n, err := kafkatest.Read(ctx, []string{addr}, "shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	if n != kafkaPartitions {
		t.Fatalf("shop.orders has %d partitions, want %d", n, kafkaPartitions)
	}
	return recs
}

// kafkaShopColumns are the columns of sinktest.ShopRows.
var kafkaShopColumns = []string{"id", "code", "amount", "note", "c"}

// TestCaptureKafkaSinkSurvivesKills: `braid capture --quiet --cursor-dir`
// publishes six shard tables on three servers, under the shop workload
// (inserts, updates of amounts, of a unique code and of a key, deletes,
// an ALTER every shard runs), to a topic of five partitions of a Kafka
// (kfake, in the test process), and is SIGKILLed twice with a produce
// request on its way. Each restart resumes from its saved cursor, which
// is behind what it had produced, and skips what the partitions already
// hold: the topic ends with every change exactly once by (seq, n), each
// partition in stream order (so each key's changes in order), and the
// rows rebuilt from it equal the sources'. (With the skipping turned off
// the same test finds a message twice every time.)
func TestCaptureKafkaSinkSurvivesKills(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, "shop.orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	shards := sinktest.StartShop(t)
	specFile := nodes.WriteSpec(t, shoptest.SpecYAML(shards[:3], fmt.Sprintf("sinks:\n  - {name: events, type: kafka, brokers: ['%s']}\n", addr)))
	cursorDir := t.TempDir()
	capture := newCaptureRun(t, specFile)
	start := func() *exec.Cmd { return capture.start("--quiet", "--cursor-dir", cursorDir) }

	// The capture is killed twice as its k'th produce request reaches
	// the broker, which then writes it: the records land, their ack never
	// comes back, and the cursor was saved before them. The restarted
	// capture is handed them again and must find them in the topic.
	var (
		mu       sync.Mutex
		cmd      = start()
		requests atomic.Int64
		kills    = make(chan struct{}, 2)
	)
	k1 := 2 + rand.Int64N(4)
	k2 := k1 + 2 + rand.Int64N(5) // a run makes 17 to 41
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n := requests.Add(1); n == k1 || n == k2 {
			mu.Lock()
			if cmd != nil {
				cmd.Process.Kill() // SIGKILL
			}
			mu.Unlock()
			kills <- struct{}{}
		}
		return nil, nil, false // the broker writes it
	})
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		for range 2 {
			select {
			case <-kills:
			case <-time.After(60 * time.Second):
				t.Errorf("%d produce requests in a minute, waiting for the %d'th and %d'th to kill the capture", requests.Load(), k1, k2)
				return
			}
			mu.Lock()
			if cmd != nil {
				cmd.Wait()
			}
			cmd = start()
			mu.Unlock()
		}
	}()
	sinktest.WriteShop(t, shards, nil)
	<-restarted
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if cmd != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	if t.Failed() {
		t.FailNow()
	}

	want := sinktest.ShopRows(t, shards)
	var recs []kafkatest.Record
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		recs = kafkaRead(t, addr)
		got, err := kafkatest.Rows(recs, "id", kafkaShopColumns)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(got, want), fmt.Sprintf("%d rows rebuilt from %d records, sources %d; first differences: %s",
			len(got), len(recs), len(want), kafkatest.FirstDiff(got, want))
	})
	// Anything the sink still had to publish would be a duplicate.
	time.Sleep(time.Second)
	recs = kafkaRead(t, addr)
	if err := kafkatest.Check(recs, kafkaPartitions); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records after 2 SIGKILLs (at produce requests %d and %d of %d), each change once, rows equal the sources",
		len(recs), k1, k2, requests.Load())
}
