package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
)

// BenchmarkSourceFailover measures what a consumer of `braid capture`
// waits when its source fails over (issue 42): a MariaDB primary and one
// replica (mysqltest.StartTopology: GTID replication, gtid_strict_mode,
// log_slave_updates), the built braid binary's capture reading
// shop.orders (heartbeat 100 ms), and a load inserting a row every 10 ms
// through a TCP proxy, the application's virtual IP. Five times: the
// proxy stops forwarding (the writes stall), the replica catches up, the
// primary is SIGKILLed, the replica promoted and the proxy switched to
// it; then a marker row is committed on the new primary directly. The
// old primary is then restarted and made a replica of the new one, ready
// for the next switch. When the load stops every row it committed must
// have been printed exactly once, or the benchmark fails.
//
//   - BenchmarkSourceFailover/proxy: capture reads through the same
//     proxy. A switch's gap is the time from the proxy switch to the
//     marker's line on capture's standard output: braid noticing the
//     cut, asking who answers, checking the new server holds its GTIDs,
//     and resuming there by GTID. Target: at most 5 s.
//   - BenchmarkSourceFailover/list: capture reads the servers directly,
//     its source's address listing both (failover_after: 2s). A switch's
//     gap is the time from the SIGKILL to the marker's line: braid
//     retrying the dead server for failover_after, then finding the
//     promoted one in its list. Target: at most failover_after + 5 s.
//
// Reported: the median and the largest of the five gaps in seconds and
// as a ratio to the target (at most 1.0 meets it), printed, never
// asserted. Each part is measured once per process; about 20 s and 35 s
// on a two-core machine.
func BenchmarkSourceFailover(b *testing.B) {
	for _, list := range []bool{false, true} {
		name, part := "proxy", &sourceFailoverParts.proxy
		if list {
			name, part = "list", &sourceFailoverParts.list
		}
		b.Run(name, func(b *testing.B) {
			r, fresh := part.get(b, func(b *testing.B) *sourceFailoverResult { return measureSourceFailover(b, list) })
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(r.median().Seconds(), "gap-median-s")
			b.ReportMetric(r.max().Seconds(), "gap-max-s")
			if fresh {
				b.Logf("%d switches (%s): first row from the new server after median %v, max %v (%.2f and %.2f of the %v target: %s, %s); gaps %v; %d rows committed, every one printed once",
					len(r.gaps), name, r.median().Round(time.Millisecond), r.max().Round(time.Millisecond),
					r.median().Seconds()/r.target.Seconds(), r.max().Seconds()/r.target.Seconds(), r.target,
					metString(r.median() <= r.target), metString(r.max() <= r.target), roundAll(r.gaps), r.committed)
				for _, l := range r.lines {
					b.Log(l)
				}
			}
		})
	}
}

// sourceFailoverResult is what a part of BenchmarkSourceFailover
// measured, and its target.
type sourceFailoverResult struct {
	failoverResult
	target time.Duration
}

var sourceFailoverParts struct {
	proxy, list once[*sourceFailoverResult]
}

const (
	// sourceFailovers is how many switches BenchmarkSourceFailover makes.
	sourceFailovers = 5
	// markerBase is added to a switch's number for its marker row's id,
	// far above the load's ids.
	markerBase = 1_000_000_000
	// listFailoverAfter is the list part's failover_after.
	listFailoverAfter = 2 * time.Second
)

func measureSourceFailover(b *testing.B, list bool) *sourceFailoverResult {
	bin := braidproc.Binary(b)
	tp := mysqltest.StartTopology(b, 1)
	tp.Primary().Exec(b, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)")
	tp.WaitCaughtUp(b)
	vip := tcpproxy.Start(b, tp.Primary().Addr())
	source := fmt.Sprintf("address: '%s'", vip.Addr())
	r := &sourceFailoverResult{target: failoverTarget}
	if list {
		source = fmt.Sprintf("address: ['%s', '%s'], failover_after: %v", tp.Servers[0].Addr(), tp.Servers[1].Addr(), listFailoverAfter)
		r.target = listFailoverAfter + failoverTarget
	}
	specPath := filepath.Join(b.TempDir(), "spec.yaml")
	text := fmt.Sprintf("name: fo\nsources: [{name: a, %s, start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\n", source)
	if err := os.WriteFile(specPath, []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
	printed := startArrivals(b, bin, specPath)
	load := mysqltest.StartLoad(b, vip.Addr(), "shop", "orders", 10*time.Millisecond)
	ctx := b.Context()

	for k := 1; k <= sourceFailovers; k++ {
		if err := printed.waitFlowing(ctx, 30*time.Second); err != nil {
			b.Fatalf("switch %d: %v", k, err)
		}
		old, next := tp.Primary(), tp.Replicas()[0]
		vip.Pause()
		tp.WaitCaughtUp(b)
		killAt := time.Now()
		tp.KillPrimary(b)
		tp.Promote(b, next)
		switchAt := time.Now()
		vip.Switch(next.Addr())
		vip.Resume()
		marker := int64(markerBase + k)
		next.Exec(b, fmt.Sprintf("INSERT INTO shop.orders (id) VALUES (%d)", marker))
		at, err := printed.waitFor(ctx, marker, time.Minute)
		if err != nil {
			b.Fatalf("switch %d: %v", k, err)
		}
		from, what := switchAt, "the proxy switch"
		if list {
			from, what = killAt, "the SIGKILL"
		}
		gap := at.Sub(from)
		r.gaps = append(r.gaps, gap)
		r.lines = append(r.lines, fmt.Sprintf("switch %d: %s to %s; first row from the new server %v after %s", k, old.Addr(), next.Addr(), gap.Round(time.Millisecond), what))
		// The old primary comes back as a replica of the new one, from
		// what its binlog holds.
		old.Restart(b)
		old.Exec(b, "SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos")
		tp.Follow(b, old)
		tp.WaitCaughtUp(b)
	}
	res := load.Stop()
	r.committed = len(res.Committed)
	want := slices.Clone(res.Committed)
	for k := 1; k <= sourceFailovers; k++ {
		want = append(want, int64(markerBase+k))
	}
	if err := printed.exactlyOnce(ctx, want, res.Unknown, time.Minute); err != nil {
		b.Fatal(err)
	}
	measure, target := "source proxy switch → first row from the new server", "ratio <= 1.0"
	if list {
		measure = fmt.Sprintf("source address list, primary SIGKILL → first row from the new server (failover_after %v)", listFailoverAfter)
	}
	peer := fmt.Sprintf("the %v target", r.target)
	Record(Row{Section: "failover", Measure: measure + ", median of 5", Value: r.median().Seconds(), Unit: "s",
		Peer: peer, PeerValue: r.target.Seconds(), Target: target, Met: Met(r.median() <= r.target)})
	Record(Row{Section: "failover", Measure: measure + ", max of 5", Value: r.max().Seconds(), Unit: "s",
		Peer: peer, PeerValue: r.target.Seconds(), Target: target, Met: Met(r.max() <= r.target)})
	return r
}

// arrivals runs `braid capture` and notes when each shop.orders id is
// printed, and how often.
type arrivals struct {
	mu    sync.Mutex
	at    map[int64]time.Time
	count map[int64]int
	last  time.Time
	err   error
	done  chan struct{}
}

func startArrivals(b *testing.B, bin, specPath string) *arrivals {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "capture", "-f", specPath)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	a := &arrivals{at: map[int64]time.Time{}, count: map[int64]int{}, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		scan := bufio.NewScanner(out)
		scan.Buffer(make([]byte, 1<<20), 64<<20)
		for scan.Scan() {
			now := time.Now()
			var m struct {
				Data []map[string]*string `json:"data"`
			}
			if err := json.Unmarshal(scan.Bytes(), &m); err != nil {
				a.fail(fmt.Errorf("bench: capture printed %.200q: %v", scan.Text(), err))
				return
			}
			a.mu.Lock()
			for _, d := range m.Data {
				if s := d["id"]; s != nil {
					id, _ := strconv.ParseInt(*s, 10, 64)
					if a.count[id]++; a.count[id] == 1 {
						a.at[id] = now
					}
					a.last = now
				}
			}
			a.mu.Unlock()
		}
		a.fail(fmt.Errorf("bench: capture's output ended: %v: %s", scan.Err(), stderr.String()))
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.AfterFunc(30*time.Second, cancel)
		_ = cmd.Wait()
		t.Stop()
		cancel()
		<-a.done
		if b.Failed() {
			b.Logf("capture's standard error, last part:\n%s", stderr.String())
		}
	})
	return a
}

func (a *arrivals) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
}

// poll calls check every 20 ms until it says done, the output ends or
// timeout passes.
func (a *arrivals) poll(ctx context.Context, timeout time.Duration, what string, check func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		a.mu.Lock()
		ok, err := check(), a.err
		a.mu.Unlock()
		switch {
		case ok:
			return nil
		case err != nil:
			return err
		case time.Now().After(deadline):
			return fmt.Errorf("bench: %s: not within %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitFlowing waits until rows arrive (the last within 200 ms).
func (a *arrivals) waitFlowing(ctx context.Context, timeout time.Duration) error {
	return a.poll(ctx, timeout, "rows flowing", func() bool { return time.Since(a.last) < 200*time.Millisecond })
}

// waitFor returns when id was printed.
func (a *arrivals) waitFor(ctx context.Context, id int64, timeout time.Duration) (time.Time, error) {
	var at time.Time
	err := a.poll(ctx, timeout, fmt.Sprintf("row %d printed", id), func() bool {
		at = a.at[id]
		return !at.IsZero()
	})
	return at, err
}

// exactlyOnce waits until every id of want was printed, and checks that
// each was printed once, that ids of maybe (whose commit the load never
// learnt) were printed at most once, and nothing else.
func (a *arrivals) exactlyOnce(ctx context.Context, want, maybe []int64, timeout time.Duration) error {
	if err := a.poll(ctx, timeout, "every committed row printed", func() bool {
		for _, id := range want {
			if a.count[id] == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, n := range a.count {
		switch {
		case n > 1:
			return fmt.Errorf("bench: row %d printed %d times", id, n)
		case !slices.Contains(want, id) && !slices.Contains(maybe, id):
			return fmt.Errorf("bench: row %d printed but never committed", id)
		}
	}
	return nil
}
