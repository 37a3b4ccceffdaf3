package redis

import (
	"bytes"
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/sink"
)

// tableInfo is what the target keeps of a table version: its logical
// names, its key columns and its columns' names as JSON object keys.
type tableInfo struct {
	database, table string // the logical table's
	keyIdx          []int
	binKey          []bool // a key column's bytes are its text
	names           []string
	jsonKeys        [][]byte // `"name":`
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

// Apply implements sink.Target: the changes go as script calls of at
// most batch changes each (applyScript), all in one pipeline; each call
// sets the worker's checkpoint to its last change, and runs only if the
// call before it did.
func (t *Target) Apply(ctx context.Context, worker int, changes []sink.Change) error {
	if len(changes) == 0 {
		return nil
	}
	ck := checkpointKey(t.prefix, t.spec.Name, worker)
	var calls [][]any
	var buf []byte
	var prev sink.Point
	for start := 0; start < len(changes); start += t.batch {
		chunk := changes[start:min(start+t.batch, len(changes))]
		first := sink.Point{Seq: chunk[0].Seq, Idx: chunk[0].Row.Index}
		last := sink.Point{Seq: chunk[len(chunk)-1].Seq, Idx: chunk[len(chunk)-1].Row.Index}
		keys := make([]any, 0, 1+2*len(chunk))
		argv := make([]any, 0, 5+4*len(chunk))
		keys = append(keys, ck)
		mode, at := "f", first
		if start > 0 {
			mode, at = "c", prev
		}
		argv = append(argv, mode, string(appendPoint(nil, at)), string(appendPoint(nil, last)), t.ttl, t.spec.Format)
		for i := range chunk {
			keys, argv, buf = t.encode(&chunk[i], keys, argv, buf)
		}
		call := make([]any, 0, 3+len(keys)+len(argv))
		call = append(call, "evalsha", t.applySHA, len(keys))
		call = append(append(call, keys...), argv...)
		calls = append(calls, call)
		prev = last
	}
	loaded := false
	for len(calls) > 0 {
		pipe := t.c.Pipeline()
		cmds := make([]*goredis.Cmd, len(calls))
		for i, call := range calls {
			cmds[i] = pipe.Do(ctx, call...)
		}
		pipe.Exec(ctx) // each command's error is looked at below
		failed := len(cmds)
		for i, cmd := range cmds {
			if cmd.Err() != nil {
				failed = i
				break
			}
			t.count(cmd)
		}
		if failed == len(cmds) {
			return nil
		}
		err := cmds[failed].Err()
		if goredis.HasErrorPrefix(err, "NOSCRIPT") && !loaded {
			// The server lost its scripts (a restart, SCRIPT FLUSH):
			// every call from this one failed, since each runs only if
			// the one before it did; load it and send them again.
			if err := t.c.ScriptLoad(ctx, applyScript).Err(); err != nil {
				return fmt.Errorf("sink %s: worker %d: load the apply script: %w", t.spec.Name, worker, err)
			}
			loaded, calls = true, calls[failed:]
			continue
		}
		if goredis.HasErrorPrefix(err, "BRAIDBEHIND") {
			return fmt.Errorf("sink %s: worker %d: %w (%v)", t.spec.Name, worker, sink.ErrBehind, err)
		}
		return fmt.Errorf("sink %s: worker %d: apply seq %d row %d on: %w", t.spec.Name, worker, changes[0].Seq, changes[0].Row.Index, err)
	}
	return nil
}

// count adds a script call's counts to the target's.
func (t *Target) count(cmd *goredis.Cmd) {
	r, _ := cmd.Slice()
	if len(r) != 3 {
		return
	}
	n := func(v any) uint64 { x, _ := v.(int64); return uint64(max(x, 0)) }
	t.applied.Add(n(r[0]))
	t.upserts.Add(n(r[1]))
	t.missing.Add(n(r[2]))
}

// encode adds a change's keys and arguments (applyScript's) to a call;
// the keys and values are slices of buf, which it returns grown.
func (t *Target) encode(ch *sink.Change, keys, argv []any, buf []byte) ([]any, []any, []byte) {
	rc := ch.Row
	in := t.info(rc.Table)
	key := func(after bool) []byte {
		img := ch.Before
		if after {
			img = ch.After
		}
		start := len(buf)
		buf = t.key.append(buf, in.database, in.table, func(b []byte) []byte {
			for j, i := range in.keyIdx {
				if j > 0 {
					b = append(b, ':')
				}
				if in.binKey[j] && img != nil {
					if v, ok := img[i].([]byte); ok {
						b = append(b, v...) // the bytes MySQL returns
						continue
					}
				}
				b, _ = rc.AppendText(b, after, i)
			}
			return b
		})
		return buf[start:len(buf):len(buf)]
	}
	versionKey := func(k []byte) []byte {
		start := len(buf)
		buf = append(append(buf, k...), versionSuffix...)
		return buf[start:len(buf):len(buf)]
	}
	start := len(buf)
	buf = appendPoint(buf, sink.Point{Seq: ch.Seq, Idx: rc.Index})
	ver := buf[start:len(buf):len(buf)]
	switch rc.Kind {
	case change.Insert:
		k := key(true)
		keys = append(keys, k, versionKey(k))
		argv = append(argv, "i", ver)
	case change.Delete:
		k := key(false)
		keys = append(keys, k, versionKey(k))
		return keys, append(argv, "d", ver), buf
	case change.Update:
		old, k := key(false), key(true)
		if bytes.Equal(old, k) {
			keys = append(keys, k, versionKey(k))
			argv = append(argv, "u", ver)
		} else {
			keys = append(keys, old, versionKey(old), k, versionKey(k))
			argv = append(argv, "m", ver)
		}
	}
	if !t.hash {
		start := len(buf)
		buf = append(buf, '{')
		for i := range in.names {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, in.jsonKeys[i]...)
			var null bool
			if buf, null = rc.AppendJSON(buf, true, i); null {
				buf = append(buf, "null"...)
			}
		}
		buf = append(buf, '}')
		return keys, append(argv, buf[start:len(buf):len(buf)]), buf
	}
	n := len(argv)
	argv = append(argv, 0)
	for i, name := range in.names {
		start := len(buf)
		var null bool
		if buf, null = rc.AppendText(buf, true, i); null {
			continue
		}
		argv = append(argv, name, buf[start:len(buf):len(buf)])
	}
	argv[n] = (len(argv) - n - 1) / 2
	return keys, argv, buf
}
