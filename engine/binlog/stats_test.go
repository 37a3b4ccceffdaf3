package binlog_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// logLine is one JSON log line, its keys in order.
type logLine struct {
	keys   []string
	values map[string]any
}

// jsonLines parses the lines of a slog JSON handler's output that carry
// message msg, keeping every key as written (a map alone would hide a key
// written twice).
func jsonLines(t *testing.T, out, msg string) []logLine {
	t.Helper()
	var lines []logLine
	for _, raw := range strings.Split(strings.TrimSpace(out), "\n") {
		if raw == "" {
			continue
		}
		l := logLine{values: map[string]any{}}
		dec := json.NewDecoder(strings.NewReader(raw))
		if _, err := dec.Token(); err != nil { // {
			t.Fatalf("log line %q: %v", raw, err)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatalf("log line %q: %v", raw, err)
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("log line %q: %v", raw, err)
			}
			l.keys = append(l.keys, k.(string))
			l.values[k.(string)] = v
		}
		if l.values["msg"] == msg {
			lines = append(lines, l)
		}
	}
	return lines
}

// checkKeysOnce fails when a key repeats on a log line.
func checkKeysOnce(t *testing.T, l logLine) {
	t.Helper()
	seen := map[string]bool{}
	for _, k := range l.keys {
		if seen[k] {
			t.Errorf("key %q twice on log line %v", k, l.keys)
		}
		seen[k] = true
	}
}

// waitStats waits until cond holds for the reader's stats.
func waitStats(t *testing.T, p *binlog.Reader, d time.Duration, what string, cond func(binlog.Stats, time.Time) bool) binlog.Stats {
	t.Helper()
	var s binlog.Stats
	retry.Until(t, d, func() error {
		s = p.Stats()
		if cond(s, time.Now()) {
			return nil
		}
		return fmt.Errorf("waiting for %s: %+v", what, s)
	})
	return s
}

func isIdle(s binlog.Stats, now time.Time) bool {
	lag, idle, behind := s.Lag(now)
	return idle && lag == 0 && !behind
}

// TestReconnectLogLine restarts the server under a reader: once the
// connection streams again, one line says so, naming the source (once),
// how long it was down and the position it resumed from; the stats show
// the error and the connection up again.
func TestReconnectLogLine(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	var logs logline.Buffer
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(&logs, t.Output()), nil)).With("dest", "test")
	r := startReader(t, binlog.Config{Source: source(srv, earliest), Logger: log}, nil)
	r.waitFor(30*time.Second, "1 row", rowsAtLeast(1))
	s := waitStats(t, r.reader, 10*time.Second, "idle", isIdle)
	if !s.Connected || s.Errors != 0 || s.LastError != "" || s.Rows != 1 {
		t.Fatalf("before the restart: %+v, want connected, no error, 1 row", s)
	}

	srv.Restart(t)
	srv.Exec(t, "INSERT INTO shop.orders VALUES (2)")
	r.waitFor(60*time.Second, "2 rows", rowsAtLeast(2))
	s = waitStats(t, r.reader, 10*time.Second, "idle again", isIdle)
	if !s.Connected || s.Errors == 0 || s.LastError == "" || s.LastErrorAt.IsZero() || !s.DownSince.IsZero() {
		t.Errorf("after the restart: %+v, want connected, with the error that ended the connection", s)
	}

	lines := jsonLines(t, logs.String(), "binlog connection restored")
	if len(lines) != 1 {
		t.Fatalf("%d lines saying the connection was restored, want 1; log:\n%s", len(lines), logs.String())
	}
	l := lines[0]
	checkKeysOnce(t, l)
	if l.values["source"] != "a" || l.values["dest"] != "test" {
		t.Errorf("restored line names source %v, dest %v: want a, test", l.values["source"], l.values["dest"])
	}
	if d, ok := l.values["down_for"].(float64); !ok || d <= 0 {
		t.Errorf("restored line: down_for %v, want a positive duration", l.values["down_for"])
	}
	if pos, _ := l.values["pos"].(string); !strings.HasPrefix(pos, "binlog.") {
		t.Errorf("restored line: pos %q, want the binlog position it resumed from", pos)
	}
	for _, l := range jsonLines(t, logs.String(), "binlog connection lost; reconnecting") {
		checkKeysOnce(t, l)
	}
}

// TestCatchUpProgress holds a reader back (its emit blocks, as a full
// store's backpressure would) while the server takes 300 transactions:
// the stats say it is behind, not idle, with a lag that grows; a
// "catching up" line comes every progress period with the position, the
// server's position, the lag and rows/s; released, the reader reads them
// all, says it caught up, and is idle again with lag 0.
func TestCatchUpProgress(t *testing.T) {
	binlog.SetProgressEvery(t, 300*time.Millisecond)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)")
	var logs logline.Buffer
	var gate sync.RWMutex
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(&logs, t.Output()), nil))
	r := startReader(t, binlog.Config{Source: source(srv, earliest), Logger: log}, func(*change.Event) {
		gate.RLock() // waits while the test holds the gate
		defer gate.RUnlock()
	})
	waitStats(t, r.reader, 10*time.Second, "idle", isIdle)

	gate.Lock()
	var sqls []string
	for i := range 300 {
		sqls = append(sqls, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d)", i))
	}
	srv.Exec(t, sqls...)
	file, pos := srv.MasterStatus(t)
	var lags []time.Duration
	end := change.Position{File: file, Pos: pos}
	s := waitStats(t, r.reader, 10*time.Second, "behind by a second, knowing the server's end", func(s binlog.Stats, now time.Time) bool {
		lag, idle, behind := s.Lag(now)
		if behind && !idle {
			lags = append(lags, lag)
		}
		return behind && !idle && lag >= time.Second && s.ServerPos == end
	})
	if s.ReadPos.Compare(s.ServerPos) >= 0 {
		t.Errorf("read position %v not before the server's %v", s.ReadPos, s.ServerPos)
	}
	if lags[len(lags)-1] <= lags[0] {
		t.Errorf("lag did not grow while held back: %v … %v", lags[0], lags[len(lags)-1])
	}
	// Not fatal: the checks after the catch-up say what was logged.
	_ = retry.Wait(t.Context(), 5*time.Second, func() error {
		lines := jsonLines(t, logs.String(), "catching up")
		if len(lines) > 0 && lines[len(lines)-1].values["server_pos"] == fmt.Sprintf("%s:%d", file, pos) {
			return nil
		}
		return errors.New("no catch-up line knows the server's end")
	})
	gate.Unlock()

	r.waitFor(30*time.Second, "300 rows", rowsAtLeast(300))
	s = waitStats(t, r.reader, 10*time.Second, "idle after catching up", isIdle)
	if s.Rows != 300 || s.ReadPos != (change.Position{File: file, Pos: pos}) {
		t.Errorf("after catching up: %d rows read up to %v, want 300 up to %s:%d", s.Rows, s.ReadPos, file, pos)
	}
	progress := jsonLines(t, logs.String(), "catching up")
	if len(progress) == 0 {
		t.Fatalf("no catch-up progress logged; log:\n%s", logs.String())
	}
	for _, l := range progress {
		checkKeysOnce(t, l)
		for _, k := range []string{"source", "pos", "server_pos", "lag", "rows_per_s"} {
			if _, ok := l.values[k]; !ok {
				t.Errorf("catch-up line without %s: %v", k, l.values)
			}
		}
	}
	// The first lines may come while the inserts are still being written;
	// the one the test waited for, while the reader was held, knows the
	// server's end (and the reader caught up too fast for another).
	if last := progress[len(progress)-1]; last.values["server_pos"] != fmt.Sprintf("%s:%d", file, pos) {
		t.Errorf("last catch-up line: server_pos %v, want %s:%d", last.values["server_pos"], file, pos)
	}
	_ = retry.Wait(t.Context(), 5*time.Second, func() error {
		if len(jsonLines(t, logs.String(), "caught up")) == 0 {
			return errors.New("no caught-up line")
		}
		return nil
	})
	if done := jsonLines(t, logs.String(), "caught up"); len(done) != 1 {
		t.Errorf("%d lines saying the reader caught up, want 1; log:\n%s", len(done), logs.String())
	}
}

// TestLagIdleVersusDown checks Stats.Lag's cases on made-up snapshots.
func TestLagIdleVersusDown(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pos := change.Position{File: "binlog.000001", Pos: 1000}
	idle := binlog.Stats{Connected: true, CaughtUp: true, HeartbeatAt: now.Add(-100 * time.Millisecond), Heartbeat: 100 * time.Millisecond,
		ReadPos: pos, ServerPos: pos, LastEventTime: now.Add(-time.Hour)}
	for _, c := range []struct {
		name         string
		s            binlog.Stats
		lag          time.Duration
		idle, behind bool
	}{
		// An idle source's last commit may be an hour old: no lag.
		{"idle", idle, 0, true, false},
		// Heartbeats stopped (a stalled server): the lag runs from the last.
		{"no heartbeat for 5s", with(idle, func(s *binlog.Stats) { s.HeartbeatAt = now.Add(-5 * time.Second) }), 5 * time.Second, false, false},
		// Down: the same, however it went.
		{"down", with(idle, func(s *binlog.Stats) { s.Connected = false; s.HeartbeatAt = now.Add(-3 * time.Second) }), 3 * time.Second, false, false},
		// The server holds more: behind, by the age of what was read.
		{"behind", with(idle, func(s *binlog.Stats) {
			s.CaughtUp = false
			s.HeartbeatAt = now.Add(-time.Minute)
			s.LastEventTime = now.Add(-20 * time.Second)
			s.ServerPos = change.Position{File: "binlog.000002", Pos: 4}
		}), 20 * time.Second, false, true},
		// Streaming live: events a moment old, nothing known unread.
		{"streaming", with(idle, func(s *binlog.Stats) { s.CaughtUp = false; s.LastEventTime = now.Add(-time.Second) }), 100 * time.Millisecond, false, false},
		// Nothing known yet.
		{"new", binlog.Stats{}, 0, false, false},
	} {
		lag, idle, behind := c.s.Lag(now)
		if lag != c.lag || idle != c.idle || behind != c.behind {
			t.Errorf("%s: lag %v idle %v behind %v, want %v %v %v", c.name, lag, idle, behind, c.lag, c.idle, c.behind)
		}
	}
}

func with(s binlog.Stats, f func(*binlog.Stats)) binlog.Stats {
	f(&s)
	return s
}

// TestStatsGTIDsOfLastTransaction: when a transaction's commit is
// emitted, the GTID position the reader's Stats show holds it: the
// position of the last transaction read, not of the one before it (a
// replay reader asks the live one's, group.Destination.ReadGTIDs, for
// what a server must hold). The old code shared the stats at the commit
// event before the reader moved its GTID state past the transaction, so
// they lagged one transaction until the next event or heartbeat (a long
// heartbeat here). MariaDB, and the MySQL test source.
func TestStatsGTIDsOfLastTransaction(t *testing.T) {
	t.Run("mariadb", func(t *testing.T) {
		srv := mysqltest.Start(t)
		srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)")
		r := checkStatsGTIDs(t, source(srv, earliest), func() {
			for i := range 3 {
				srv.Exec(t, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d)", i))
			}
		})
		if got, want := r.reader.Stats().GTIDs.String(), srv.GTIDBinlogPos(t); got != want {
			t.Errorf("the stats show %s; the server is at %s", got, want)
		}
	})
	t.Run("mysql", func(t *testing.T) {
		m := startMySQLHistory(t)
		r := checkStatsGTIDs(t, spec.Source{Name: "m8", Address: m.primary.Addr(), User: "root", Start: earliest}, func() { m.insert(t, 1, 2, 3) })
		if got, want := r.reader.Stats().GTIDs.String(), "11111111-1111-1111-1111-111111111111:1-5"; got != want {
			t.Errorf("the stats show %s; want %s", got, want)
		}
	})
}

// checkStatsGTIDs reads src while write commits three transactions, and
// checks at each commit emitted that the reader's stats show its GTID
// state.
func checkStatsGTIDs(t *testing.T, src spec.Source, write func()) *run {
	t.Helper()
	var mu sync.Mutex
	var reader *binlog.Reader
	var checked int
	var lagged []string
	r := startReader(t, binlog.Config{Source: src, Heartbeat: time.Minute}, func(ev *change.Event) {
		if ev.Type != change.EventCommit {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if reader == nil {
			return
		}
		checked++
		if got := reader.Stats().GTIDs.String(); got != ev.GTIDs.String() {
			lagged = append(lagged, fmt.Sprintf("the commit of %s emitted with the state %s, the stats show %s", ev.GTID, ev.GTIDs, got))
		}
	})
	mu.Lock()
	reader = r.reader
	mu.Unlock()
	write()
	r.waitFor(time.Minute, "three commits checked", func([]*change.Event) bool {
		mu.Lock()
		defer mu.Unlock()
		return checked >= 3
	})
	mu.Lock()
	defer mu.Unlock()
	if len(lagged) > 0 {
		t.Fatalf("the stats lag the transactions emitted:\n%s", strings.Join(lagged, "\n"))
	}
	return r
}
