package spec

// Ordering is how a destination orders its sources' transactions (the
// spec's ordering:).
type Ordering string

// The orderings.
const (
	// OrderingStrict merges the sources in commit-time order: the merged
	// order is a function of the sources' binlogs, and a replay emits the
	// same stream with the same seqs.
	OrderingStrict Ordering = "strict"
	// OrderingPerSource lets transactions go as they come: each source's
	// order is exact, but a replay may interleave the sources differently.
	OrderingPerSource Ordering = "per-source"
)

// Strict reports whether o merges in commit-time order (the default).
func (o Ordering) Strict() bool { return o != OrderingPerSource }

// ShardDDLMode is how the DDL of shard tables routed to one logical table
// becomes the logical table's (the spec's shard_ddl:; see Spec.ShardDDL).
type ShardDDLMode string

// The shard_ddl modes.
const (
	// ShardDDLPessimistic holds a shard table that ran a DDL until every
	// shard table of its logical table has run it, then emits one DDL of
	// the logical table, followed by the rows that waited.
	ShardDDLPessimistic ShardDDLMode = "pessimistic"
	// ShardDDLOptimistic emits ADD COLUMN at the first shard and DROP
	// COLUMN at the last; anything else goes as in pessimistic mode.
	ShardDDLOptimistic ShardDDLMode = "optimistic"
	// ShardDDLPassthrough emits every shard's DDL as it comes.
	ShardDDLPassthrough ShardDDLMode = "passthrough"
)
