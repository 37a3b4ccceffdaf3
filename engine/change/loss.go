package change

// Loss is a loss of transactions a source's reader waits on, or one an
// operator accepted: the server it reads (a promoted one) lacks
// transactions braid already emitted, which an asynchronous failover
// lost. Kept (in the destination's placement log) once accepted, so that
// a restart, a replay or a new owner finding the same loss goes on
// without asking again.
type Loss struct {
	// Lost names the transactions lost, as the reader reports them
	// (binlog.Stats.Lost): MariaDB's per domain, MySQL's as a GTID set.
	Lost string `json:"lost"`
	// From is the source's GTID state braid had emitted (the cursor's
	// when the loss was found). A loss is the same loss only with the
	// same Lost and From.
	From string `json:"from"`
	// Server is the server that lacks them, as a log line names it.
	Server string `json:"server,omitempty"`
	// Txs are the lost transactions braid emitted, in the order it
	// emitted them, as far as the reader remembers them (its last
	// recentTxs): a restart, a new owner or a replay from a position
	// before some of them gives each its seq again as a LOST marker of
	// its own. Not part of what makes a loss the same (Same).
	Txs []LostTx `json:"txs,omitempty"`
}

// Same reports whether l and o are one loss: the same transactions
// missing after the same point.
func (l Loss) Same(o Loss) bool { return l.Lost == o.Lost && l.From == o.From }

// LostTx is one of a loss's transactions as braid emitted it before the
// failover: what a reader whose position lies before it needs to give
// its place in the stream again (binlog: a transaction of its own, a
// LOST marker naming it, at the seq it had).
type LostTx struct {
	// GTID is the transaction's GTID ("1-1-9").
	GTID string `json:"gtid"`
	// Time is its commit time (µs), as the reader gave it.
	Time int64 `json:"time"`
	// Kind is "rows" for a transaction of rows, "ddl" for a DDL (each
	// had a seq), "" for one of no selected table (it had none).
	Kind string `json:"kind,omitempty"`
}
