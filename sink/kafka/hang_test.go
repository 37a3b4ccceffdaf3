package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/kafka"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
	"github.com/braid-cdc/braid/spec"
)

// ddls are n DDL messages of shop.orders, seqs 1 to n: a message with a
// key and no rows.
func ddls(n int) []sink.Message {
	out := make([]sink.Message, n)
	for i := range out {
		out[i] = sink.Message{Seq: uint64(i + 1), Source: "s0", Database: "shop", Table: "orders", DDL: true, Body: []byte(`{"isDdl":true}`)}
	}
	return out
}

// TestPublishWhenBrokerHangs: a broker that takes produce requests and
// never answers. A Publish whose context ends returns, its transaction
// not committed, with nothing pending; a Publish blocked so returns when
// the publisher is closed, too. Once the broker answers again, a new
// Publish (a new producer, which aborts the open transaction) reads the
// partition ends and produces every message once.
func TestPublishWhenBrokerHangs(t *testing.T) {
	c := startCluster(t, 1, "shop.orders")
	hang := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case <-hang:
			return nil, nil, false // answered again
		default:
		}
		c.KeepControl()
		return nil, nil, true // swallowed
	})
	ds := spec.Spec{Sinks: []spec.Sink{{Name: "events", Type: "kafka", Brokers: c.ListenAddrs()}}}.WithDefaults()
	pub, err := kafka.Open(t.Context(), ds.Sinks[0], "shop")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := pub.Publish(ctx, ddls(10)); err == nil {
		t.Fatal("Publish to a broker that does not answer succeeded")
	}
	if st := pub.Stats(); st.Pending != 0 || st.Applied != 0 {
		t.Fatalf("stats %+v after the failed Publish", st)
	}

	// Closed while blocked: returns.
	pub2, err := kafka.Open(t.Context(), ds.Sinks[0], "shop")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pub2.Publish(t.Context(), ddls(10)) }()
	time.Sleep(200 * time.Millisecond)
	pub2.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a Publish the publisher was closed under succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not make a blocked Publish return")
	}
	if err := pub2.Publish(t.Context(), ddls(1)); !errors.Is(err, kafka.ErrClosed) {
		t.Fatalf("Publish after Close: %v, want ErrClosed", err)
	}

	// The broker answers again (the swallowed requests were never
	// written): everything is produced once.
	close(hang)
	if err := pub.Publish(t.Context(), ddls(10)); err != nil {
		t.Fatal(err)
	}
	if st := pub.Stats(); st.Applied != 10 || st.Pending != 0 {
		t.Fatalf("stats %+v, want 10 applied", st)
	}
	recs := readTopic(t, c.ListenAddrs()[0])
	if err := kafkatest.Check(recs, partitions); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10 {
		t.Fatalf("%d records committed, want 10", len(recs))
	}
}
