// Package sinktest is the source side of the sink tests, shared by every
// target's tests (sink/mysql, sink/postgres, and cmd/braid's crash tests):
// shard tables on real MariaDB servers (internal/testutil/mysqltest), the
// shop workload every target is checked against, the literals that break
// naive quoting (Nasty, Mixed), the rows a target must
// end with, and the waiting around them. Two targets that run the same
// workload differ in their results by the target, never by the test.
//
//	shards := sinktest.StartShop(t)      // shop_0 … shop_5.orders on three servers
//	sinktest.WriteShop(t, shards, func(round int) { /* restart the sink */ })
//	want := sinktest.ShopRows(t, shards) // "id code amount note c", sorted
//	retry.Until(t, time.Minute, func() error { // internal/testutil/retry
//		if got := sinktest.Query(db, "SELECT … FROM shop.orders"); !slices.Equal(got, want) {
//			return fmt.Errorf("target has %d rows, want %d", len(got), len(want))
//		}
//		return nil
//	})
//
// It imports mysqltest, retry and the standard library only: it knows no sink,
// spec or stream, and no target's driver (Query takes a *sql.DB the
// caller opened), so the tests build their pipelines themselves.
//
// # Invariants
//
//   - shards[n] is the server that holds shop_n; the first three entries
//     are the three distinct servers, in the order StartN returned them.
//   - Rows, from the sources or a target, are their columns joined by
//     single spaces and sorted: two reads of the same rows compare equal
//     with slices.Equal. The queries of ShopRows write NULL as "NULL", as
//     Query does.
//
// # Concurrency
//
// Everything here follows mysqltest: call it from the goroutine running the
// test. Query is safe for concurrent use, as *sql.DB is.
package sinktest
