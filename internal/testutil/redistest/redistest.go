// Package redistest is the Redis side of the redis sink's tests
// (sink/redis, cmd/braid's crash and cluster tests): a key prefix of the
// test's own on the machine's Redis, removed after, and the rows a sink
// keeps there, read as a cache reader reads them.
//
//	c, prefix := redistest.Prefix(t)    // keys "braidtest:PID:N:…", deleted after
//	rows := redistest.Rows(t, c, prefix, "json", []string{"id", "amount"})
//
// It knows the sink only by what it writes (a value per key, as JSON or a
// hash, its version beside it under KEY:seq, and its own keys under
// braid:sink:), so it is a second reading of that format.
package redistest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// Addr is the machine's Redis.
const Addr = "127.0.0.1:6379"

// Prefix returns a client of the machine's Redis and a key prefix of the
// test's own, whose keys are deleted when the test ends. Without a Redis
// the test skips, or fails under CI=true; under go test -short (make
// test-short) it skips.
func Prefix(t testing.TB) (*goredis.Client, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("redistest: -short: this test uses Redis on " + Addr)
	}
	c := goredis.NewClient(&goredis.Options{Addr: Addr})
	if err := c.Ping(context.Background()).Err(); err != nil {
		c.Close()
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis on %s to apply to: %v", Addr, err)
		}
		t.Skipf("no Redis on %s to apply to: %v", Addr, err)
	}
	p := fmt.Sprintf("braidtest:%d:%d:", os.Getpid(), rand.IntN(1e9))
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			n := min(len(keys), 1000)
			c.Del(ctx, keys[:n]...)
			keys = keys[n:]
		}
		c.Close()
	})
	return c, p
}

// Rows returns the rows a sink of format (json or hash) keeps under
// prefix (its version and own keys left out), each the columns cols
// joined by spaces (a NULL, or a column the value lacks, as NULL),
// sorted, as package sinktest has a source's rows.
func Rows(t testing.TB, c *goredis.Client, prefix, format string, cols []string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if strings.HasSuffix(k, ":seq") || strings.HasPrefix(k, prefix+"braid:sink:") {
			continue
		}
		row, err := Row(ctx, c, k, format)
		if err != nil {
			t.Fatal(err)
		}
		if row == nil {
			continue // deleted since the SCAN
		}
		parts := make([]string, len(cols))
		for i, col := range cols {
			parts[i] = "NULL"
			if v := row[col]; v != nil {
				parts[i] = *v
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// Row reads key's row as a sink of format wrote it (nil: no value).
func Row(ctx context.Context, c *goredis.Client, key, format string) (map[string]*string, error) {
	if format == "hash" {
		h, err := c.HGetAll(ctx, key).Result()
		if err != nil || len(h) == 0 {
			return nil, err
		}
		row := map[string]*string{}
		for k, v := range h {
			row[k] = &v
		}
		return row, nil
	}
	s, err := c.Get(ctx, key).Result()
	if err == goredis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var row map[string]*string
	if err := json.Unmarshal([]byte(s), &row); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", key, err, s)
	}
	return row, nil
}
