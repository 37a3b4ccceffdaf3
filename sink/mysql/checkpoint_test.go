package mysql_test

import (
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/sink"
	mysqlsink "github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
)

// TestOlderCheckpointsAdopted: a checkpoint table an older braid made,
// keyed by sink name alone, is migrated when a sink opens it. Its rows go
// to the first destination that reads a sink of their name, as no other
// has rows under it; another destination's sink of that name starts with
// none. An older braid's insert, without a destination, now fails. When
// rows without a destination turn up beside a destination's own, the
// sink reads neither and says how to settle it, and does what it said.
func TestOlderCheckpointsAdopted(t *testing.T) {
	db, name := targetDB(t)
	meta := name + "_meta"
	for _, q := range []string{
		"CREATE DATABASE " + meta,
		"CREATE TABLE " + meta + ".sink_checkpoint (sink VARCHAR(128) NOT NULL, worker INT NOT NULL, seq BIGINT UNSIGNED NOT NULL, idx INT NOT NULL, PRIMARY KEY (sink, worker))",
		"INSERT INTO " + meta + ".sink_checkpoint VALUES ('copy', 0, 5, 1), ('copy', 1, 9, 0), ('copy', -1, 2, 0), ('other', 0, 3, 0)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	sk := spec.Sink{Name: "copy", Type: "mysql", Address: targetAddr, User: "root", Workers: 2, MetaDatabase: meta}
	open := func(dest string) *mysqlsink.Target {
		tg, err := mysqlsink.Open(t.Context(), sk, dest, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tg.Close() })
		return tg
	}
	east, west := open("east"), open("west")
	if pts, err := east.Checkpoints(t.Context(), 2); err != nil || pts[0] != (sink.Point{Seq: 5, Idx: 1}) || pts[1] != (sink.Point{Seq: 9}) || east.Routing() != sink.RouteByKey {
		t.Errorf("east adopts the older checkpoints: %v, %v, routing %d", pts, err, east.Routing())
	}
	if pts, err := west.Checkpoints(t.Context(), 2); err != nil || pts[0] != (sink.Point{}) || pts[1] != (sink.Point{}) {
		t.Errorf("west, opened after: %v, %v, want none", pts, err)
	}
	if n := sinkRows(t, db, meta, "''"); n != 1 {
		t.Errorf("%d rows left without a destination, want other's 1", n)
	}
	if _, err := db.Exec("INSERT INTO " + meta + ".sink_checkpoint (sink, worker, seq, idx) VALUES ('copy', 3, 1, 0)"); err == nil {
		t.Error("an older braid's insert, without a destination, went in")
	}

	if _, err := db.Exec("INSERT INTO " + meta + ".sink_checkpoint VALUES ('', 'copy', 0, 100, 0)"); err != nil {
		t.Fatal(err)
	}
	_, err := east.Checkpoints(t.Context(), 2)
	if err == nil || !strings.Contains(err.Error(), "whose the old ones are is unknown") {
		t.Fatalf("rows without a destination beside east's and west's: %v", err)
	}
	t.Log(err)
	// As the line says, for rows that are not east's.
	del := err.Error()[strings.LastIndex(err.Error(), "DELETE FROM"):]
	if _, err := db.Exec(del); err != nil {
		t.Fatal(del, err)
	}
	if pts, err := east.Checkpoints(t.Context(), 2); err != nil || pts[1] != (sink.Point{Seq: 9}) {
		t.Errorf("after %s: %v, %v", del, pts, err)
	}
}

// sinkRows counts the checkpoint rows in meta of dest (a literal).
func sinkRows(t *testing.T, db *sql.DB, meta, dest string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + meta + ".sink_checkpoint WHERE dest = " + dest).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMigrationRace: sinks of several destinations that open an older
// checkpoint table at once (a node starting them all) all open it, and
// it ends migrated once.
func TestMigrationRace(t *testing.T) {
	db, name := targetDB(t)
	meta := name + "_meta"
	for _, q := range []string{
		"CREATE DATABASE " + meta,
		"CREATE TABLE " + meta + ".sink_checkpoint (sink VARCHAR(128) NOT NULL, worker INT NOT NULL, seq BIGINT UNSIGNED NOT NULL, idx INT NOT NULL, PRIMARY KEY (sink, worker))",
		"INSERT INTO " + meta + ".sink_checkpoint VALUES ('copy', 0, 5, 1)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	errs := make(chan error, 6)
	for i := range cap(errs) {
		go func() {
			tg, err := mysqlsink.Open(t.Context(), spec.Sink{Name: "copy", Type: "mysql", Address: targetAddr, User: "root", Workers: 1, MetaDatabase: meta}, fmt.Sprintf("d%d", i), nil)
			if err == nil {
				_, err = tg.Checkpoints(t.Context(), 1)
				tg.Close()
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	var owners int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + meta + ".sink_checkpoint WHERE worker = 0 AND seq = 5 AND dest <> ''").Scan(&owners); err != nil || owners != 1 {
		t.Errorf("the older row went to %d destinations (%v), want 1", owners, err)
	}
}
