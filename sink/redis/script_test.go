package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// scriptClient is a client of the machine's Redis and a key prefix of
// the test's own, deleted after (skip without a Redis, fail under CI).
func scriptClient(t *testing.T) (*goredis.Client, string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	if err := c.Ping(t.Context()).Err(); err != nil {
		c.Close()
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis on 127.0.0.1:6379: %v", err)
		}
		t.Skipf("no Redis on 127.0.0.1:6379: %v", err)
	}
	p := fmt.Sprintf("braidtest:%d:%d:", os.Getpid(), rand.IntN(1e9))
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, p+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		c.Close()
	})
	return c, p
}

// TestApplyScript runs applyScript by hand, one call a step, each with
// a checkpoint key of its own (so that only the versions decide): a
// change applies only over an older version, seqs compare exactly
// whatever their length (and near 2^64, where Lua's doubles could not
// tell them apart), a delete leaves a tombstone that expires and a later
// write makes the version live again, a replay finds itself applied, a
// hash loses the fields of columns dropped, and the checkpoint rules of
// the first and of a chained call hold.
func TestApplyScript(t *testing.T) {
	c, p := scriptClient(t)
	ctx := t.Context()
	k := p + "orders:1"
	step := 0
	run := func(format, mode, at, last string, change ...string) ([]any, error) {
		step++
		args := []any{mode, at, last, "60000", format}
		keys := []string{fmt.Sprintf("%sck:%d", p, step)}
		if mode == "c" {
			keys[0] = p + "ck:chain"
		}
		for _, ch := range change {
			f := strings.Split(ch, " ")
			keys = append(keys, k, k+":seq")
			if f[0] == "m" {
				keys = append([]string{keys[0], p + "orders:0", p + "orders:0:seq"}, keys[1:]...)
			}
			for _, a := range f {
				args = append(args, a)
			}
		}
		return c.EvalSha(ctx, scriptSHA(applyScript), keys, args...).Slice()
	}
	if err := c.ScriptLoad(ctx, applyScript).Err(); err != nil {
		t.Fatal(err)
	}
	expect := func(what string, got []any, err error, applied int64, value, version string) {
		t.Helper()
		if err != nil || len(got) != 3 || got[0] != applied {
			t.Fatalf("%s: %v, %v: want %d applied", what, got, err, applied)
		}
		if v := c.Get(ctx, k).Val(); v != value {
			t.Fatalf("%s: value %q, want %q", what, v, value)
		}
		if v := c.Get(ctx, k+":seq").Val(); v != version {
			t.Fatalf("%s: version %q, want %q", what, v, version)
		}
	}
	got, err := run("json", "f", "10:0", "10:0", "i 10:0 A")
	expect("insert", got, err, 1, "A", "10:0")
	got, err = run("json", "f", "9:5", "9:5", "i 9:5 B")
	expect("an older seq, shorter", got, err, 0, "A", "10:0")
	got, err = run("json", "f", "10:0", "10:1", "u 10:0 B", "u 10:1 C")
	expect("the same version again, then the next row", got, err, 1, "C", "10:1")
	got, err = run("json", "f", "10:2", "10:2", "d 10:2")
	expect("delete", got, err, 1, "", "d10:2")
	if ttl := c.PTTL(ctx, k+":seq").Val(); ttl <= 0 || ttl > 60000e6 {
		t.Fatalf("tombstone TTL %v", ttl)
	}
	got, err = run("json", "f", "10:1", "10:1", "u 10:1 C")
	expect("a replay of the UPDATE before the delete", got, err, 0, "", "d10:2")
	got, err = run("json", "f", "11:0", "11:1", "i 11:0 D", "u 11:1 E")
	expect("insert over the tombstone, and its update in the same call", got, err, 2, "E", "11:1")
	if ttl := c.TTL(ctx, k+":seq").Val(); ttl != -1 {
		t.Fatalf("a live version has TTL %v", ttl)
	}
	got, err = run("json", "f", "18446744073709551614:9", "18446744073709551614:9", "u 18446744073709551614:9 F")
	expect("a seq near 2^64", got, err, 1, "F", "18446744073709551614:9")
	got, err = run("json", "f", "18446744073709551615:0", "18446744073709551615:0", "u 18446744073709551615:0 G")
	expect("the next seq, which a double rounds to the same", got, err, 1, "G", "18446744073709551615:0")
	got, err = run("json", "f", "18446744073709551614:10", "18446744073709551614:10", "u 18446744073709551614:10 H")
	expect("the seq before, a later row", got, err, 0, "G", "18446744073709551615:0")

	// A key-changing UPDATE: orders:0 → orders:1 (a newer version).
	c.Set(ctx, p+"orders:0", "Z", 0)
	got, err = run("json", "f", "18446744073709551615:1", "18446744073709551615:1", "m 18446744073709551615:1 I")
	expect("a moved row", got, err, 1, "I", "18446744073709551615:1")
	if v := c.Get(ctx, p+"orders:0:seq").Val(); c.Exists(ctx, p+"orders:0").Val() != 0 || v != "d18446744073709551615:1" {
		t.Fatalf("the old key of a moved row: version %q", v)
	}

	// Hash: an UPDATE without a column drops its field.
	k = p + "hash:1"
	if got, err := run("hash", "f", "1:0", "1:1", "i 1:0 2 id 1 note a", "u 1:1 1 id 1"); err != nil || got[0] != int64(2) {
		t.Fatalf("hash: %v, %v", got, err)
	}
	if h := c.HGetAll(ctx, k).Val(); len(h) != 1 || h["id"] != "1" {
		t.Fatalf("hash after an UPDATE without note: %v", h)
	}

	// Checkpoints: a first call at or behind the checkpoint, and a chained
	// call whose predecessor did not leave it where it says.
	c.Set(ctx, p+"ck:chain", "5:3", 0)
	if _, err := run("json", "c", "5:2", "5:9", "u 5:9 X"); !goredis.HasErrorPrefix(err, "BRAIDCHAIN") {
		t.Fatalf("a chained call after a failed one: %v", err)
	}
	if _, err := run("json", "c", "5:3", "5:9", "u 5:9 X"); err != nil {
		t.Fatalf("a chained call: %v", err)
	}
	if v := c.Get(ctx, p+"ck:chain").Val(); v != "5:9" {
		t.Fatalf("checkpoint %q after a chained call", v)
	}
	step = 100
	c.Set(ctx, fmt.Sprintf("%sck:%d", p, step+1), "7:0", 0)
	if _, err := run("json", "f", "7:0", "7:1", "u 7:1 X"); !goredis.HasErrorPrefix(err, "BRAIDBEHIND") {
		t.Fatalf("a first call at the checkpoint: %v", err)
	}
}
