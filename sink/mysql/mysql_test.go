package mysql_test

import (
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/sink"
	mysqlsink "github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// targetAddr is the machine's MariaDB, the target of the tests; each test
// has a database of its own, dropped after.
const targetAddr = "127.0.0.1:3306"

func targetDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses MariaDB on " + targetAddr)
	}
	db, err := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err != nil {
		t.Skipf("no MariaDB on %s to apply to: %v", targetAddr, err)
	}
	name := fmt.Sprintf("braid_sink_%d_%d", os.Getpid(), rand.IntN(1e6))
	t.Cleanup(func() {
		db.Exec("DROP DATABASE IF EXISTS " + name)
		db.Exec("DROP DATABASE IF EXISTS " + name + "_meta")
		db.Close()
	})
	return db, name
}

// applyOnce runs ds's first sink over ds's stream until the test ends.
func applyOnce(t *testing.T, ds *spec.Spec) *sink.Runner {
	t.Helper()
	r, _ := applyWith(t, ds, false)
	return r
}

// applyWith is applyOnce, returning the target too; sqlOnly keeps the
// target from replaying binlog events.
func applyWith(t *testing.T, ds *spec.Spec, sqlOnly bool) (*sink.Runner, *mysqlsink.Target) {
	t.Helper()
	return applyLogged(t, ds, sqlOnly, nil)
}

// applyLogged is applyWith, the target logging to targetLog (nil: none).
func applyLogged(t *testing.T, ds *spec.Spec, sqlOnly bool, targetLog *slog.Logger) (*sink.Runner, *mysqlsink.Target) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	client := sink.ClientID(ds.Sinks[0].Name)
	p, err := stream.StartPipeline(t.Context(), stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s, err := sinkrun.Open(t.Context(), ds.Sinks[0], "shop", targetLog)
	if err != nil {
		t.Fatal(err)
	}
	target := sinkrun.Client[*mysqlsink.Target](s)
	if sqlOnly {
		mysqlsink.NoReplay(target)
	}
	r := sinkrun.NewRunner(ds, ds.Sinks[0], s, p.Store, nil, log)
	stop := sinkrun.Go(t.Context(), r)
	t.Cleanup(func() { stop(); s.Close() })
	return r, target
}
