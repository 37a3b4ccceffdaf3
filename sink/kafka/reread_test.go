package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/kafka"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
	"github.com/braid-cdc/braid/spec"
)

// TestRereadChunkPublishedAgain: after a restart, messages whose (seq, n)
// the topic holds are skipped, except those of a snapshot chunk read
// again, which may hold other rows under the same (seq, n): they are
// published again, so no row of the chunk is lost.
func TestRereadChunkPublishedAgain(t *testing.T) {
	addr := startCluster(t, 1, "shop.orders").ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tbl := &change.Table{Schema: "shop_0", Name: "orders", LogicalSchema: "shop", LogicalName: "orders",
		Columns: []change.Column{{Name: "id", Type: "bigint", Key: true}, {Name: "note", Type: "varchar"}}}
	chunk := func(reread bool, ids ...int64) []sink.Message {
		vals := make([][]change.Value, len(ids))
		for i, id := range ids {
			vals[i] = []change.Value{id, fmt.Sprint("row ", id)}
		}
		rows := change.NewValueRows(tbl, 0, vals)
		msgs := make([]sink.Message, len(rows))
		for i := range rows {
			msgs[i] = sink.Message{Seq: 5, N: i, Source: "a", Database: "shop", Table: "orders", Rows: []*change.RowChange{&rows[i]},
				Body: fmt.Appendf(nil, `{"type":"INSERT","data":[{"id":"%d"}]}`, ids[i]), Reread: reread}
		}
		return msgs
	}
	publish := func(msgs []sink.Message) uint64 {
		t.Helper()
		p, err := kafka.Open(ctx, spec.Sink{Name: "k", Type: "kafka", Brokers: []string{addr}, Topic: spec.DefaultTopic}, "shop")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Publish(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		return p.Skipped()
	}
	if skipped := publish(chunk(false, 1, 2, 3, 4)); skipped != 0 {
		t.Fatalf("first run skipped %d", skipped)
	}
	if skipped := publish(chunk(false, 1, 2, 3, 4)); skipped != 4 {
		t.Fatalf("a restart sending the chunk again skipped %d of 4", skipped)
	}
	// Read again, the chunk holds 1, 3, 9, 12: 2 and 4 deleted since, 9 and
	// 12 inserted; its n are 0..3 again.
	if skipped := publish(chunk(true, 1, 3, 9, 12)); skipped != 0 {
		t.Fatalf("the chunk read again: %d skipped", skipped)
	}
	recs, _, err := kafkatest.Read(ctx, []string{addr}, "shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, r := range recs {
		if len(r.Message.Data) == 1 && r.Message.Data[0]["id"] != nil {
			ids[*r.Message.Data[0]["id"]] = true
		}
	}
	for _, id := range []int{9, 12} {
		if !ids[fmt.Sprint(id)] {
			t.Errorf("row %d of the chunk read again is not in the topic (%d records)", id, len(recs))
		}
	}
	if len(recs) != 8 {
		t.Errorf("%d records, want 8 (4, then the 4 of the chunk read again)", len(recs))
	}
}
