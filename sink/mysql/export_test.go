package mysql

// NoReplay makes t apply SQL statements only, as a target that refuses
// BINLOG statements does.
func NoReplay(t *Target) { t.replay.off.Store(true) }

// ReplayConns is how many connections t's replay pool holds open.
func ReplayConns(t *Target) int { return t.replayDB.Stats().OpenConnections }
