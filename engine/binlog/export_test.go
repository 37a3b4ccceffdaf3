package binlog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/spec"
)

// SetProgressEvery shortens how often readers look at their server and
// log a catch-up, until t's cleanup restores it. Call it before starting
// the test's readers: cleanups run last-in first-out, so the readers,
// stopped by theirs, no longer read it when it is restored.
func SetProgressEvery(t testing.TB, d time.Duration) {
	old := progressEvery
	progressEvery = d
	t.Cleanup(func() { progressEvery = old })
}

// StatusSQLMode is the sql_mode in a query event's status variables.
func StatusSQLMode(vars []byte) (uint64, bool) { return statusSQLMode(vars) }

// EventFeed is a Reader that never connects: tests hand it binlog events
// (real servers' bytes), which it parses and handles as a connection's,
// and read what it emits.
type EventFeed struct {
	p  *Reader
	ep *eventParser
}

// NewEventFeed builds a feed for a MySQL source named name reading the
// tables filter selects, in UTC, with the tables created by ddl (each
// "db.sql") known before file.
func NewEventFeed(name, file string, filter *spec.TableFilter, ddl ...string) (*EventFeed, error) {
	p, err := NewReader(Config{Source: spec.Source{Name: name, Address: "127.0.0.1:1"}, Tables: filter})
	if err != nil {
		return nil, err
	}
	p.info = serverInfo{flavor: mysql.MySQLFlavor, location: time.UTC}
	p.schema = schema.NewTracker()
	p.file, p.started = file, true
	p.resume = change.Position{File: file, Pos: 4}
	for i, d := range ddl { // in a file before file
		db, sql, _ := strings.Cut(d, ".")
		if _, err := p.schema.ApplyDDL(change.Position{File: "0", Pos: uint32(4 + i)}, db, sql, 0); err != nil {
			return nil, err
		}
	}
	p.decoder = newDecoder(p)
	if p.zstd, err = newZstd(); err != nil {
		return nil, err
	}
	return &EventFeed{p: p, ep: p.newEventParser(0, p.zstd)}, nil
}

// Parse parses one event as the reader's connection does, without
// handling it.
func (f *EventFeed) Parse(raw []byte) error { return f.ep.parse(raw).err }

// Feed parses one event as the reader's connection does and hands it to
// the reader; a parse error becomes the error the reader's connection
// would stop with.
func (f *EventFeed) Feed(raw []byte, emit func(*change.Event) error) error {
	it := f.ep.parse(raw)
	if it.err != nil {
		return f.p.parseErr(it.e, it.err)
	}
	return f.p.handle(context.Background(), it.e, emit)
}

// Resume is where a new reader would resume.
func (f *EventFeed) Resume() change.Position { return f.p.resume }

// SetAfterListingTables runs f between a reader's listing of the live
// tables and their SHOW CREATE TABLEs, until t's cleanup restores the
// default (as SetProgressEvery: call it before starting the readers).
func SetAfterListingTables(t testing.TB, f func()) {
	old := afterListingTables
	afterListingTables = f
	t.Cleanup(func() { afterListingTables = old })
}

// SetBeforeDump makes f run between a reader's check of its server and
// its binlog connection.
func SetBeforeDump(f func()) (restore func()) {
	beforeDump = f
	return func() { beforeDump = nil }
}

// SetHeldFor changes how long a checked connection is held for its
// reader (CheckAndHold), until t's cleanup restores it; call it before
// the check.
func SetHeldFor(t testing.TB, d time.Duration) {
	old := heldFor
	heldFor = d
	t.Cleanup(func() { heldFor = old })
}
