package sinktest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// WaitFor is retry.Until for a condition that says what is missing: it
// calls cond until it returns true, and fails the test with the last
// failure cond described if that takes longer than d. New tests call
// retry.Until with a func() error.
func WaitFor(t testing.TB, d time.Duration, cond func() (ok bool, failure string)) {
	t.Helper()
	retry.Until(t, d, func() error {
		if ok, failure := cond(); !ok {
			return errors.New(failure)
		}
		return nil
	})
}

// StartCollision starts a server whose two shard tables shop_0.orders and
// shop_1.orders (id INT PRIMARY KEY, note VARCHAR(20)) both hold key 1:
// shop_0 the row (1, 'zero'), shop_1 the rows (1, 'one') and (2, 'two').
// Merged into one table without an origin column the second key 1 is a
// collision.
func StartCollision(t testing.TB) *mysqltest.Server {
	t.Helper()
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))", "CREATE TABLE shop_1.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES (1, 'zero')", "INSERT INTO shop_1.orders VALUES (1, 'one'), (2, 'two')")
	return srv
}

// CheckCollided checks a target after a sink without an origin column
// stopped at StartCollision's second key 1: of its rows, ones are
// shop_1's of key 1 (note 'one'). There must be none of those, and at
// most 2 rows: shop_0's, and shop_1's of key 2, are there unless they
// were in the transaction the collision rolled back.
func CheckCollided(t testing.TB, rows, ones int) {
	t.Helper()
	if rows > 2 || ones != 0 {
		t.Fatalf("after the collision the target has %d rows, %d of them shop_1's of key 1; want none of those, and at most 2 rows", rows, ones)
	}
}

// WaitTruncated checks a target of a sink with an origin column over
// StartCollision's server srv: it comes to hold all 3 rows (count says
// how many it holds), and after shop_1's TRUNCATE, which deletes that
// shard's rows only, 1. lastErr is the sink's last error, for a failure.
func WaitTruncated(t testing.TB, srv *mysqltest.Server, count func() int, lastErr func() string) {
	t.Helper()
	wait := func(want int) {
		t.Helper()
		WaitFor(t, 20*time.Second, func() (bool, string) {
			n := count()
			return n == want, fmt.Sprintf("target has %d rows, want %d (last error %q)", n, want, lastErr())
		})
	}
	wait(3)
	srv.Exec(t, "TRUNCATE TABLE shop_1.orders")
	wait(1)
}

// StartUniqueCollision starts a server whose two shard tables
// shop_0.orders and shop_1.orders (id INT PRIMARY KEY, code VARCHAR(20)
// NOT NULL UNIQUE, note VARCHAR(20)) share unique codes: shop_0 holds
// (1, 'c1', 'zero') and (2, 'c2', 'zero'), shop_1 (3, 'c1', 'one'),
// (4, 'c2', 'one') and (1, 'c9', 'one'). Merged into one table, shop_1's
// first row collides with shop_0's by its code, not its id.
func StartUniqueCollision(t testing.TB) *mysqltest.Server {
	t.Helper()
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, note VARCHAR(20))",
		"CREATE TABLE shop_1.orders (id INT PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES (1, 'c1', 'zero'), (2, 'c2', 'zero')",
		"INSERT INTO shop_1.orders VALUES (3, 'c1', 'one'), (4, 'c2', 'one'), (1, 'c9', 'one')")
	return srv
}

// UniqueCollisionRows are StartUniqueCollision's rows as a target with an
// origin column holds them, read as "origin id code note" and sorted;
// source is the spec's name of the server.
func UniqueCollisionRows(source string) []string {
	return []string{
		source + "/shop_0.orders 1 c1 zero", source + "/shop_0.orders 2 c2 zero",
		source + "/shop_1.orders 1 c9 one", source + "/shop_1.orders 3 c1 one", source + "/shop_1.orders 4 c2 one",
	}
}
