package e2e

import (
	"fmt"
	"slices"
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

// TestClusterKafkaSinkSurvivesOwnerKills: a cluster destination with a
// kafka sink, under the shop workload; the owner node is SIGKILLed twice
// (after rounds 1 and 4) while one of its produce requests is at the
// broker, which writes it and answers only once the owner is dead. Each new owner goes on from
// the sink's cursor in Raft, which is behind what the old one produced,
// and finds in the partitions what is already there: the topic ends with
// every change exactly once, each partition in stream order, and the rows
// rebuilt from it equal the sources'.
func TestClusterKafkaSinkSurvivesOwnerKills(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, "shop.orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	addr := kc.ListenAddrs()[0]
	shards := sinktest.StartShop(t)
	c := nodes.Start(t, cli)
	specFile := nodes.WriteSpec(t, shoptest.SpecYAML(shards[:3], fmt.Sprintf("sinks:\n  - {name: events, type: kafka, brokers: ['%s']}\n", addr)))
	if out, errs, code := cli("destination", "create", "-f", specFile, "--server", c.Nodes[0].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}

	// After rounds 1 and 4 of the workload, the next produce request
	// waits at the broker until the owner that sent it is dead.
	var requests atomic.Int64
	var armed atomic.Bool
	atBroker, killed := make(chan struct{}), make(chan struct{})
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		requests.Add(1)
		if armed.CompareAndSwap(true, false) {
			select {
			case atBroker <- struct{}{}:
				select {
				case <-killed:
				case <-time.After(60 * time.Second):
				}
			case <-time.After(60 * time.Second): // the test gave up
			}
		}
		return nil, nil, false // the broker writes it
	})
	sinktest.WriteShop(t, shards, func(round int) {
		if round != 1 && round != 4 {
			return
		}
		armed.Store(true)
		select {
		case <-atBroker:
		case <-time.After(90 * time.Second):
			t.Fatalf("after round %d: no produce request in 90 s (%d so far)", round, requests.Load())
		}
		owner, epoch := c.OwnerOf(t, "shop")
		owner.Kill()
		killed <- struct{}{}
		c.WaitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
			_, e := c.OwnerOf(t, "shop")
			return e != epoch, "no takeover yet"
		})
		owner.MustStart(t, c.Bin, c.JoinOf(owner))
	})

	want := sinktest.ShopRows(t, shards)
	var recs []kafkatest.Record
	c.WaitFor(t, 90*time.Second, "the topic's rows equal to the shards'", func() (bool, string) {
		recs = kafkaRead(t, addr)
		got, err := kafkatest.Rows(recs, "id", kafkaShopColumns)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(got, want), fmt.Sprintf("%d rows rebuilt from %d records, sources %d; first differences: %s",
			len(got), len(recs), len(want), kafkatest.FirstDiff(got, want))
	})
	time.Sleep(time.Second) // anything still to publish would be a duplicate
	recs = kafkaRead(t, addr)
	if err := kafkatest.Check(recs, kafkaPartitions); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records after 2 owner SIGKILLs with a produce request at the broker (%d requests), each change once, rows equal the sources",
		len(recs), requests.Load())
}
