package sinktest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// Shards is how many shard tables the shop has: shop_0 … shop_5.orders.
const Shards = 6

// ShopColumns are the columns of the shop workload's orders tables: a
// unique code besides the key, so that a change can move a unique value
// from one row to another.
const ShopColumns = "(id BIGINT PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, amount INT NOT NULL, note VARCHAR(40))"

// StartShards starts three servers and creates shop_0 … shop_5.orders,
// with columns, shop_n on the server n%3. It returns the six, shards[n]
// the server of shop_n; shards[:3] are the three servers.
func StartShards(t testing.TB, columns string) []*mysqltest.Server {
	t.Helper()
	srvs := mysqltest.StartN(t, 3)
	shards := make([]*mysqltest.Server, Shards)
	for n := range shards {
		shards[n] = srvs[n%3]
		shards[n].Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", n),
			fmt.Sprintf("CREATE TABLE shop_%d.orders %s", n, columns))
	}
	return shards
}

// StartShop is StartShards with the shop workload's columns.
func StartShop(t testing.TB) []*mysqltest.Server {
	t.Helper()
	return StartShards(t, ShopColumns)
}

// ShopRounds is how many rounds WriteShop writes.
const ShopRounds = 6

// WriteShop writes the shop workload to the shards of StartShop: six
// rounds in which each shard inserts 20 rows, moves a unique code from
// one row to another, increments amounts, changes a key and deletes two
// rows of what it inserted; in round 3 every shard runs the same ALTER
// (ADD COLUMN c, merged into one by the stream), and from then on sets c
// on a row. After each round it calls after(round), which may be nil:
// a test stops and restarts its sink there.
func WriteShop(t testing.TB, shards []*mysqltest.Server, after func(round int)) {
	t.Helper()
	for round := range ShopRounds {
		for n, s := range shards {
			base := int64(n)*1_000_000 + int64(round)*100
			var vals []string
			for k := range 20 {
				vals = append(vals, fmt.Sprintf("(%d, 'c%d', %d, 'r%d')", base+int64(k), base+int64(k), k, round))
			}
			stmts := []string{"INSERT INTO shop_%[1]d.orders (id, code, amount, note) VALUES " + strings.Join(vals, ", "),
				// A unique value moves from one row to another: the two
				// changes keep their order whatever workers their rows are on.
				fmt.Sprintf("UPDATE shop_%%[1]d.orders SET code = 'moved%d' WHERE id = %d", base+5, base+5),
				fmt.Sprintf("UPDATE shop_%%[1]d.orders SET code = 'c%d' WHERE id = %d", base+5, base+6),
				"UPDATE shop_%[1]d.orders SET amount = amount + 1 WHERE id %% 3 = 0",
				fmt.Sprintf("UPDATE shop_%%[1]d.orders SET id = id + 50 WHERE id = %d", base+1),
				fmt.Sprintf("DELETE FROM shop_%%[1]d.orders WHERE id IN (%d, %d)", base+2, base+3)}
			if round == 3 {
				stmts = append(stmts, "ALTER TABLE shop_%[1]d.orders ADD COLUMN c INT NULL")
			}
			if round >= 3 {
				stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET c = amount * 2 WHERE id = %d", base+4))
			}
			for _, q := range stmts {
				s.Exec(t, fmt.Sprintf(q, n))
			}
		}
		if after != nil {
			after(round)
		}
	}
}

// ShopRows returns the rows of every shard once WriteShop has run, each
// "id code amount note c" with NULL as "NULL", sorted: what a target
// that applied the workload must hold.
func ShopRows(t testing.TB, shards []*mysqltest.Server) []string {
	t.Helper()
	return SourceRows(t, shards, func(n int) string {
		return fmt.Sprintf("SELECT id, code, amount, IFNULL(note, 'NULL'), IFNULL(c, 'NULL') FROM shop_%d.orders", n)
	})
}

// SourceRows returns the rows q(n) returns on shards[n], for every n,
// their columns joined by spaces, sorted.
func SourceRows(t testing.TB, shards []*mysqltest.Server, q func(n int) string) []string {
	t.Helper()
	var out []string
	for n, s := range shards {
		for _, r := range s.Query(t, q(n)) {
			out = append(out, strings.Join(r, " "))
		}
	}
	slices.Sort(out)
	return out
}
