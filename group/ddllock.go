package group

import (
	"slices"

	"github.com/braid-cdc/braid/schema"
)

// The pessimistic merge of shard DDL (issue 20), as a pure state machine
// over the DDL of one destination's shard tables in merged order: which
// logical DDL goes out, once, and which shard tables' rows wait. Its
// state is a function of the DDL it was fed, so a replay that feeds the
// same DDL in the same order (the merge's) reaches the same locks. The
// merge does not use it yet: the rows a lock holds are to be re-read from
// the binlog when it releases, which the readers cannot do yet.

// DDLVerdict is what happens to one shard table's DDL.
type DDLVerdict uint8

// The verdicts.
const (
	// DDLEmit: the DDL goes out now, rewritten to the logical table (a
	// logical table's first CREATE, or the DDL of a logical table only
	// one shard table routes to).
	DDLEmit DDLVerdict = iota + 1
	// DDLHold: a lock opened or grew; the shard table's later rows wait.
	DDLHold
	// DDLRelease: the last shard table ran the lock's DDL: it goes out,
	// then the rows held, and the lock is gone.
	DDLRelease
	// DDLSkip: an equivalent DDL went out already (a later shard's
	// CREATE of the same table).
	DDLSkip
	// DDLConflict: the shard table ran a DDL other than its lock's; the
	// lock stays and names it.
	DDLConflict
)

// DDLLock is one open lock of a logical table.
type DDLLock struct {
	// Logical is the logical table, "schema.table".
	Logical string
	// DDL is the logical statement that goes out when the lock releases.
	DDL schema.LogicalDDL
	// Done are the shard tables that ran it, in merged order; Waiting
	// the others, sorted.
	Done, Waiting []string
	// Conflicts maps a shard table that ran another DDL meanwhile to that
	// DDL's key.
	Conflicts map[string]string
}

// ShardLocks merges the DDL of the shard tables of each logical table.
type ShardLocks struct {
	shards  map[string][]string // logical table → its shard tables, sorted
	created map[string]string   // logical table → the key of its CREATE
	locks   map[string]*DDLLock // logical table → its open lock
}

// NewShardLocks returns the state before any DDL.
func NewShardLocks() *ShardLocks {
	return &ShardLocks{shards: map[string][]string{}, created: map[string]string{}, locks: map[string]*DDLLock{}}
}

// Create records shard table shard of logical creating itself with d:
// the logical table's first CREATE goes out, a later equivalent one is
// skipped, a different one is a conflict (the shard tables disagree on
// the logical table's schema).
func (s *ShardLocks) Create(logical, shard string, d schema.LogicalDDL) DDLVerdict {
	if i, found := slices.BinarySearch(s.shards[logical], shard); !found {
		s.shards[logical] = slices.Insert(s.shards[logical], i, shard)
	}
	key, ok := s.created[logical]
	switch {
	case !ok:
		s.created[logical] = d.Key
		return DDLEmit
	case key == d.Key:
		return DDLSkip
	}
	return DDLConflict
}

// Drop records shard table shard of logical being dropped: its rows hold
// no lock any more, and a lock it was the last one waiting for releases.
// The last shard table's DROP goes out (DDLEmit); the others are skipped.
func (s *ShardLocks) Drop(logical, shard string) (DDLVerdict, *DDLLock) {
	shards := s.shards[logical]
	if i, found := slices.BinarySearch(shards, shard); found {
		s.shards[logical] = slices.Delete(shards, i, i+1)
	}
	if len(s.shards[logical]) == 0 {
		delete(s.shards, logical)
		delete(s.created, logical)
		delete(s.locks, logical)
		return DDLEmit, nil
	}
	if l := s.locks[logical]; l != nil {
		l.Waiting = slices.DeleteFunc(l.Waiting, func(x string) bool { return x == shard })
		delete(l.Conflicts, shard)
		if len(l.Waiting) == 0 {
			delete(s.locks, logical)
			return DDLRelease, l
		}
	}
	return DDLSkip, nil
}

// Alter records shard table shard of logical running d (any DDL but
// CREATE and DROP). With one shard table it goes out; else the first
// opens a lock holding shard, each equivalent one adds its shard table,
// and the last releases it.
func (s *ShardLocks) Alter(logical, shard string, d schema.LogicalDDL) (DDLVerdict, *DDLLock) {
	shards := s.shards[logical]
	if len(shards) <= 1 {
		return DDLEmit, nil
	}
	l := s.locks[logical]
	if l == nil {
		l = &DDLLock{Logical: logical, DDL: d, Done: []string{shard}, Conflicts: map[string]string{}}
		for _, x := range shards {
			if x != shard {
				l.Waiting = append(l.Waiting, x)
			}
		}
		s.locks[logical] = l
		return DDLHold, l
	}
	if d.Key != l.DDL.Key {
		l.Conflicts[shard] = d.Key
		return DDLConflict, l
	}
	i := slices.Index(l.Waiting, shard)
	if i < 0 {
		return DDLSkip, l // ran it twice: the second changes nothing
	}
	l.Waiting = slices.Delete(l.Waiting, i, i+1)
	l.Done = append(l.Done, shard)
	if len(l.Waiting) == 0 {
		delete(s.locks, logical)
		return DDLRelease, l
	}
	return DDLHold, l
}

// Held reports whether shard's rows wait for a lock of logical: it ran
// the lock's DDL and others have not yet.
func (s *ShardLocks) Held(logical, shard string) bool {
	l := s.locks[logical]
	return l != nil && slices.Contains(l.Done, shard)
}

// Locks lists the open locks, by logical table.
func (s *ShardLocks) Locks() []*DDLLock {
	out := make([]*DDLLock, 0, len(s.locks))
	for _, l := range s.locks {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *DDLLock) int {
		if a.Logical < b.Logical {
			return -1
		}
		if a.Logical > b.Logical {
			return 1
		}
		return 0
	})
	return out
}
