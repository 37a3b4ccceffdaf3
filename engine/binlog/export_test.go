package binlog

import "time"

// SetProgressEvery shortens how often readers look at their server and
// log a catch-up, until the returned function restores it.
func SetProgressEvery(d time.Duration) (restore func()) {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}

// StatusSQLMode is the sql_mode in a query event's status variables.
func StatusSQLMode(vars []byte) (uint64, bool) { return statusSQLMode(vars) }
