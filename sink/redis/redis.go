package redis

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Target is a Redis target: a cache of the logical tables' rows.
type Target struct {
	spec spec.Sink
	// id names the sink's own keys (checkpoints, columns): "dest.sink",
	// so that two destinations' sinks of one name never share them.
	id     string
	c      *goredis.Client
	key    keyTemplate
	prefix string // the key template's text before its first "{"
	hash   bool   // format: hash
	ttl    string // the tombstone TTL in milliseconds
	batch  int    // changes per statement (MGET, MSET, DEL)

	tables  sync.Map // *change.Table → *tableInfo
	nTables atomic.Int64
	logical sync.Map // logical "schema.table" → *tableInfo, the latest applied
	advance *goredis.Script
	// beforeExec, when set (a test), runs between a transaction's read
	// and its EXEC.
	beforeExec func()

	applied, upserts, missing atomic.Uint64
}

var _ sink.Target = (*Target)(nil)

// maxCall bounds the changes of one statement (MGET, MSET, DEL),
// whatever the spec's batch.
const maxCall = 1000

// maxWorkers bounds the checkpoint keys Checkpoints looks at: spec's
// bound on workers.
const maxWorkers = 256

// Open connects to sink s of destination dest to its Redis (spec
// address, user, password).
func Open(ctx context.Context, s spec.Sink, dest string) (*Target, error) {
	pw, err := s.ResolvePassword()
	if err != nil {
		return nil, err
	}
	s.Key = cmp.Or(s.Key, spec.DefaultRedisKey)
	s.Format = cmp.Or(s.Format, "json")
	if s.TombstoneTTL <= 0 {
		s.TombstoneTTL = spec.Duration(spec.DefaultTombstoneTTL)
	}
	if s.Batch <= 0 {
		s.Batch = spec.DefaultSinkBatch
	}
	if !strings.Contains(s.Key, "{pk}") {
		return nil, fmt.Errorf("sink %s: key template %q has no {pk}", s.Name, s.Key)
	}
	if s.Format != "json" && s.Format != "hash" {
		return nil, fmt.Errorf("sink %s: format %q: want json or hash", s.Name, s.Format)
	}
	c := goredis.NewClient(&goredis.Options{
		Addr: s.Address, Username: s.User, Password: pw,
		ClientName: "braid-sink-" + s.Name,
		// The runner retries from the checkpoints. A transaction must
		// not be sent again on another connection, which does not
		// WATCH the checkpoint.
		MaxRetries:            -1,
		DialTimeout:           10 * time.Second,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		ContextTimeoutEnabled: true,
		PoolSize:              max(s.Workers+2, 10),
		DisableIdentity:       true,
	})
	t := &Target{spec: s, id: dest + "." + s.Name, c: c, key: compileKey(s.Key), prefix: prefix(s.Key), hash: s.Format == "hash",
		ttl: fmt.Sprint(max(time.Duration(s.TombstoneTTL).Milliseconds(), 1)), batch: min(s.Batch, maxCall),
		advance: goredis.NewScript(advanceScript)}
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("sink %s (%s): %w: check the address and the password", s.Name, s.Address, err)
	}
	return t, nil
}

// Client is the target's Redis client, for a test or a tool that reads
// what the sink wrote (Backfill takes it).
func (t *Target) Client() *goredis.Client { return t.c }

// Close implements sink.Target.
func (t *Target) Close() error { return t.c.Close() }

// Stats implements sink.Target.
func (t *Target) Stats() sink.Stats {
	return sink.Stats{Applied: t.applied.Load(), Upserts: t.upserts.Load(), Missing: t.missing.Load()}
}

// Checkpoints implements sink.Target: worker w's is the key
// {prefix}braid:sink:{dest}.{name}:{w}.
func (t *Target) Checkpoints(ctx context.Context, n int) ([]sink.Point, error) {
	keys := make([]string, max(n, maxWorkers))
	for w := range keys {
		keys[w] = checkpointKey(t.prefix, t.id, w)
	}
	workersKey := t.prefix + "braid:sink:" + t.id + ":workers"
	vals, err := t.c.MGet(ctx, append(keys, workersKey)...).Result()
	if err != nil {
		return nil, fmt.Errorf("sink %s: read checkpoints: %w", t.spec.Name, err)
	}
	where := "the sink's keys " + t.prefix + "braid:sink:" + t.id + ":*"
	switch had, _ := vals[len(keys)].(string); {
	case had == "": // a new sink's, or one braid wrote before it kept the count
		if err := t.c.SetNX(ctx, workersKey, n, 0).Err(); err != nil {
			return nil, fmt.Errorf("sink %s: record its workers: %w", t.spec.Name, err)
		}
	case had != strconv.Itoa(n):
		k, _ := strconv.Atoi(had)
		return nil, sink.WorkersChanged(t.spec.Name, k, n, where)
	}
	out := make([]sink.Point, n)
	for w, v := range vals[:len(keys)] {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if w >= n {
			return nil, sink.WorkersChanged(t.spec.Name, w+1, n, where)
		}
		p, ok := parsePoint(s)
		if !ok {
			return nil, fmt.Errorf("sink %s: checkpoint key %s holds %q, not seq:idx", t.spec.Name, keys[w], s)
		}
		out[w] = p
	}
	return out, nil
}

// ApplyDDL implements sink.Target. A cache has no schema to change: a
// DDL only moves every worker's checkpoint to it (values written after
// an ALTER carry the new columns; those written before keep the old
// ones until their row changes). A shard table's TRUNCATE cannot be
// applied, since a key does not say which shard table wrote it: it stops
// the sink, unless ddl: ignore.
func (t *Target) ApplyDDL(ctx context.Context, ev *change.Event, workers int) error {
	if shard, ok := schema.TruncatedTable(ev.DDL.Schema, ev.DDL.SQL, schema.SQLMode(ev.DDL.SQLMode)); ok && t.spec.DDL != "ignore" {
		ls, lt := ev.DDL.Logical()
		return fmt.Errorf("sink %s: seq %d: TRUNCATE of shard table %s/%s: a redis cache cannot tell that shard table's keys from the others of %s.%s: delete the keys matching %s so that readers re-populate them from the sources, then set ddl: ignore to go past it",
			t.spec.Name, ev.Seq, ev.Source, shard, ls, lt, strings.Join(t.key.patterns(ls, lt), " and "))
	}
	keys := make([]string, workers)
	for w := range keys {
		keys[w] = checkpointKey(t.prefix, t.id, w)
	}
	p := string(appendPoint(nil, sink.Point{Seq: ev.Seq, Idx: sink.MaxIdx}))
	if err := t.advance.Run(ctx, t.c, keys, p).Err(); err != nil {
		return fmt.Errorf("sink %s: DDL at seq %d: set the checkpoints: %w", t.spec.Name, ev.Seq, err)
	}
	return nil
}
