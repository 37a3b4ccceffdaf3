package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	goredis "github.com/redis/go-redis/v9"

	"github.com/braid-cdc/braid/internal/testutil/redistest"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// applyTarget opens a target of format on the machine's Redis, its keys
// (template {table}:{pk}) under a prefix of the test's own, deleted
// after; statements of two changes, so that a transaction has several.
// Without a Redis the test skips, or fails under CI=true.
func applyTarget(t *testing.T, format string) (*Target, *goredis.Client, string) {
	t.Helper()
	c, p := redistest.Prefix(t)
	tg, err := Open(t.Context(), spec.Sink{Name: "t", Type: "redis", Address: redistest.Addr, Key: p + "{table}:{pk}", Format: format,
		Workers: 1, Batch: 2, TombstoneTTL: spec.Duration(time.Minute)}, "d")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	return tg, c, p
}

// ordersCodec reads rows of shop_0.orders (id BIGINT PRIMARY KEY, note
// VARCHAR(20)), logical shop.orders.
var ordersCodec = change.NewCodec(&change.Table{Schema: "shop_0", Name: "orders", LogicalSchema: "shop", LogicalName: "orders",
	Columns: []change.Column{
		{Name: "id", Type: "bigint", RawType: "bigint(20)", Key: true},
		{Name: "note", Type: "varchar", RawType: "varchar(20)", Nullable: true},
	}}, &replication.TableMapEvent{ColumnType: []byte{mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR}, ColumnMeta: []uint16{0, 80}}, nil)

// row is a change written "i 10:0 1 A" (INSERT, seq 10, index 0, id 1,
// note A), "u 10:1 1 B" (UPDATE), "m 10:2 0>1 C" (UPDATE of id 0 to 1),
// "d 10:3 1" (DELETE); a note "-" is NULL.
func row(t *testing.T, s string) sink.Change {
	t.Helper()
	f := strings.Fields(s)
	seq, idx, _ := strings.Cut(f[1], ":")
	var q uint64
	var i int
	if _, err := fmt.Sscan(seq, &q); err != nil {
		t.Fatal(err)
	}
	fmt.Sscan(idx, &i)
	img := func(id string, note string) []any {
		var n int64
		fmt.Sscan(id, &n)
		if note == "-" {
			return []any{n, nil}
		}
		return []any{n, note}
	}
	im := &change.Images{}
	var kind change.ChangeKind
	switch f[0] {
	case "i":
		kind, im.Decoded = change.Insert, [][]any{img(f[2], f[3])}
	case "u":
		kind, im.Decoded = change.Update, [][]any{img(f[2], "old"), img(f[2], f[3])}
	case "m":
		from, to, _ := strings.Cut(f[2], ">")
		kind, im.Decoded = change.Update, [][]any{img(from, "old"), img(to, f[3])}
	case "d":
		kind, im.Decoded = change.Delete, [][]any{img(f[2], "old")}
	}
	rc := change.NewRowChange(ordersCodec, kind, i, im, 0)
	return sink.Change{Seq: q, Logical: "shop.orders", Row: &rc, Before: rc.Before(), After: rc.After()}
}

// TestApplyVersions applies changes by hand, one transaction a step,
// each on a worker (a checkpoint) of its own, so that only the versions
// decide: a change applies only over an older version, seqs compare
// exactly whatever their length (and near 2^64), a delete leaves a
// tombstone that expires and a later write makes the version live again
// (no TTL), a key changed several times in one transaction ends as its
// last change left it, a replay finds itself applied, a moved row leaves
// a tombstone at its old key, a hash loses the fields of NULL columns,
// and a DELETE counts missing a value that was not there.
func TestApplyVersions(t *testing.T) {
	for _, format := range []string{"json", "hash"} {
		t.Run(format, func(t *testing.T) {
			tg, c, p := applyTarget(t, format)
			ctx := t.Context()
			worker := 0
			apply := func(rows ...string) error {
				worker++
				var cs []sink.Change
				for _, r := range rows {
					cs = append(cs, row(t, r))
				}
				return tg.Apply(ctx, worker, cs)
			}
			// expect checks id's note ("": no value) and version.
			expect := func(what string, err error, id, note, version string) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				k := p + "orders:" + id
				got := ""
				if row, err := readNote(ctx, c, k, format); err != nil {
					t.Fatalf("%s: %v", what, err)
				} else if row != nil {
					got = *row
				}
				if got != note {
					t.Fatalf("%s: note %q, want %q", what, got, note)
				}
				if v := c.Get(ctx, k+":seq").Val(); v != version {
					t.Fatalf("%s: version %q, want %q", what, v, version)
				}
			}
			step := func(what string, n uint64, id, note, version string, rows ...string) {
				t.Helper()
				before := tg.Stats().Applied
				err := apply(rows...)
				expect(what, err, id, note, version)
				if got := tg.Stats().Applied - before; got != n {
					t.Fatalf("%s: %d applied, want %d", what, got, n)
				}
			}
			step("insert", 1, "1", "A", "10:0", "i 10:0 1 A")
			step("an older seq, shorter", 0, "1", "A", "10:0", "i 9:5 1 B")
			step("the same version again, then the next row", 1, "1", "C", "10:1", "u 10:0 1 B", "u 10:1 1 C")
			step("delete", 1, "1", "", "d10:2", "d 10:2 1")
			if ttl := c.PTTL(ctx, p+"orders:1:seq").Val(); ttl <= 0 || ttl > time.Minute {
				t.Fatalf("tombstone TTL %v", ttl)
			}
			step("a replay of the UPDATE before the delete", 0, "1", "", "d10:2", "u 10:1 1 C")
			step("insert over the tombstone, and its update in the same transaction", 2, "1", "E", "11:1", "i 11:0 1 D", "u 11:1 1 E")
			if ttl := c.TTL(ctx, p+"orders:1:seq").Val(); ttl != -1 {
				t.Fatalf("a live version has TTL %v", ttl)
			}
			step("delete, insert, update, delete and insert again in one transaction", 5, "1", "I", "12:4",
				"d 12:0 1", "i 12:1 1 F", "u 12:2 1 G", "d 12:3 1", "i 12:4 1 I")
			step("a seq near 2^64", 1, "1", "F", "18446744073709551614:9", "u 18446744073709551614:9 1 F")
			step("the next seq, which a double rounds to the same", 1, "1", "G", "18446744073709551615:0", "u 18446744073709551615:0 1 G")
			step("the seq before, a later row", 0, "1", "G", "18446744073709551615:0", "u 18446744073709551614:10 1 H")

			// A key-changing UPDATE: 0 → 1 (a newer version), and 2 → 3
			// where 3 has a newer version already: 2 is deleted all the
			// same.
			c.Set(ctx, p+"orders:0", "Z", 0)
			step("a moved row", 1, "1", "I", "18446744073709551615:1", "m 18446744073709551615:1 0>1 I")
			if v := c.Get(ctx, p+"orders:0:seq").Val(); c.Exists(ctx, p+"orders:0").Val() != 0 || v != "d18446744073709551615:1" {
				t.Fatalf("the old key of a moved row: version %q", v)
			}
			step("a row", 1, "3", "K", "30:0", "i 30:0 3 K")
			step("a row moved onto a newer one", 1, "3", "K", "30:0", "m 20:0 2>3 J")
			if v := c.Get(ctx, p+"orders:2:seq").Val(); v != "d20:0" {
				t.Fatalf("the old key of a row moved onto a newer one: version %q", v)
			}

			// NULL: a hash has no field, json null.
			step("a NULL note", 1, "4", "", "1:1", "i 1:1 4 -")
			if format == "hash" {
				if h := c.HGetAll(ctx, p+"orders:4").Val(); len(h) != 1 || h["id"] != "4" {
					t.Fatalf("hash of a row whose note is NULL: %v", h)
				}
			} else if v := c.Get(ctx, p+"orders:4").Val(); v != `{"id":"4","note":null}` {
				t.Fatalf("json of a row whose note is NULL: %s", v)
			}

			// Counts: the DELETE of a value evicted (its version live),
			// and the second of two DELETEs in one transaction, miss it;
			// an INSERT over a live version is an upsert; an UPDATE of a
			// key without a live version misses it.
			st := tg.Stats()
			c.Del(ctx, p+"orders:4")
			if err := apply("d 2:0 4", "i 2:1 5 x", "d 2:2 5", "d 2:3 5", "i 2:4 6 y", "i 2:5 6 z", "u 2:6 7 w"); err != nil {
				t.Fatal(err)
			}
			got := tg.Stats()
			if got.Missing-st.Missing != 3 || got.Upserts-st.Upserts != 1 || got.Applied-st.Applied != 7 {
				t.Fatalf("counts: %+v then %+v: want 7 applied, 3 missing, 1 upsert", st, got)
			}
		})
	}
}

// readNote reads key's note as a sink of format wrote it (nil: no value
// or no note).
func readNote(ctx context.Context, c *goredis.Client, key, format string) (*string, error) {
	if format == "hash" {
		h, err := c.HGetAll(ctx, key).Result()
		if err != nil || len(h) == 0 {
			return nil, err
		}
		if n, ok := h["note"]; ok {
			return &n, nil
		}
		return nil, nil
	}
	s, err := c.Get(ctx, key).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	var row map[string]*string
	if err == nil {
		err = json.Unmarshal([]byte(s), &row)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return row["note"], nil
}

// TestApplyCheckpoint: a transaction applies only if its worker's
// checkpoint is before its first change (sink.ErrBehind at or past it),
// and moves it to its last; one whose checkpoint another runner writes
// between its read and its EXEC writes nothing (ErrBehind); a change
// skipped by its version still moves the checkpoint.
func TestApplyCheckpoint(t *testing.T) {
	tg, c, p := applyTarget(t, "json")
	ctx := t.Context()
	ck := checkpointKey(p, "d.t", 1)
	c.Set(ctx, ck, "7:0", 0)
	if err := tg.Apply(ctx, 1, []sink.Change{row(t, "i 7:0 1 A"), row(t, "i 7:1 1 A")}); !errors.Is(err, sink.ErrBehind) {
		t.Fatalf("a transaction at the checkpoint: %v", err)
	}
	if n := c.Exists(ctx, p+"orders:1").Val(); n != 0 {
		t.Fatalf("a transaction refused wrote its row")
	}
	if err := tg.Apply(ctx, 1, []sink.Change{row(t, "i 7:1 1 A"), row(t, "i 8:0 2 B")}); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, ck).Val(); v != "8:0" {
		t.Fatalf("checkpoint %q, want 8:0", v)
	}

	// Another runner moves the checkpoint between the read and the EXEC.
	tg.beforeExec = func() { c.Set(ctx, ck, "9:5", 0) }
	err := tg.Apply(ctx, 1, []sink.Change{row(t, "u 9:0 1 X"), row(t, "i 9:1 3 X")})
	tg.beforeExec = nil
	if !errors.Is(err, sink.ErrBehind) {
		t.Fatalf("a transaction whose checkpoint moved: %v", err)
	}
	if v := c.Get(ctx, p+"orders:1:seq").Val(); v != "7:1" || c.Exists(ctx, p+"orders:3").Val() != 0 {
		t.Fatalf("a transaction whose checkpoint moved wrote (version of 1: %q)", v)
	}
	// A transaction refused before its EXEC leaves its connection
	// watching its checkpoint; the next transaction there (another
	// worker's) unwatches it first, and a write of that checkpoint
	// does not abort it.
	if err := tg.Apply(ctx, 1, []sink.Change{row(t, "u 9:0 1 X")}); !errors.Is(err, sink.ErrBehind) {
		t.Fatalf("a transaction behind the checkpoint: %v", err)
	}
	tg.beforeExec = func() { c.Set(ctx, ck, "9:6", 0) }
	err = tg.Apply(ctx, 2, []sink.Change{row(t, "u 5:0 9 x")})
	tg.beforeExec = nil
	if err != nil {
		t.Fatalf("a transaction after one refused before its EXEC: %v", err)
	}

	// Older than the key's version: nothing written, the checkpoint moved.
	if err := tg.Apply(ctx, 1, []sink.Change{row(t, "u 10:0 1 Y")}); err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, p+"orders:1:seq", "50:0", 0)
	if err := tg.Apply(ctx, 1, []sink.Change{row(t, "u 11:0 1 Z")}); err != nil {
		t.Fatal(err)
	}
	if v, ck := c.Get(ctx, p+"orders:1").Val(), c.Get(ctx, ck).Val(); !strings.Contains(v, `"Y"`) || ck != "11:0" {
		t.Fatalf("value %s, checkpoint %q: want Y and 11:0", v, ck)
	}

	// A version key that holds something else stops the sink.
	c.Set(ctx, p+"orders:1:seq", "junk", 0)
	if err := tg.Apply(ctx, 1, []sink.Change{row(t, "u 12:0 1 Z")}); err == nil || !strings.Contains(err.Error(), "junk") {
		t.Fatalf("a version key holding junk: %v", err)
	}
}

// TestApplyRandom cross-checks the transactions against a dumb
// reference that applies one change at a time by the version guard:
// random INSERTs, UPDATEs, moves and DELETEs of a few keys, cut into
// random transactions; then the whole stream again on another worker
// (a runner blind to the first's checkpoint), which changes nothing.
// The seed is logged.
func TestApplyRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, format := range []string{"json", "hash"} {
		tg, c, p := applyTarget(t, format)
		ctx := t.Context()
		type state struct {
			note      string // "": no value
			ver       string
			has, dead bool
		}
		ref := map[string]*state{}
		var want sink.Stats
		var stream []string
		seq := uint64(1)
		for range 400 {
			seq += uint64(rng.IntN(2))
			v := fmt.Sprintf("%d:%d", seq, len(stream))
			id := fmt.Sprint(rng.IntN(6))
			note := fmt.Sprintf("n%d", len(stream))
			s := ref[id]
			if s == nil {
				s = &state{}
				ref[id] = s
			}
			switch rng.IntN(4) {
			case 0:
				stream = append(stream, fmt.Sprintf("i %s %s %s", v, id, note))
				if s.has && !s.dead {
					want.Upserts++
				}
				*s = state{note: note, ver: v, has: true}
			case 1:
				stream = append(stream, fmt.Sprintf("u %s %s %s", v, id, note))
				if !s.has || s.dead {
					want.Missing++
				}
				*s = state{note: note, ver: v, has: true}
			case 2:
				stream = append(stream, fmt.Sprintf("d %s %s", v, id))
				if s.note == "" {
					want.Missing++
				}
				*s = state{ver: "d" + v, has: true, dead: true}
			case 3:
				to := fmt.Sprint(6 + rng.IntN(3))
				if ref[to] == nil {
					ref[to] = &state{}
				}
				stream = append(stream, fmt.Sprintf("m %s %s>%s %s", v, id, to, note))
				if s.note == "" {
					want.Missing++
				}
				*s = state{ver: "d" + v, has: true, dead: true}
				*ref[to] = state{note: note, ver: v, has: true}
			}
			want.Applied++
		}
		for w := 1; w <= 2; w++ {
			for rest := stream; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(40))
				var cs []sink.Change
				for _, r := range rest[:n] {
					cs = append(cs, row(t, r))
				}
				if err := tg.Apply(ctx, w, cs); err != nil {
					t.Fatalf("%s: %v", format, err)
				}
				rest = rest[n:]
			}
			if got := tg.Stats(); got != want {
				t.Fatalf("%s, worker %d: stats %+v, the reference's %+v", format, w, got, want)
			}
			for id, s := range ref {
				k := p + "orders:" + id
				note, err := readNote(ctx, c, k, format)
				if err != nil {
					t.Fatal(err)
				}
				if got := c.Get(ctx, k+":seq").Val(); (note == nil) != (s.note == "") || note != nil && *note != s.note || got != s.ver {
					t.Fatalf("%s, worker %d: key %s: note %v, version %q; the reference's %q, %q", format, w, id, note, got, s.note, s.ver)
				}
			}
		}
	}
}
