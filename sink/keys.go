package sink

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/braid-cdc/braid/engine/change"
)

// Key is a row's key values under the key columns idx, as one string
// (the table's name first, so keys of two tables never meet), each value
// as fmt prints it.
func Key(table string, img []change.Value, idx []int) string {
	b := append(make([]byte, 0, len(table)+12*len(idx)), table...)
	for _, i := range idx {
		b = appendKeyValue(append(b, 0), img[i])
	}
	return string(b)
}

// appendKeyValue appends one value of a key to b.
func appendKeyValue(b []byte, v change.Value) []byte {
	switch v := v.(type) {
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case string:
		return append(b, v...)
	}
	// As fmt prints it, which is what Key always wrote: a key's worker
	// must not change from one braid to the next, or a restart would
	// skip by another worker's checkpoint.
	return fmt.Append(b, v)
}

// keyer makes Keyed's Changes: their names and keys. It keeps each
// shard table's names, and builds keys in one buffer, so that a change
// costs a string a key, not five.
type keyer struct {
	byOrigin bool
	routing  Routing
	names    map[nameKey]tableNames
	buf      []byte
}

type nameKey struct {
	source string
	table  *change.Table
}

// tableNames are a shard table's names, as Change holds them, the
// prefix of its keys and its key columns (KeyColumns).
type tableNames struct {
	origin, logical, keyTable string
	keyIdx                    []int
}

func newKeyer(byOrigin bool, routing Routing) *keyer {
	return &keyer{byOrigin: byOrigin, routing: routing, names: map[nameKey]tableNames{}}
}

// change is row change rc of ev with its keys (byOrigin: the shard table
// is part of each key), decoding their columns only: the images are
// decoded where they are applied (Change.Decode).
func (k *keyer) change(ev *change.Event, rc *change.RowChange) Change {
	nk := nameKey{ev.Source, rc.Table}
	n, ok := k.names[nk]
	if !ok {
		t := rc.Table
		ls, lt := t.Logical()
		n = tableNames{origin: t.Schema + "." + t.Name, logical: ls + "." + lt, keyIdx: KeyColumns(t)}
		n.keyTable = n.logical
		if k.byOrigin {
			n.keyTable = ev.Source + "/" + n.origin + ">" + n.logical
		}
		if len(k.names) > 1<<16 {
			clear(k.names) // table versions come and go with DDL
		}
		k.names[nk] = n
	}
	c := Change{Seq: ev.Seq, Source: ev.Source, Origin: n.origin, Logical: n.logical, Row: rc}
	c.PK, c.Others, c.Moved = k.keys(rc, n.keyTable, n.keyIdx)
	c.Route = k.route(rc, rc.HasAfter(), c.PK, n)
	if c.Moved {
		c.OldRoute = k.route(rc, false, c.Others[0], n)
	}
	return c
}

// route is the route of rc's primary key pk, in its after image or its
// before image.
func (k *keyer) route(rc *change.RowChange, after bool, pk string, n tableNames) uint32 {
	if shift := k.routing.shift(); shift > 0 && len(n.keyIdx) == 1 {
		var bucket uint64
		switch v, signed, ok := rc.Integer(after, n.keyIdx[0]); {
		case ok && signed:
			bucket = uint64(int64(v) >> shift)
		case ok:
			bucket = v >> shift
		default:
			switch v := rc.Value(after, n.keyIdx[0]).(type) {
			case int64:
				bucket = uint64(v >> shift)
			case uint64:
				bucket = v >> shift
			default:
				return routeHash(pk)
			}
		}
		k.buf = binary.BigEndian.AppendUint64(append(append(k.buf[:0], n.keyTable...), 0), bucket)
		return routeHash(k.buf)
	}
	return routeHash(pk)
}

// keys are a change's primary key (all columns of a table without one)
// and its other keys: the old primary key of an UPDATE that changes it
// (moved), and the values of each unique key in its images (NULLs are not
// unique, so a key with one is left out). table is the keys' prefix, idx
// the key columns.
func (k *keyer) keys(rc *change.RowChange, table string, idx []int) (pk string, others []string, moved bool) {
	t := rc.Table
	var images [2]bool // after, for each image the change has
	n := 0
	if rc.HasBefore() {
		n++
	}
	if rc.HasAfter() {
		images[n] = true
		n++
	}
	pk = k.key(rc, images[n-1], table, idx) // the after image's, if any
	if n == 2 {
		if old := k.key(rc, false, table, idx); old != pk {
			others = append(others, old)
			moved = true
		}
	}
	for u, cols := range t.Unique {
		uidx := make([]int, 0, len(cols))
		for _, c := range cols {
			if j := t.ColumnIndex(c); j >= 0 {
				uidx = append(uidx, j)
			}
		}
		if len(uidx) != len(cols) {
			continue
		}
		for _, after := range images[:n] {
			if slices.ContainsFunc(uidx, func(j int) bool { return rc.Value(after, j) == nil }) {
				continue
			}
			if key := k.key(rc, after, fmt.Sprintf("%s#%d", table, u), uidx); !slices.Contains(others, key) {
				others = append(others, key)
			}
		}
	}
	return pk, others, moved
}

// key is Key of rc's after image (before image when after is false),
// built in k.buf: an integer column's value is read without boxing it
// (change.RowChange.Integer), which was a tenth of Keyed's loop.
func (k *keyer) key(rc *change.RowChange, after bool, table string, idx []int) string {
	k.buf = append(k.buf[:0], table...)
	for _, i := range idx {
		k.buf = append(k.buf, 0)
		switch v, signed, ok := rc.Integer(after, i); {
		case ok && signed:
			k.buf = strconv.AppendInt(k.buf, int64(v), 10)
		case ok:
			k.buf = strconv.AppendUint(k.buf, v, 10)
		default:
			k.buf = appendKeyValue(k.buf, rc.Value(after, i))
		}
	}
	return string(k.buf)
}

// KeyColumns are the indexes of t's primary-key columns, or of all its
// columns when it has none.
func KeyColumns(t *change.Table) []int {
	var idx []int
	for i, c := range t.Columns {
		if c.Key {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		for i := range t.Columns {
			idx = append(idx, i)
		}
	}
	return idx
}
