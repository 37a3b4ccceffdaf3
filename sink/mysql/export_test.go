package mysql

// NoReplay makes t apply SQL statements only, as a target that refuses
// BINLOG statements does.
func NoReplay(t *Target) { t.replay.off.Store(true) }
