// Package shoptest is the "shop" fixture the process-level tests of
// cmd/braid and internal/e2e share: three MariaDB servers holding the
// schemas shop_0 … shop_5 (two a server), each with an orders table, and
// the destination spec that merges them into shop.orders.
//
//	srvs := shoptest.Shards(t)
//	spec := shoptest.SpecYAML(srvs, "max_clock_skew: 200ms\n")
//
// StartFailover is the smaller fixture of the failover tests: one
// primary with a GTID replica behind a virtual IP, and its spec.
//
// Like the other test harnesses it imports no server package.
//
// # Concurrency
//
// Shards, StartWriter and Writer.More follow the rules of testing.TB
// (call them from the test's goroutine); SpecYAML is a pure function;
// the other methods of Writer are safe anywhere.
package shoptest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// Shards starts three MariaDB servers (mysqltest.StartN) holding shop_0 …
// shop_5, shop_2i and shop_2i+1 on server i, each with an orders table
// (id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40)).
func Shards(tb testing.TB) []*mysqltest.Server {
	tb.Helper()
	srvs := mysqltest.StartN(tb, 3)
	for i, s := range srvs {
		for _, db := range []int{2 * i, 2*i + 1} {
			// A second before now: the tables exist, in the merged order,
			// before whatever a test runs next in the same second on
			// another server (MariaDB stamps events to the second, and a
			// tie goes to the lower source).
			s.Exec(tb, "SET timestamp = UNIX_TIMESTAMP() - 1", fmt.Sprintf("CREATE DATABASE shop_%d", db),
				fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))", db))
		}
	}
	return srvs
}

// SpecYAML is the shop destination over the three servers of Shards
// (sources a, b, c, from the earliest position), its tables routed to
// shop.orders, heartbeat 100ms, with extra lines at the end.
func SpecYAML(srvs []*mysqltest.Server, extra string) string {
	return fmt.Sprintf(`
name: shop
sources:
  - {name: a, address: '%s', start: earliest}
  - {name: b, address: '%s', start: earliest}
  - {name: c, address: '%s', start: earliest}
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
heartbeat: 100ms
`, srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()) + extra
}

// Writer writes to the six shard tables of Shards in rounds until Stop:
// round n (from 1) inserts the row of id Writer.ID(shard, n) into each
// shop_<shard>.orders (note 'w') and updates the row of round n-1 (note
// 'u'), then sleeps 5 ms. Its rows are each inserted, then updated once
// (the last round's not yet).
type Writer struct {
	rounds     atomic.Int64
	stop, done chan struct{}
	halt       sync.Once
}

// StartWriter starts a Writer on the servers of Shards; the test's
// cleanup stops it. A failed statement fails the test (Exec) and stops
// the writer.
func StartWriter(tb testing.TB, srvs []*mysqltest.Server) *Writer {
	tb.Helper()
	w := &Writer{stop: make(chan struct{}), done: make(chan struct{})}
	tb.Cleanup(w.Stop)
	go func() {
		defer close(w.done)
		for n := int64(1); ; n++ {
			select {
			case <-w.stop:
				return
			default:
			}
			for shard := range 6 {
				id := w.ID(shard, n)
				stmts := []string{fmt.Sprintf("INSERT INTO shop_%d.orders (id, shard, note) VALUES (%d, %d, 'w')", shard, id, shard)}
				if n > 1 {
					stmts = append(stmts, fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u' WHERE id = %d", shard, id-1))
				}
				srvs[shard/2].Exec(tb, stmts...)
			}
			w.rounds.Store(n)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return w
}

// ID is the id of shard's row of round n.
func (w *Writer) ID(shard int, n int64) int64 { return int64(shard)*1_000_000 + n }

// Rounds is how many rounds the writer has written.
func (w *Writer) Rounds() int64 { return w.rounds.Load() }

// More waits until the writer has written n more rounds (30 s at the
// most, then fails the test).
func (w *Writer) More(tb testing.TB, n int64) {
	tb.Helper()
	want := w.rounds.Load() + n
	retry.Until(tb, 30*time.Second, func() error {
		if got := w.rounds.Load(); got < want {
			return fmt.Errorf("the writer is at round %d, want %d", got, want)
		}
		return nil
	})
}

// Stop stops the writer and waits for its round to end; again, it does
// nothing.
func (w *Writer) Stop() {
	w.halt.Do(func() { close(w.stop); <-w.done })
}
