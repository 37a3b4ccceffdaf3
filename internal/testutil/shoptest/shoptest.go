// Package shoptest is the "shop" fixture the process-level tests of
// cmd/braid and internal/e2e share: three MariaDB servers holding the
// schemas shop_0 … shop_5 (two a server), each with an orders table, and
// the destination spec that merges them into shop.orders.
//
//	srvs := shoptest.Shards(t)
//	spec := shoptest.SpecYAML(srvs, "max_clock_skew: 200ms\n")
//
// Like the other test harnesses it imports no server package.
//
// # Concurrency
//
// Shards follows the rules of testing.TB (call it from the test's
// goroutine); SpecYAML is a pure function.
package shoptest

import (
	"fmt"
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
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
