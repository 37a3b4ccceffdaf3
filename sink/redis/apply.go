package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// tableInfo is what the target keeps of a table version: its logical
// names, its key columns and its columns' names as JSON object keys.
type tableInfo struct {
	database, table string // the logical table's
	keyIdx          []int
	binKey          []bool // a key column's bytes are its text
	names           []string
	fields          []any    // names, as hash fields
	jsonKeys        [][]byte // `"name":`
	// saved is set once names are in the target (columnsKey), for
	// verify to read after a restart.
	saved atomic.Bool
}

// maxTables bounds the cache of table versions: it is emptied when it
// holds that many (a stream of many DDLs), as flat.Writer's is.
const maxTables = 4096

// info returns rc's table version's tableInfo.
func (t *Target) info(tv *change.Table) *tableInfo {
	if v, ok := t.tables.Load(tv); ok {
		return v.(*tableInfo)
	}
	db, name := tv.Logical()
	in := &tableInfo{database: db, table: name, keyIdx: sink.KeyColumns(tv)}
	for _, i := range in.keyIdx {
		in.binKey = append(in.binKey, tv.Columns[i].Binary)
	}
	for _, c := range tv.Columns {
		in.names = append(in.names, c.Name)
		in.fields = append(in.fields, c.Name)
		in.jsonKeys = append(in.jsonKeys, append(change.AppendJSONString(nil, c.Name), ':'))
	}
	if t.nTables.Add(1) > maxTables {
		t.tables.Clear()
		t.nTables.Store(1)
	}
	t.tables.Store(tv, in)
	t.logical.Store(db+"."+name, in)
	return in
}

// maxTx bounds the changes of one transaction (MULTI/EXEC), which Redis
// runs alone: the cap of what a worker takes at once (sink.Keyed).
const maxTx = 2048

// Apply implements sink.Target: the changes go in transactions of at
// most maxTx changes, one after another, each guarded by a WATCH of the
// worker's checkpoint (apply).
func (t *Target) Apply(ctx context.Context, worker int, changes []sink.Change) error {
	for len(changes) > 0 {
		n := min(len(changes), maxTx)
		if err := t.apply(ctx, worker, changes[:n]); err != nil {
			return err
		}
		changes = changes[n:]
	}
	return nil
}

// apply applies changes in one transaction, on a connection of its own,
// in two round trips:
//
//  1. WATCH the worker's checkpoint key, GET it, and MGET the version
//     keys of the keys the changes touch (and SET the columns of table
//     versions not saved yet);
//  2. if the checkpoint is before the first change (else sink.ErrBehind),
//     plan the writes from the versions (txn.plan), and send them with
//     the checkpoint's SET in MULTI/EXEC. EXEC fails (nil) if anything
//     wrote the checkpoint since the WATCH: another runner, ErrBehind.
func (t *Target) apply(ctx context.Context, worker int, changes []sink.Change) error {
	ck := checkpointKey(t.prefix, t.id, worker)
	first := sink.Point{Seq: changes[0].Seq, Idx: changes[0].Row.Index}
	last := sink.Point{Seq: changes[len(changes)-1].Seq, Idx: changes[len(changes)-1].Row.Index}
	b := newTxn(t, len(changes))
	defer b.free()
	for i := range changes {
		b.add(&changes[i])
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("sink %s: worker %d: apply seq %d row %d on: %s: %w", t.spec.Name, worker, first.Seq, first.Idx, what, err)
	}
	conn := t.c.Conn()
	defer conn.Close()

	// Round trip 1. The UNWATCH drops what a connection may still watch
	// from a transaction that never ran EXEC.
	pipe := conn.Pipeline()
	pipe.Do(ctx, "unwatch")
	pipe.Do(ctx, "watch", ck)
	saves := make([]*goredis.StatusCmd, len(b.save))
	for i, in := range b.save {
		names, _ := json.Marshal(in.names)
		saves[i] = pipe.Set(ctx, t.columnsKey(in.database+"."+in.table), names, 0)
	}
	at := pipe.Get(ctx, ck)
	var reads []*goredis.SliceCmd
	for i := 0; i < len(b.slots); i += t.batch {
		keys := make([]any, 0, min(t.batch, len(b.slots)-i)+1)
		keys = append(keys, "mget")
		for _, sl := range b.slots[i:min(i+t.batch, len(b.slots))] {
			keys = append(keys, sl.vkey)
		}
		cmd := goredis.NewSliceCmd(ctx, keys...)
		pipe.Process(ctx, cmd)
		reads = append(reads, cmd)
	}
	pipe.Exec(ctx) // each command's error is looked at below
	if err := at.Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return fail("read the checkpoint", err)
	}
	for i, cmd := range saves {
		if cmd.Err() == nil {
			b.save[i].saved.Store(true)
		}
	}
	if s, err := at.Result(); err == nil {
		p, ok := parsePoint(s)
		if !ok {
			return fmt.Errorf("sink %s: checkpoint key %s holds %q, not seq:idx", t.spec.Name, ck, s)
		}
		if !p.Before(first) {
			return fmt.Errorf("sink %s: worker %d: %w (the worker checkpoint is at %s, past %s)",
				t.spec.Name, worker, sink.ErrBehind, s, appendPoint(nil, first))
		}
	}
	got := make([]any, 0, len(b.slots))
	for _, cmd := range reads {
		if err := cmd.Err(); err != nil {
			return fail("read the versions", err)
		}
		got = append(got, cmd.Val()...)
	}
	if err := b.read(got); err != nil {
		return fail("read the versions", err)
	}
	n := b.plan()
	if t.beforeExec != nil {
		t.beforeExec()
	}

	// Round trip 2.
	probes, err := t.write(ctx, conn, b, ck, last)
	if errors.Is(err, goredis.TxFailedErr) {
		return fmt.Errorf("sink %s: worker %d: %w (the worker checkpoint changed while applying seq %d row %d on: another runner)",
			t.spec.Name, worker, sink.ErrBehind, first.Seq, first.Idx)
	}
	if err != nil {
		return fail("write", err)
	}
	for _, p := range probes {
		if p.Val() == 0 {
			n.missing++
		}
	}
	t.applied.Add(n.applied)
	t.upserts.Add(n.upserts)
	t.missing.Add(n.missing)
	return nil
}

// write sends what b planned, and the checkpoint's SET, in MULTI/EXEC.
// Each key is written once, in its last state: a DEL of the keys to
// delete (the probes one by one, for their replies) and, format hash, of
// the hashes to write again, so that a dropped column's field goes; the
// hashes' HSETs; MSETs of the json values and the live versions (a SET
// drops the TTL a tombstone had); a SET ... PX of each tombstone. A DEL
// or an MSET carries the keys of at most the spec's batch changes.
func (t *Target) write(ctx context.Context, conn *goredis.Conn, b *txn, ck string, last sink.Point) (probes []*goredis.IntCmd, err error) {
	pipe := conn.TxPipeline()
	var del, mset []any
	// flush sends a DEL or an MSET once it has the args of batch keys
	// (per arguments each), or whatever it has (all).
	flush := func(args *[]any, per int, all bool) {
		if len(*args) > 1 && (all || len(*args) >= 1+per*t.batch) {
			pipe.Do(ctx, *args...)
			*args = nil
		}
	}
	for i := range b.slots {
		sl := &b.slots[i]
		switch {
		case sl.state == 0:
		case sl.probe:
			cmd := goredis.NewIntCmd(ctx, "del", sl.key)
			pipe.Process(ctx, cmd)
			probes = append(probes, cmd)
		case sl.state == 'd' || t.hash:
			if del == nil {
				del = append(make([]any, 0, 1+t.batch), "del")
			}
			del = append(del, sl.key)
			flush(&del, 1, false)
		}
	}
	flush(&del, 1, true)
	for i := range b.slots {
		sl := &b.slots[i]
		if sl.state != 'w' {
			continue
		}
		o := &b.ops[sl.last]
		if mset == nil {
			mset = append(make([]any, 0, 1+4*t.batch), "mset")
		}
		if t.hash {
			if o.f1 > o.f0 {
				pipe.Do(ctx, append([]any{"hset", sl.key}, b.fields[o.f0:o.f1]...)...)
			}
			mset = append(mset, sl.vkey, b.arg(o.tomb+1, o.end))
			flush(&mset, 2, false)
			continue
		}
		mset = append(mset, sl.key, o.val, sl.vkey, b.arg(o.tomb+1, o.end))
		flush(&mset, 4, false)
	}
	flush(&mset, 4, true)
	for i := range b.slots {
		sl := &b.slots[i]
		if sl.state == 'd' {
			o := &b.ops[sl.last]
			pipe.Do(ctx, "set", sl.vkey, b.arg(o.tomb, o.end), "px", t.ttl)
		}
	}
	pipe.Set(ctx, ck, appendPoint(nil, last), 0)
	_, err = pipe.Exec(ctx)
	return probes, err
}
