package redis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"

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

// Apply implements sink.Target: the changes go as script calls of at
// most batch changes each (applyScript), all in one pipeline; each call
// sets the worker's checkpoint to its last change, and runs only if the
// call before it did.
func (t *Target) Apply(ctx context.Context, worker int, changes []sink.Change) error {
	if len(changes) == 0 {
		return nil
	}
	ck := checkpointKey(t.prefix, t.spec.Name, worker)
	e := &encoder{t: t, buf: make([]byte, 0, 256*len(changes)), args: make([]arg, 0, 6*len(changes))}
	var calls [][]any
	var prev sink.Point
	for start := 0; start < len(changes); start += t.batch {
		chunk := changes[start:min(start+t.batch, len(changes))]
		first := sink.Point{Seq: chunk[0].Seq, Idx: chunk[0].Row.Index}
		last := sink.Point{Seq: chunk[len(chunk)-1].Seq, Idx: chunk[len(chunk)-1].Row.Index}
		mode, at := "f", first
		if start > 0 {
			mode, at = "c", prev
		}
		e.keys = append(e.keys[:0], ck)
		e.argv = append(e.argv[:0], mode, string(appendPoint(nil, at)), string(appendPoint(nil, last)), t.ttl, t.spec.Format)
		for i := range chunk {
			e.change(&chunk[i])
		}
		call := make([]any, 0, 3+len(e.keys)+len(e.argv))
		call = append(call, "evalsha", t.applySHA, len(e.keys))
		call = append(append(call, e.keys...), e.argv...)
		calls = append(calls, call)
		prev = last
	}
	loaded := false
	for len(calls) > 0 {
		pipe := t.c.Pipeline()
		saves := make([]*goredis.StatusCmd, len(e.save))
		for i, in := range e.save {
			names, _ := json.Marshal(in.names)
			saves[i] = pipe.Set(ctx, t.columnsKey(in.database+"."+in.table), names, 0)
		}
		cmds := make([]*goredis.Cmd, len(calls))
		for i, call := range calls {
			cmds[i] = pipe.Do(ctx, call...)
		}
		pipe.Exec(ctx) // each command's error is looked at below
		for i, cmd := range saves {
			if cmd.Err() == nil {
				e.save[i].saved.Store(true)
			}
		}
		e.save = nil
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

// encoder builds the arguments of script calls (applyScript's). Their
// bytes go one after another in buf, and each argument is an *arg into
// it, which an interface holds without an allocation of its own; when
// buf or args grow, the arguments made before keep the old arrays.
type encoder struct {
	t          *Target
	buf        []byte
	args       []arg
	keys, argv []any        // the call being built
	save       []*tableInfo // table versions whose columns to save
}

// arg is an argument of a call: go-redis writes it as a bulk string.
type arg struct{ b []byte }

// MarshalBinary implements encoding.BinaryMarshaler, for go-redis.
func (a *arg) MarshalBinary() ([]byte, error) { return a.b, nil }

// since is the argument of what was appended to buf from start on.
func (e *encoder) since(start int) any {
	if len(e.args) == cap(e.args) {
		e.args = make([]arg, 0, max(256, cap(e.args)))
	}
	e.args = append(e.args, arg{e.buf[start:len(e.buf):len(e.buf)]})
	return &e.args[len(e.args)-1]
}

// key appends the key of ch's row, from its after image or its before
// image.
func (e *encoder) key(ch *sink.Change, in *tableInfo, after bool) (start int) {
	rc := ch.Row
	img := ch.Before
	if after {
		img = ch.After
	}
	start = len(e.buf)
	e.buf = e.t.key.append(e.buf, in.database, in.table, func(b []byte) []byte {
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
	return start
}

// keyPair adds the key appended from start on and its version key to
// the call's keys.
func (e *encoder) keyPair(start int) {
	end := len(e.buf)
	k := e.since(start)
	e.buf = append(append(e.buf, e.buf[start:end]...), versionSuffix...)
	e.keys = append(e.keys, k, e.since(end))
}

// change adds a change's keys and arguments to the call.
func (e *encoder) change(ch *sink.Change) {
	rc := ch.Row
	in := e.t.info(rc.Table)
	if !in.saved.Load() && !slices.Contains(e.save, in) {
		e.save = append(e.save, in)
	}
	start := len(e.buf)
	e.buf = appendPoint(e.buf, sink.Point{Seq: ch.Seq, Idx: rc.Index})
	ver := e.since(start)
	switch rc.Kind {
	case change.Insert:
		e.keyPair(e.key(ch, in, true))
		e.argv = append(e.argv, "i", ver)
	case change.Delete:
		e.keyPair(e.key(ch, in, false))
		e.argv = append(e.argv, "d", ver)
		return
	case change.Update:
		o := e.key(ch, in, false)
		k := e.key(ch, in, true)
		if bytes.Equal(e.buf[o:k], e.buf[k:]) {
			e.buf = e.buf[:k]
			e.keyPair(o)
			e.argv = append(e.argv, "u", ver)
		} else {
			kb := append([]byte(nil), e.buf[k:]...)
			e.buf = e.buf[:k]
			e.keyPair(o)
			k = len(e.buf)
			e.buf = append(e.buf, kb...)
			e.keyPair(k)
			e.argv = append(e.argv, "m", ver)
		}
	}
	if !e.t.hash {
		start := len(e.buf)
		e.buf = append(e.buf, '{')
		for i := range in.names {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, in.jsonKeys[i]...)
			var null bool
			if e.buf, null = rc.AppendJSON(e.buf, true, i); null {
				e.buf = append(e.buf, "null"...)
			}
		}
		e.buf = append(e.buf, '}')
		e.argv = append(e.argv, e.since(start))
		return
	}
	n := len(e.argv)
	e.argv = append(e.argv, 0)
	for i := range in.names {
		start := len(e.buf)
		var null bool
		if e.buf, null = rc.AppendText(e.buf, true, i); null {
			continue
		}
		e.argv = append(e.argv, in.fields[i], e.since(start))
	}
	e.argv[n] = (len(e.argv) - n - 1) / 2
}
