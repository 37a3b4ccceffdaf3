package binlog_test

import (
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// BenchmarkPayload measures what a compressed transaction costs: go-mysql
// decompressing and parsing it (on its reading goroutine, as for every
// replica built on it, canal too), then braid parsing its events again
// with its row filter (on the reader's goroutine), on the MySQL 8.0.27
// sample (an INSERT, two UPDATEs, a DELETE of 600-byte rows). Measured
// on 2 shared cores: go-mysql 0.4-1 ms a payload (a zstd decoder made for
// each), braid's second parse 19-26 µs.
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
	b.Run("braid-again", func(b *testing.B) {
		inner := innerEvents(b, fde, payload)
		feed := newFeed(b, "compression_test.CREATE TABLE large_data (id int NOT NULL PRIMARY KEY, data text, created_at timestamp NULL)")
		p := feed.Parser()
		noFormat := append([]byte(nil), fde...)
		noFormat[len(noFormat)-5] = 0
		if _, err := p.Parse(noFormat); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			for _, e := range inner {
				if _, err := p.Parse(e.RawData); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
