package binlog_test

import (
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// BenchmarkPayload measures what a compressed transaction costs to parse,
// on the MySQL 8.0.27 sample (an INSERT, two UPDATEs, a DELETE of
// 600-byte rows): go-mysql's parse (a zstd decoder made for each payload,
// every inner event decoded), as every replica built on it does, canal
// too, and braid's (one decoder kept, the inner events parsed once, with
// its row filter).
func BenchmarkPayload(b *testing.B) {
	w := newBinlogWriter()
	fde := w.event(replication.FORMAT_DESCRIPTION_EVENT, formatDescription("8.0.27", mysql8027HeaderLengths))
	w.event(replication.GTID_EVENT, mysql8019GTID)
	payload := w.event(replication.TRANSACTION_PAYLOAD_EVENT, transactionPayload(mysql8027Payload, 0))
	for _, concurrency := range []int{0, 1} {
		b.Run(fmt.Sprintf("go-mysql-concurrency-%d", concurrency), func(b *testing.B) {
			p := replication.NewBinlogParser()
			p.SetPayloadDecoderConcurrency(concurrency)
			if _, err := p.Parse(fde); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := p.Parse(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("braid", func(b *testing.B) {
		feed := newFeed(b, "compression_test.CREATE TABLE large_data (id int NOT NULL PRIMARY KEY, data text, created_at timestamp NULL)")
		if err := feed.Parse(fde); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := feed.Parse(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
