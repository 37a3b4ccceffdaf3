package redis_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/redistest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/redis"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// sourceRow reads shop_0.orders' row id from srv as a cache reader does
// after a miss: column → text, nil for NULL.
func sourceRow(t *testing.T, srv *mysqltest.Server, id int) map[string]*string {
	t.Helper()
	rows := srv.Query(t, fmt.Sprintf("SELECT id, note, amount FROM shop_0.orders WHERE id = %d", id))
	if len(rows) != 1 {
		t.Fatalf("row %d: %v", id, rows)
	}
	row := map[string]*string{}
	for i, c := range []string{"id", "note", "amount"} {
		if v := rows[0][i]; v != "NULL" {
			row[c] = &v
		}
	}
	return row
}

// waitValue waits until key's note (per format) is want ("": no value).
func waitValue(t *testing.T, c *goredis.Client, key, format, want string, lastErr func() string) {
	t.Helper()
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		row, err := redistest.Row(context.Background(), c, key, format)
		got := ""
		if err == nil && row != nil && row["note"] != nil {
			got = *row["note"]
		}
		return got == want, fmt.Sprintf("%s: note %q, want %q (err %v, last error %q)", key, got, want, err, lastErr())
	})
}

// TestBackfillRace stages the race seed 003's SETNX loses, for both
// formats: a reader misses a key, reads the row from MySQL, and before
// it writes the row back the sink applies an UPDATE of it; the backfill
// of what it read is refused and the newer value stays. The same with a
// DELETE: its tombstone refuses the backfill, and the row stays deleted.
// A key the sink never wrote is backfilled, and a key whose value was
// evicted (its version live) too; an INSERT the sink applies after a
// backfill overwrites it (not an upsert: the backfill left no version).
// The DELETE of an evicted value is counted missing; the UPDATE of one
// is not (its key's version is live). SCRIPT FLUSH changes nothing: the
// sink applies rows without scripts. Then a shard table's
// TRUNCATE stops the sink with an error saying what to do, and a sink
// with ddl: ignore goes past it.
func TestBackfillRace(t *testing.T) {
	c, prefix := redistest.Prefix(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20), amount DECIMAL(10,2))",
		"INSERT INTO shop_0.orders VALUES (1, 'one', 1.50), (2, 'two', NULL), (3, 'three', 3.00)")
	formats := []string{"json", "hash"}
	var sks []spec.Sink
	for _, f := range formats {
		sks = append(sks, spec.Sink{Name: "bf-" + f, Type: "redis", Address: redisAddr, Key: prefix + f + ":{table}:{pk}", Format: f, Workers: 2})
	}
	ds := conformance.ShopSpec(t, []*mysqltest.Server{srv}, sks...)
	log := testLogger(t, slog.LevelError)
	ctx := t.Context()
	clients := map[string]*group.Cursor{}
	for _, sk := range ds.Sinks {
		clients[sink.ClientID(sk.Name)] = nil
	}
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: clients, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	targets := make([]sink.Sink, len(formats))
	runners := make([]*runner, len(formats))
	for i, sk := range ds.Sinks {
		targets[i] = open(t, sk)
		defer targets[i].Close()
		runners[i] = startRunner(ctx, p, targets[i], ds, sk, nil, log)
		defer func() { runners[i].stop() }()
	}
	key := func(i, id int) string {
		return redis.KeyFor(ds.Sinks[i].Key, "shop", "orders", []string{fmt.Sprint(id)})
	}
	lastErr := func(i int) func() string { return func() string { _, e := runners[i].r.Applied(); return e } }
	for i, f := range formats {
		waitValue(t, c, key(i, 3), f, "three", lastErr(i))
	}

	// The readers miss keys 1 and 2 (evicted, say) and read the rows.
	stale := map[int]map[string]*string{1: sourceRow(t, srv, 1), 2: sourceRow(t, srv, 2)}
	for i := range formats {
		c.Del(ctx, key(i, 1), key(i, 2))
	}
	// The sink applies an UPDATE of 1 and a DELETE of 2 meanwhile.
	srv.Exec(t, "UPDATE shop_0.orders SET note = 'newer' WHERE id = 1", "DELETE FROM shop_0.orders WHERE id = 2")
	for i, f := range formats {
		waitValue(t, c, key(i, 1), f, "newer", lastErr(i))
		sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
			v := c.Get(ctx, redis.VersionKey(key(i, 2))).Val()
			return strings.HasPrefix(v, "d"), fmt.Sprintf("%s: version of a deleted row %q", f, v)
		})
		// The backfills of what the readers read come too late.
		for id, row := range stale {
			if ok, err := redis.Backfill(ctx, c, key(i, id), f, row); err != nil || ok {
				t.Errorf("%s: backfill of row %d read before its change: written %v, %v", f, id, ok, err)
			}
		}
		waitValue(t, c, key(i, 1), f, "newer", lastErr(i))
		if n := c.Exists(ctx, key(i, 2)).Val(); n != 0 {
			t.Errorf("%s: the deleted row came back", f)
		}

		// A key the sink never wrote is backfilled, once.
		note, id := "backfilled", "99"
		row := map[string]*string{"id": &id, "note": &note, "amount": nil}
		if ok, err := redis.Backfill(ctx, c, key(i, 99), f, row); err != nil || !ok {
			t.Errorf("%s: backfill of a key never seen: written %v, %v", f, ok, err)
		}
		waitValue(t, c, key(i, 99), f, "backfilled", lastErr(i))
		if ok, err := redis.Backfill(ctx, c, key(i, 99), f, row); err != nil || ok {
			t.Errorf("%s: a second backfill of a key: written %v, %v", f, ok, err)
		}
		// An evicted value (its version live) is backfilled.
		c.Del(ctx, key(i, 3))
		if ok, err := redis.Backfill(ctx, c, key(i, 3), f, sourceRow(t, srv, 3)); err != nil || !ok {
			t.Errorf("%s: backfill of an evicted value: written %v, %v", f, ok, err)
		}
		waitValue(t, c, key(i, 3), f, "three", lastErr(i))
	}

	// An INSERT after a backfill overwrites the backfilled row.
	srv.Exec(t, "INSERT INTO shop_0.orders VALUES (99, 'inserted', NULL)")
	for i, f := range formats {
		waitValue(t, c, key(i, 99), f, "inserted", lastErr(i))
		// The counters move just after the write the value shows.
		st := targets[i].Stats()
		sinktest.WaitFor(t, 10*time.Second, func() (bool, string) {
			st = targets[i].Stats()
			return st.Missing >= 1, fmt.Sprintf("%s: stats %+v: want the DELETE of an evicted value missing", f, st)
		})
		if st.Upserts != 0 || st.Missing != 1 {
			t.Errorf("%s: stats %+v: want the DELETE of an evicted value missing, nothing else", f, st)
		}
	}

	// Redis loses its scripts (a restart, SCRIPT FLUSH): the sink goes
	// on, with no error.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Exec(t, "UPDATE shop_0.orders SET note = 'flushed' WHERE id = 3")
	for i, f := range formats {
		waitValue(t, c, key(i, 3), f, "flushed", lastErr(i))
		if e := lastErr(i)(); e != "" {
			t.Errorf("%s: after SCRIPT FLUSH: last error %q", f, e)
		}
	}

	// TRUNCATE stops the sink; with ddl: ignore it goes on past it.
	srv.Exec(t, "TRUNCATE TABLE shop_0.orders", "INSERT INTO shop_0.orders VALUES (100, 'after', NULL)")
	for i := range formats {
		sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
			e := lastErr(i)()
			return strings.Contains(e, "TRUNCATE of shard table s0/shop_0.orders") && strings.Contains(e, "set ddl: ignore"), fmt.Sprintf("last error %q", e)
		})
		runners[i].stop()
		sk := ds.Sinks[i]
		sk.DDL = "ignore"
		tg := open(t, sk)
		t.Cleanup(func() { tg.Close() })
		runners[i] = startRunner(ctx, p, tg, ds, sk, nil, log)
		waitValue(t, c, key(i, 100), formats[i], "after", lastErr(i))
	}
}
