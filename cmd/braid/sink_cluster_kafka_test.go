package main

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
)

// TestClusterKafkaSinkSurvivesOwnerKills: a cluster destination with a
// kafka sink, under the shop workload; the owner node is SIGKILLed twice
// while one of its produce requests is at the broker, which writes it
// and answers only once the owner is dead. Each new owner goes on from
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
	c := startCluster(t)
	specFile := writeSpec(t, shopSpecYAML(shards[:3], fmt.Sprintf("sinks:\n  - {name: events, type: kafka, brokers: ['%s']}\n", addr)))
	if out, errs, code := cli("destination", "create", "-f", specFile, "--server", c.nodes[0].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}

	// The 3rd produce request, and the 2nd of the owner after, wait at
	// the broker until the owner that sent them is dead.
	var requests, killAt atomic.Int64
	killAt.Store(3)
	atBroker, killed := make(chan struct{}), make(chan struct{})
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if n := requests.Add(1); n == killAt.Load() {
			atBroker <- struct{}{}
			select {
			case <-killed:
			case <-time.After(60 * time.Second):
			}
		}
		return nil, nil, false // the broker writes it
	})
	done := make(chan struct{})
	go func() {
		sinktest.WriteShop(t, shards, nil)
		close(done)
	}()
	for kill := range 2 {
		select {
		case <-atBroker:
		case <-time.After(90 * time.Second):
			t.Fatalf("kill %d: %d produce requests so far, waiting for the one to kill the owner at", kill+1, requests.Load())
		}
		owner, epoch := c.owner(t, "shop")
		owner.Kill()
		if kill == 0 {
			killAt.Store(requests.Load() + 2)
		} else {
			killAt.Store(-1)
		}
		killed <- struct{}{}
		c.waitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
			_, e := c.owner(t, "shop")
			return e != epoch, "no takeover yet"
		})
		owner.start(t, c.bin, c.joinFor(owner))
	}
	<-done

	want := sinktest.ShopRows(t, shards)
	var recs []kafkatest.Record
	c.waitFor(t, 90*time.Second, "the topic's rows equal to the shards'", func() (bool, string) {
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
