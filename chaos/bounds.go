package chaos

import "time"

// The documented bounds the run holds braid to (node-memory,
// failover-follow). Package chaos drives braid from outside and imports
// none of its server packages, so the numbers are written here as the
// docs give them; TestBoundsAreBraids compares them with the code's.

// A node's memory bound is the Go memory limit it sets while it owns the
// run's destination (docs/cluster.md: its destinations' bounds + 64 MiB,
// cluster/memory.go): the destination's bound is its store, 64 MiB, and
// per source a 4 MiB queue ahead of the merge, a read-ahead of 512
// binlog events at 24 KiB each (the event and its decoded rows), and,
// with snapshot: initial, 4 MiB of chunks read ahead (docs/capture.md,
// group.MemoryBound). For three sources: 188 MiB. The run holds every
// node to it (any node may own the destination) and measures a node's
// anonymous resident memory (RssAnon): what the Go runtime has mapped
// and touched, which its limit bounds; the bolt file's mapping and the
// binary's text are file pages, outside the limit.
const (
	nodeOverheadBytes       = 64 << 20
	storeBytes              = 64 << 20
	sourceBytes             = 4<<20 + 512*(24<<10) + 4<<20
	memoryBound       int64 = nodeOverheadBytes + storeBytes + 3*sourceBytes
)

// followBound is how long braid may take to read a source from its
// promoted server once a failover moved the source's address to it: the
// reader reconnects with backoff, 100 ms doubling to 5 s
// (docs/capture.md), so its next attempt comes within 5 s of the move,
// and it resumes there by GTID at once (the promoted server holds every
// GTID braid read, docs/sources.md); the other 5 s are room for a
// loaded machine, the handshake and the destination's state catching up.
const followBound = 10 * time.Second

// followWait is how long the run waits for braid to read a promoted
// server before it calls the failover not followed.
const followWait = time.Minute
