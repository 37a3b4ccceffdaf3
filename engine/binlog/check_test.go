package binlog_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestCheckReport: the start-up check of a well-configured MariaDB names
// its flavor, version and each setting braid relies on, all ok, and the
// server's end of binlog.
func TestCheckReport(t *testing.T) {
	srv := mysqltest.Start(t)
	rep := binlog.Check(t.Context(), spec.Source{Name: "a", Address: srv.Addr(), ServerID: 4242})
	if err := rep.Problems(); err != nil {
		t.Fatalf("problems on a good server: %v", err)
	}
	if rep.Flavor != "mariadb" || !strings.Contains(rep.Version, "MariaDB") || rep.Pos.IsZero() {
		t.Errorf("report %+v: want flavor mariadb, its version and a position", rep)
	}
	got := map[string]binlog.Setting{}
	for _, s := range rep.Settings {
		got[s.Name] = s
	}
	for _, name := range []string{"log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id", "binlog_checksum", "log_bin_compress", "privileges"} {
		s, ok := got[name]
		if !ok {
			t.Errorf("no %s in the report: %+v", name, rep.Settings)
			continue
		}
		if s.Verdict != binlog.SettingOK {
			t.Errorf("%s: %+v, want ok", name, s)
		}
	}
	if _, ok := got["gtid_mode"]; ok {
		t.Errorf("a MariaDB report names MySQL's gtid_mode: %+v", got["gtid_mode"])
	}
}

// TestCheckEveryProblem: PinStarts (braid destination create, braid
// serve) reports every problem of every source at once, one line each,
// each naming its source, the setting and what to change: a source whose
// binlog_format is STATEMENT and whose server_id is braid's own replica
// id, one whose user lacks REPLICATION SLAVE, and one nothing listens on.
// A MINIMAL row image is honoured, not a problem.
func TestCheckEveryProblem(t *testing.T) {
	servers := mysqltest.StartN(t, 2)
	servers[0].Exec(t, "SET GLOBAL binlog_format = 'STATEMENT'", "SET GLOBAL server_id = 4242", "SET GLOBAL binlog_row_image = 'MINIMAL'")
	servers[1].Exec(t, "CREATE USER reader@'%' IDENTIFIED BY 'pw'", "GRANT SELECT, BINLOG MONITOR ON *.* TO reader@'%'")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	ds := spec.Spec{Name: "d", Sources: []spec.Source{
		{Name: "a", Address: servers[0].Addr(), ServerID: 4242},
		{Name: "b", Address: servers[1].Addr(), User: "reader", Password: "pw", ServerID: 7},
		{Name: "c", Address: closed, ServerID: 8},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = group.PinStarts(ctx, &ds)
	if err == nil {
		t.Fatal("PinStarts accepted three broken sources")
	}
	lines := strings.Split(err.Error(), "\n")
	t.Logf("problems:\n%s", err)
	want := [][]string{
		{"source a", "binlog_format is STATEMENT", "binlog_format=ROW"},
		{"source a", "server_id is 4242", "set server_id in the spec"},
		{"source b", "REPLICATION SLAVE", "GRANT"},
		{"source c", closed},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for i, words := range want {
		for _, w := range words {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q does not name %q", i+1, lines[i], w)
			}
		}
	}
	if strings.Contains(err.Error(), "binlog_row_image") {
		t.Errorf("a MINIMAL row image is reported as a problem")
	}
	if !errors.Is(err, binlog.ErrBinlogFormat) || !errors.Is(err, binlog.ErrSetting) || !errors.Is(err, binlog.ErrUnreachable) {
		t.Errorf("the joined error does not wrap each problem's sentinel: %v", err)
	}
	if strings.Contains(err.Error(), "pw") && strings.Contains(err.Error(), "'pw'") {
		t.Errorf("a password in the problems: %v", err)
	}
}
