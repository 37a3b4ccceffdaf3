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
}

// Same reports whether l and o are one loss: the same transactions
// missing after the same point.
func (l Loss) Same(o Loss) bool { return l.Lost == o.Lost && l.From == o.From }
