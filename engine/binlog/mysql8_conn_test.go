package binlog_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// settingsOf maps a report's settings by name.
func settingsOf(rep binlog.SourceReport) map[string]binlog.Setting {
	m := map[string]binlog.Setting{}
	for _, s := range rep.Settings {
		m[s.Name] = s
	}
	return m
}

// TestMySQLSourceVersionsConnect: braid starts on MySQL 8.0, 8.4 and 9.x
// test sources, asking each for its end of binlog in the statement it
// knows (8.4 and 9.x answer SHOW MASTER STATUS with error 1064), and sends
// nothing else a version does not know; the start-up check names the
// flavor, version and MySQL's own settings; column types are spelled as
// MySQL 8.0.19+ prints them (int, not int(11)).
func TestMySQLSourceVersionsConnect(t *testing.T) {
	never := func(int) bool { return false }
	for _, v := range []string{mysqlsource.Version80, mysqlsource.Version84, mysqlsource.Version9} {
		t.Run(v, func(t *testing.T) {
			s, b := serveWorkload(t, v, shopWorkload(never, never))
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			rep := binlog.Check(ctx, spec.Source{Name: "m8", Address: s.Addr(), User: "root", ServerID: 4242})
			if err := rep.Problems(); err != nil {
				t.Fatalf("problems: %v", err)
			}
			if rep.Flavor != "mysql" || rep.Version != v || rep.Pos.IsZero() {
				t.Errorf("report %+v: want mysql %s and a position", rep, v)
			}
			got := settingsOf(rep)
			for _, name := range []string{"log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "binlog_row_value_options",
				"binlog_transaction_compression", "gtid_mode", "enforce_gtid_consistency", "server_id", "binlog_checksum"} {
				if s, ok := got[name]; !ok || s.Verdict != binlog.SettingOK {
					t.Errorf("%s: %+v (in the report: %v), want ok", name, s, ok)
				}
			}
			last := b.Txns[len(b.Txns)-1]
			evs := runSource(t, s, nil).until(t, last.File, last.End)
			var types []string
			for _, ev := range evs {
				if ev.Type == change.EventRows && len(types) == 0 {
					for _, c := range ev.Rows[0].Table.Columns {
						types = append(types, c.RawType)
					}
				}
			}
			if want := []string{"int", "varchar(32)", "decimal(10,2)", "datetime(6)", "json"}; !slices.Equal(types, want) {
				t.Errorf("column types %q, want %q", types, want)
			}
			// The test source knows no SHOW GRANTS; the check goes on
			// without judging privileges there.
			if unknown := slices.DeleteFunc(s.Unknown(), func(q string) bool { return strings.HasPrefix(q, "SHOW GRANTS") }); len(unknown) > 0 {
				t.Errorf("braid sent statements %s does not know: %q", v, unknown)
			}
		})
	}
}

// TestMySQLSourceSettingProblems: on a MySQL 8.4 source, every setting
// braid cannot honour is named at once with what to change (binlog_format
// STATEMENT, gtid_mode OFF under a start from a GTID set), and the reader stops on them without reading;
// a MINIMAL row image is honoured with a warning.
func TestMySQLSourceSettingProblems(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
	for name, value := range map[string]string{"binlog_format": "STATEMENT", "gtid_mode": "OFF", "enforce_gtid_consistency": "OFF", "binlog_row_image": "MINIMAL"} {
		if err := s.SetVariable(name, value); err != nil {
			t.Fatal(err)
		}
	}
	src := spec.Source{Name: "m8", Address: s.Addr(), User: "root", ServerID: 4242,
		Start: spec.Start{Kind: spec.StartGTID, GTID: s.ServerUUID() + ":1-5"}}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rep := binlog.Check(ctx, src)
	err := rep.Problems()
	t.Logf("problems:\n%v", err)
	lines := strings.Split(strings.TrimSpace(errString(err)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "binlog_format is STATEMENT") || !strings.Contains(lines[1], "gtid_mode is OFF") ||
		!strings.Contains(lines[1], "gtid_mode=ON") {
		t.Errorf("problems:\n%v\nwant binlog_format and gtid_mode, one line each", err)
	}
	if w := settingsOf(rep)["binlog_row_image"]; w.Verdict != binlog.SettingWarning || !strings.Contains(w.Note, "binlog_row_image=FULL") {
		t.Errorf("binlog_row_image MINIMAL: %+v, want a warning naming binlog_row_image=FULL", w)
	}
	_, runErr := runOnce(t, src)
	if !errors.Is(runErr, binlog.ErrBinlogFormat) || !errors.Is(runErr, binlog.ErrSetting) {
		t.Errorf("the reader: %v, want both problems", runErr)
	}
}

// mysqltestCA is the certificate of a CA of the test's own, which signed
// no test source's certificate.
func mysqltestCA(t *testing.T) []byte { return readPEM(t, mysqltest.MakeTLS(t).CA) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestMySQLSourceTLSFullAuth: a MySQL 8.4 source whose
// caching_sha2_password cache is cold asks for full authentication,
// which sends the password: without TLS braid refuses (mysqlauth), with
// the spec's tls block it logs in and reads; a CA that did not sign the
// server's certificate is refused with one line naming tls.ca.
func TestMySQLSourceTLSFullAuth(t *testing.T) {
	never := func(int) bool { return false }
	w := shopWorkload(never, never)
	w.Server.Version = mysqlsource.Version84
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84, ColdAuthCache: true,
		Users: []mysqlsource.User{{Name: "root"}, {Name: "cdc", Password: "pw-cold-cache"}}})
	b, err := s.Serve(w)
	if err != nil {
		t.Fatal(err)
	}
	src := spec.Source{Name: "m8", Address: s.Addr(), User: "cdc", Password: "pw-cold-cache", Start: spec.Start{Kind: spec.StartEarliest}}
	if _, err := runOnce(t, src); !errors.Is(err, binlog.ErrClearText) {
		t.Fatalf("without TLS: %v, want ErrClearText", err)
	}
	other := mysqltestCA(t)
	bad := src
	bad.TLS = &spec.TLS{CA: "other-ca.pem", CAPEM: other}
	if _, err := runOnce(t, bad); !errors.Is(err, binlog.ErrTLS) || !strings.Contains(err.Error(), "tls.ca") {
		t.Fatalf("a foreign CA: %v, want ErrTLS naming tls.ca", err)
	}
	src.TLS = &spec.TLS{CA: "ca.pem", CAPEM: s.CAPEM()}
	last := b.Txns[len(b.Txns)-1]
	p, err := binlog.NewReader(binlog.Config{Destination: "test", Source: src, Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var commits int
	err = p.Run(ctx, func(ev *change.Event) error {
		if ev.Type == change.EventCommit {
			commits++
		}
		if ev.Pos.File == last.File && ev.Pos.Pos >= last.End {
			cancel()
		}
		return nil
	})
	if err != nil || commits == 0 {
		t.Fatalf("over TLS: %v after %d commits", err, commits)
	}
}
