package redis

import (
	"fmt"

	"github.com/braid-cdc/braid/sink"
)

// counts are a transaction's row changes applied, upserts and missing
// (Stats); missing leaves out the deletes whose count waits for a probe's
// reply (slot.probe).
type counts struct{ applied, upserts, missing uint64 }

// read sets each slot's version from got, the MGET of the version keys
// in slot order (nil or a string each).
func (b *txn) read(got []any) error {
	if len(got) != len(b.slots) {
		return fmt.Errorf("read %d versions of %d keys", len(got), len(b.slots))
	}
	for i, v := range got {
		s, ok := v.(string)
		if !ok {
			continue
		}
		p, ok := parsePoint(s)
		if !ok {
			return fmt.Errorf("version key %s holds %q, not seq:idx or a tombstone", b.slots[i].vkey.(*arg).b, s)
		}
		sl := &b.slots[i]
		sl.has, sl.dead, sl.ver = true, s[0] == 'd', p
	}
	return nil
}

// plan decides, from the versions read, what the transaction writes:
// each op in order applies only where its key's version is absent or
// older than the op's, and moves that version, so that a key's later op
// in the transaction sees its earlier one. Only each slot's last state is
// written (the transaction is atomic: nobody sees the states between).
// It is pure: no Redis, the slots and the ops in, the slots' states and
// the counts out.
func (b *txn) plan() counts {
	var n counts
	for i := range b.ops {
		o := &b.ops[i]
		if o.kind == 'm' {
			did := false
			if b.newer(o.old, o.ver) {
				b.tombstone(o.old, i, &n)
				did = true
			}
			if b.newer(o.key, o.ver) {
				b.write(o.key, i)
				did = true
			}
			if did {
				n.applied++
			}
			continue
		}
		if !b.newer(o.key, o.ver) {
			continue
		}
		n.applied++
		s := &b.slots[o.key]
		live := s.has && !s.dead
		switch o.kind {
		case 'd':
			b.tombstone(o.key, i, &n)
		case 'i':
			if live {
				n.upserts++
			}
			b.write(o.key, i)
		case 'u':
			if !live {
				n.missing++
			}
			b.write(o.key, i)
		}
	}
	return n
}

// newer reports whether version v is newer than slot s's.
func (b *txn) newer(s int, v sink.Point) bool {
	sl := &b.slots[s]
	return !sl.has || sl.ver.Before(v)
}

// write makes op i's after-image slot s's value.
func (b *txn) write(s, i int) {
	sl := &b.slots[s]
	sl.has, sl.dead, sl.ver = true, false, b.ops[i].ver
	sl.state, sl.last = 'w', i
}

// tombstone deletes slot s's value by op i: missing if the value was not
// there, which for a key the transaction has not written yet only its
// DEL's reply says (a probe).
func (b *txn) tombstone(s, i int, n *counts) {
	sl := &b.slots[s]
	switch sl.state {
	case 0:
		sl.probe = true
	case 'd':
		n.missing++
	}
	sl.has, sl.dead, sl.ver = true, true, b.ops[i].ver
	sl.state, sl.last = 'd', i
}
