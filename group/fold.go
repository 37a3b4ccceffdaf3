package group

import (
	"fmt"
	"slices"
	"strings"

	"github.com/braid-cdc/braid/engine/change"
)

// chunkRows are a chunk's rows: as the SELECT gave them (text, formatted
// straight from the server's text), or as Values once changes were folded
// in.
type chunkRows struct {
	text   *change.TextRows
	values [][]change.Value
}

func (r chunkRows) len() int {
	if r.text != nil {
		return r.text.Len()
	}
	return len(r.values)
}

// row is row k as Values.
func (r chunkRows) row(k int) []change.Value {
	if r.text != nil {
		return r.text.Row(k)
	}
	return r.values[k]
}

// changes are rows from to to as INSERTs of t numbered from 0.
func (r chunkRows) changes(t *change.Table, from, to int) []change.RowChange {
	if r.text != nil {
		return r.text.Changes(from, from, to)
	}
	return change.NewValueRows(t, from, r.values[from:to])
}

// pendingChunk is a chunk registered and not yet emitted.
type pendingChunk struct {
	table   int // index in state.Tables
	version *change.Table
	key     tableKey
	after   []keyPart
	// window holds the table's changes to keys after `after` since a
	// moment before the chunk was registered (see leftRecently), in
	// binlog order.
	window []change.RowChange
	// windowAt is each window change's binlog position.
	windowAt []change.Position
	// low is a keyless chunk's low watermark, where exact: the binlog
	// position of the consistent snapshot its SELECT read in. A change of
	// its window before low is one the SELECT saw, one after it one the
	// SELECT did not (see fold).
	low   change.Position
	exact bool
	// Set once the SELECT is done: its rows, the chunk's last key (nil:
	// to the table's end; throughKey parsed) and the high watermark.
	selected   bool
	rows       chunkRows
	through    []string
	throughKey []keyPart
	high       change.Position
	// beats counts the heartbeats that came since it was selected.
	beats int
	// stale: a DDL of the table came since the chunk was registered; it
	// is dropped and read again.
	stale bool
}

// holds reports whether key k is in the chunk's key range (to the
// table's end until the SELECT has told where it ends).
func (p *pendingChunk) holds(k []keyPart) bool {
	return (p.after == nil || compareKeys(k, p.after) > 0) && (p.throughKey == nil || compareKeys(k, p.throughKey) <= 0)
}

// fold applies a chunk's window to its selected rows: the rows its key
// range holds after the last change kept, in key order.
func fold(p *pendingChunk) chunkRows {
	var through []keyPart
	if p.through != nil {
		through, _ = parseKey(p.through)
	}
	in := func(row []change.Value) bool {
		if !p.key.ints {
			return true // one piece: the whole table
		}
		k, ok := rowKey(p.key, row)
		if !ok {
			return false
		}
		return (p.after == nil || compareKeys(k, p.after) > 0) && (through == nil || compareKeys(k, through) <= 0)
	}
	if len(p.window) == 0 {
		return p.rows
	}
	idOf := func(row []change.Value) string {
		var b strings.Builder
		cols := p.key.cols
		if len(cols) == 0 {
			for i := range row {
				cols = append(cols, i)
			}
		}
		for _, c := range cols {
			fmt.Fprintf(&b, "%T:%v\x00", row[c], row[c])
		}
		return b.String()
	}
	// A keyed table's rows are replaced by key: the window's latest
	// change of a key decides it, whether or not the SELECT saw the
	// change already (see leftRecently). A table without a key has no
	// such key, and its window holds the changes the reader passed
	// since a moment before the chunk was registered, which may be far
	// behind the server. Where its snapshot's position is known (exact),
	// those before it the SELECT saw and are passed over, and those
	// after it it did not see, so they are applied as they are: one row
	// added or taken away per change, identical rows too. Where it is
	// not (MySQL), any of them may have been seen, so they are all
	// reconciled by the whole row as by a key (a row is added only where
	// the rows hold none like it, and one like it is taken away): each
	// row's last change decides whether it is there, which is right as
	// long as the table's rows differ; identical ones may come out wrong
	// in number.
	keyed := len(p.key.cols) > 0
	byID := map[string][][]change.Value{}
	var order []string
	put := func(row []change.Value) {
		id := idOf(row)
		rs, ok := byID[id]
		if !ok {
			order = append(order, id)
		}
		if keyed {
			rs = rs[:0]
		}
		byID[id] = append(rs, row)
	}
	for k := range p.rows.len() {
		put(p.rows.row(k))
	}
	for i, rc := range p.window {
		if !sameColumns(rc.Table, p.version) {
			continue // of another version: a DDL made the chunk stale
		}
		if !keyed && p.exact && p.windowAt[i].Compare(p.low) < 0 {
			// Before the snapshot: the SELECT saw it (the reader passes
			// it later when it lags behind the server).
			continue
		}
		if rc.HasBefore() {
			if before := rc.Before(); in(before) {
				id := idOf(before)
				if rs := byID[id]; len(rs) > 0 {
					byID[id] = rs[1:]
				}
			}
		}
		if rc.HasAfter() {
			if after := rc.After(); in(after) {
				if id := idOf(after); keyed || p.exact || len(byID[id]) == 0 {
					put(after)
				}
			}
		}
	}
	out := make([][]change.Value, 0, p.rows.len())
	for _, id := range order {
		out = append(out, byID[id]...)
		delete(byID, id)
	}
	if p.key.ints {
		slices.SortFunc(out, func(a, b []change.Value) int {
			ka, _ := rowKey(p.key, a)
			kb, _ := rowKey(p.key, b)
			return compareKeys(ka, kb)
		})
	}
	return chunkRows{values: out}
}

// sameColumns reports whether two table versions have the same columns.
func sameColumns(a, b *change.Table) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || len(a.Columns) != len(b.Columns) {
		return false
	}
	for i := range a.Columns {
		if !strings.EqualFold(a.Columns[i].Name, b.Columns[i].Name) {
			return false
		}
	}
	return true
}
