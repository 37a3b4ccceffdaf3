package redis

import (
	"bytes"
	"slices"
	"sync"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// txn is one transaction's changes, encoded: an op per change, in
// order, and a slot per key they touch. The bytes of keys, versions and
// values go one after another in buf, and each argument of a command is
// an *arg into it, which an interface holds without an allocation of its
// own; when buf or args grow, the arguments made before keep the old
// arrays.
type txn struct {
	t      *Target
	buf    []byte
	args   []arg
	ops    []op
	slots  []slot
	index  map[string]int // key → its slot
	fields []any          // format hash: each op's field, value pairs
	save   []*tableInfo   // table versions whose columns to save
}

// op is a change as the transaction plans it.
type op struct {
	kind byte // 'i' INSERT, 'u' UPDATE, 'd' DELETE, 'm' UPDATE that moves the key
	ver  sink.Point
	// buf[tomb] is 'd', buf[tomb+1:end] the version's text "seq:idx":
	// a tombstone's text is buf[tomb:end].
	tomb, end int
	key, old  int // slots of its key and, for 'm', of the old key (else -1)
	val       any // json: the after-image
	f0, f1    int // hash: the after-image's fields, fields[f0:f1]
}

// slot is a key the transaction touches, with its version key.
type slot struct {
	key, vkey any
	// The key's version: as read (MGET of the version keys), then as
	// the ops planned so far leave it.
	has, dead bool // a version (dead: a tombstone)
	ver       sink.Point
	// What the transaction writes: 0 nothing, 'w' the value of op
	// last and its live version, 'd' a tombstone of op last.
	state byte
	last  int
	// probe: the transaction's DEL of the key reports whether it had a
	// value before the transaction, which a delete counts (Missing).
	probe bool
}

// arg is an argument of a command: go-redis writes it as a bulk string.
type arg struct{ b []byte }

// MarshalBinary implements encoding.BinaryMarshaler, for go-redis.
func (a *arg) MarshalBinary() ([]byte, error) { return a.b, nil }

// txns keeps txns for the next transactions: a txn's arrays
// (some 400 bytes a change) are most of what an apply allocates.
var txns = sync.Pool{New: func() any { return &txn{index: map[string]int{}} }}

// newTxn returns an empty txn of t for n changes, from txns; free
// puts it back once nothing holds its arguments.
func newTxn(t *Target, n int) *txn {
	b := txns.Get().(*txn)
	b.t = t
	b.buf = slices.Grow(b.buf, 256*n) // a json row of some 10 columns, its key twice, its version
	b.ops = slices.Grow(b.ops, n)
	b.slots = slices.Grow(b.slots, n)
	return b
}

// free empties b and puts it back in txns.
func (b *txn) free() {
	clear(b.args)
	clear(b.fields)
	clear(b.ops)
	clear(b.slots)
	clear(b.save)
	clear(b.index)
	*b = txn{buf: b.buf[:0], args: b.args[:0], ops: b.ops[:0], slots: b.slots[:0], index: b.index,
		fields: b.fields[:0], save: b.save[:0]}
	txns.Put(b)
}

// arg is the argument of buf[start:end].
func (b *txn) arg(start, end int) any {
	if len(b.args) == cap(b.args) {
		b.args = make([]arg, 0, max(256, 2*cap(b.args)))
	}
	b.args = append(b.args, arg{b.buf[start:end:end]})
	return &b.args[len(b.args)-1]
}

// since is the argument of what was appended to buf from start on.
func (b *txn) since(start int) any { return b.arg(start, len(b.buf)) }

// key appends the key of ch's row, from its after image or its before
// image.
func (b *txn) key(ch *sink.Change, in *tableInfo, after bool) (start int) {
	rc := ch.Row
	img := ch.Before
	if after {
		img = ch.After
	}
	start = len(b.buf)
	b.buf = b.t.key.append(b.buf, in.database, in.table, func(buf []byte) []byte {
		for j, i := range in.keyIdx {
			if j > 0 {
				buf = append(buf, ':')
			}
			if in.binKey[j] && img != nil {
				if v, ok := img[i].([]byte); ok {
					buf = append(buf, v...) // the bytes MySQL returns
					continue
				}
			}
			buf, _ = rc.AppendText(buf, after, i)
		}
		return buf
	})
	return start
}

// slot returns the slot of the key appended from start on, adding it
// (and its version key) the first time; a key seen before is taken off
// buf again.
func (b *txn) slot(start int) int {
	if s, ok := b.index[string(b.buf[start:])]; ok {
		b.buf = b.buf[:start]
		return s
	}
	end := len(b.buf)
	s := len(b.slots)
	b.index[string(b.buf[start:end])] = s
	k := b.arg(start, end)
	b.buf = append(append(b.buf, b.buf[start:end]...), versionSuffix...)
	b.slots = append(b.slots, slot{key: k, vkey: b.since(end)})
	return s
}

// add encodes a change.
func (b *txn) add(ch *sink.Change) {
	rc := ch.Row
	in := b.t.info(rc.Table)
	if !in.saved.Load() && !slices.Contains(b.save, in) {
		b.save = append(b.save, in)
	}
	o := op{ver: sink.Point{Seq: ch.Seq, Idx: rc.Index}, old: -1}
	o.tomb = len(b.buf)
	b.buf = appendPoint(append(b.buf, 'd'), o.ver)
	o.end = len(b.buf)
	switch rc.Kind {
	case change.Insert:
		o.kind, o.key = 'i', b.slot(b.key(ch, in, true))
	case change.Delete:
		o.kind, o.key = 'd', b.slot(b.key(ch, in, false))
		b.ops = append(b.ops, o)
		return
	case change.Update:
		old := b.key(ch, in, false)
		k := b.key(ch, in, true)
		if bytes.Equal(b.buf[old:k], b.buf[k:]) {
			b.buf = b.buf[:k]
			o.kind, o.key = 'u', b.slot(old)
		} else {
			kb := append([]byte(nil), b.buf[k:]...)
			b.buf = b.buf[:k]
			o.kind, o.old = 'm', b.slot(old)
			k = len(b.buf)
			b.buf = append(b.buf, kb...)
			o.key = b.slot(k)
		}
	}
	if !b.t.hash {
		start := len(b.buf)
		b.buf = append(b.buf, '{')
		for i := range in.names {
			if i > 0 {
				b.buf = append(b.buf, ',')
			}
			b.buf = append(b.buf, in.jsonKeys[i]...)
			var null bool
			if b.buf, null = rc.AppendJSON(b.buf, true, i); null {
				b.buf = append(b.buf, "null"...)
			}
		}
		b.buf = append(b.buf, '}')
		o.val = b.since(start)
	} else {
		o.f0 = len(b.fields)
		for i := range in.names {
			start := len(b.buf)
			var null bool
			if b.buf, null = rc.AppendText(b.buf, true, i); null {
				continue // a NULL column has no field
			}
			b.fields = append(b.fields, in.fields[i], b.since(start))
		}
		o.f1 = len(b.fields)
	}
	b.ops = append(b.ops, o)
}
