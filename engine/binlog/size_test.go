package binlog_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// TestEventSizeMatchesHeap checks Event.Size, which the store's and the
// merge queues' byte bounds rest on, against the heap the events of 20,000
// decoded rows (the benchmark's order table: integers, ENUM, DECIMAL,
// strings, temporal types, JSON, SET) really hold: the estimate must be
// within 40% either way, or the memory bound a destination promises is off.
func TestEventSizeMatchesHeap(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", `CREATE TABLE shop.orders (
		id BIGINT NOT NULL PRIMARY KEY, customer_id INT UNSIGNED NOT NULL,
		status ENUM('new','paid','shipped','cancelled') NOT NULL, total DECIMAL(12,2) NOT NULL,
		currency CHAR(3) NOT NULL, discount DOUBLE NULL, note VARCHAR(255) NULL,
		created_at DATETIME(6) NOT NULL, updated_at TIMESTAMP(3) NULL, attrs JSON NULL,
		flags SET('gift','express','fragile') NOT NULL DEFAULT '')`)
	for tx := 0; tx < 20; tx++ {
		var vals []string
		for i := 0; i < 1000; i++ {
			id := tx*1000 + i
			vals = append(vals, fmt.Sprintf("(%d, %d, 'paid', %d.25, 'EUR', 0.5, 'note number %d for the order', NOW(6), NOW(3), '{\"a\": %d, \"b\": \"xyz\"}', 'gift')", id, id%97, id, id, id))
		}
		srv.Exec(t, "INSERT INTO shop.orders VALUES "+strings.Join(vals, ","))
	}
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	retry.Until(t, 30*time.Second, func() error {
		r.mu.Lock()
		rows := 0
		for _, ev := range r.events {
			rows += len(ev.Rows)
		}
		r.mu.Unlock()
		if rows < 20000 {
			return fmt.Errorf("%d rows of 20000 read", rows)
		}
		return nil
	})
	r.stop()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	held := ms.HeapAlloc
	var size int64
	r.mu.Lock()
	for _, ev := range r.events {
		size += ev.Size()
	}
	n := len(r.events)
	r.events = nil
	r.mu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := int64(held) - int64(ms.HeapAlloc)
	ratio := float64(heap) / float64(size)
	t.Logf("%d events: the heap they hold is %d bytes, Size says %d: ratio %.2f", n, heap, size, ratio)
	if ratio < 0.6 || ratio > 1.4 {
		t.Errorf("Event.Size is off: the events hold %.2fx what it estimates", ratio)
	}
}
