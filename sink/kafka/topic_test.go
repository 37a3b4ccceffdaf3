package kafka_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/braid-cdc/braid/sink/kafka"
	"github.com/braid-cdc/braid/spec"
)

// openTo opens a publisher of sink "events" to cluster c's topic
// template topic ("" the default).
func openTo(t *testing.T, c *kfake.Cluster, topic string) *kafka.Publisher {
	t.Helper()
	ds := spec.Spec{Sinks: []spec.Sink{{Name: "events", Type: "kafka", Brokers: c.ListenAddrs(), Topic: topic}}}.WithDefaults()
	pub, err := kafka.Open(t.Context(), ds.Sinks[0], "shop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return pub
}

// TestMissingTopic: a topic the brokers do not have and do not create is
// ErrNoTopic, which says to create it; brokers that create topics
// (auto.create.topics.enable) create it at the first message, and the
// publisher produces to it.
func TestMissingTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := openTo(t, c, "").Publish(t.Context(), ddls(1)); !errors.Is(err, kafka.ErrNoTopic) {
		t.Fatalf("Publish to a missing topic: %v, want ErrNoTopic", err)
	}

	auto, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3))
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	pub := openTo(t, auto, "braid-events") // one topic for every table
	if err := pub.Publish(t.Context(), ddls(3)); err != nil {
		t.Fatal(err)
	}
	if st := pub.Stats(); st.Applied != 3 {
		t.Fatalf("stats %+v, want 3 applied", st)
	}
}

// TestForeignRecord: a partition whose last record another producer wrote
// (no seq and n headers) says nothing of what the sink wrote, so the
// publisher stops with ErrNoPosition rather than guess.
func TestForeignRecord(t *testing.T) {
	c := startCluster(t, 1, "shop.orders")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(partitions) {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "shop.orders", Partition: p, Value: []byte("not braid's")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := openTo(t, c, "").Publish(t.Context(), ddls(1)); !errors.Is(err, kafka.ErrNoPosition) {
		t.Fatalf("Publish over a foreign record: %v, want ErrNoPosition", err)
	}
}

// TestOtherSinksTopic: two destinations whose sinks write one topic (the
// default topic template names the logical table, not the destination)
// have seqs of two streams there; the second sink finds the first's
// record last and stops with ErrForeign, naming the fix, rather than skip
// its own messages by another stream's seqs.
func TestOtherSinksTopic(t *testing.T) {
	c := startCluster(t, 1, "shop.orders")
	if err := openTo(t, c, "").Publish(t.Context(), ddls(3)); err != nil {
		t.Fatal(err)
	}
	ds := spec.Spec{Sinks: []spec.Sink{{Name: "events", Type: "kafka", Brokers: c.ListenAddrs()}}}.WithDefaults()
	other, err := kafka.Open(t.Context(), ds.Sinks[0], "crm")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = other.Publish(t.Context(), ddls(1))
	if !errors.Is(err, kafka.ErrForeign) || !strings.Contains(err.Error(), `"shop/events"`) || !strings.Contains(err.Error(), "give the sink a topic of its own") {
		t.Fatalf("Publish over another sink's records: %v, want ErrForeign naming shop/events and the fix", err)
	}
}
