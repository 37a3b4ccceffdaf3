package binlog_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// runOnce runs a reader until it fails (or 20s pass) and returns its log
// and its error.
func runOnce(t *testing.T, src spec.Source) (string, error) {
	t.Helper()
	var logBuf bytes.Buffer
	p, err := binlog.NewReader(binlog.Config{Destination: "test", Source: src,
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = p.Run(ctx, func(*change.Event) error { return nil })
	if ctx.Err() != nil {
		t.Fatalf("reader did not fail within 20s; log:\n%s", logBuf.String())
	}
	return logBuf.String(), err
}

// oneLineWith checks err is one line mentioning every word.
func oneLineWith(t *testing.T, err error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	t.Logf("error: %s", msg)
}

func TestConnectErrors(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.CreateUser(t, "braid", "s3cret")

	t.Run("wrong password", func(t *testing.T) {
		src := source(srv, earliest)
		src.User, src.Password = "braid", "wrong"
		_, err := runOnce(t, src)
		if !errors.Is(err, binlog.ErrAccessDenied) {
			t.Fatalf("error %v, want ErrAccessDenied", err)
		}
		oneLineWith(t, err, "braid", "password", srv.Addr())
	})
	t.Run("right password", func(t *testing.T) {
		src := source(srv, spec.Start{Kind: spec.StartLatest})
		src.User, src.Password = "braid", "s3cret"
		r := startReader(t, binlog.Config{Source: src}, nil)
		time.Sleep(300 * time.Millisecond)
		srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY)", "INSERT INTO shop.t VALUES (1)")
		r.waitFor(30*time.Second, "a row", rowsAtLeast(1))
	})
	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		_, err = runOnce(t, spec.Source{Name: "a", Address: addr})
		if !errors.Is(err, binlog.ErrUnreachable) {
			t.Fatalf("error %v, want ErrUnreachable", err)
		}
		oneLineWith(t, err, addr, "running")
	})
	t.Run("purged start position", func(t *testing.T) {
		first, _ := srv.MasterStatus(t)
		srv.FlushLogs(t)
		now, _ := srv.MasterStatus(t)
		srv.PurgeLogsTo(t, now)
		_, err := runOnce(t, source(srv, spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: first, Pos: 4}}))
		if !errors.Is(err, binlog.ErrPurged) {
			t.Fatalf("error %v, want ErrPurged", err)
		}
		oneLineWith(t, err, first, "earliest")
	})
}

func TestServerSettingErrors(t *testing.T) {
	servers := mysqltest.StartN(t, 3, mysqltest.WithArgs())
	servers[0].Exec(t, "SET GLOBAL binlog_format = 'STATEMENT'")
	t.Run("binlog_format STATEMENT", func(t *testing.T) {
		_, err := runOnce(t, source(servers[0], earliest))
		if !errors.Is(err, binlog.ErrBinlogFormat) {
			t.Fatalf("error %v, want ErrBinlogFormat", err)
		}
		oneLineWith(t, err, "STATEMENT", "binlog_format=ROW")
	})
	t.Run("binlog_row_image MINIMAL warns", func(t *testing.T) {
		servers[1].Exec(t, "SET GLOBAL binlog_row_image = 'MINIMAL'")
		var logBuf bytes.Buffer
		p, _ := binlog.NewReader(binlog.Config{Source: source(servers[1], spec.Start{Kind: spec.StartLatest}),
			Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := p.Run(ctx, func(*change.Event) error { return nil }); err != nil {
			t.Fatalf("MINIMAL row image must only warn, got %v", err)
		}
		if !strings.Contains(logBuf.String(), "binlog_row_image=FULL") {
			t.Errorf("no warning naming binlog_row_image=FULL in log:\n%s", logBuf.String())
		}
	})
	_ = servers[2]
}

func TestBinlogDisabled(t *testing.T) {
	srv := mysqltest.Start(t, mysqltest.WithArgs("--skip-log-bin"))
	_, err := runOnce(t, source(srv, earliest))
	if !errors.Is(err, binlog.ErrBinlogDisabled) {
		t.Fatalf("error %v, want ErrBinlogDisabled", err)
	}
	oneLineWith(t, err, "--log-bin")
}

func TestSpecErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"bad regex", "name: d\nsources: [{name: a, address: '127.0.0.1:3307'}]\ntables: ['shop_(\\d+.orders']\n", "regex"},
		{"broken yaml", "name: d\nsources: [{name: a, address: \n", "invalid spec"},
		{"unknown field", "name: d\nsource: []\n", "source"},
		{"no sources", "name: d\n", "no sources"},
		{"bad address", "name: d\nsources: [{name: a, address: 'nowhere'}]\n", "host:port"},
		{"duplicate source", "name: d\nsources: [{name: a, address: 'h:1'}, {name: a, address: 'h:2'}]\n", "used twice"},
		{"bad start", "name: d\nsources: [{name: a, address: 'h:1', start: yesterday}]\n", "earliest"},
		{"bad timestamp", "name: d\nsources: [{name: a, address: 'h:1', start: {timestamp: 'noon'}}]\n", "RFC 3339"},
		{"bad ordering", "name: d\nsources: [{name: a, address: 'h:1'}]\nordering: random\n", "strict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.Parse([]byte(c.yaml))
			if err == nil {
				t.Fatalf("spec accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestSpecDefaults(t *testing.T) {
	s, err := spec.Parse([]byte(`
name: shop
sources:
  - name: a
    address: 127.0.0.1:3307
    start: {file: binlog.000002, pos: 120}
  - name: b
    address: 127.0.0.1:3308
    server_id: 4242
    start: earliest
tables: ['shop_\d+\.orders']
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.Sources[0], s.Sources[1]
	if a.User != "root" || a.Start.Kind != spec.StartPosition || a.Start.Pos != (change.Position{File: "binlog.000002", Pos: 120}) {
		t.Errorf("source a = %+v", a)
	}
	if a.ServerID != spec.DeriveServerID("shop", "a") || a.ServerID == spec.DeriveServerID("shop", "b") || a.ServerID < 0x40000000 {
		t.Errorf("derived server id %d", a.ServerID)
	}
	if b.ServerID != 4242 || b.Start.Kind != spec.StartEarliest {
		t.Errorf("source b = %+v", b)
	}
	if s.Ordering != "strict" || time.Duration(s.Heartbeat) != spec.DefaultHeartbeat || time.Duration(s.MaxClockSkew) != spec.DefaultMaxClockSkew {
		t.Errorf("defaults: %+v", s)
	}
	js, err := spec.Parse([]byte(`{"name": "j", "sources": [{"name": "a", "address": "h:1", "start": {"gtid": "0-1-5"}}]}`))
	if err != nil || js.Sources[0].Start.GTID != "0-1-5" {
		t.Errorf("JSON spec: %v %+v", err, js)
	}
}
