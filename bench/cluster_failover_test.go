package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// failoverResult is what the failover part measured.
type failoverResult struct {
	gaps      []time.Duration // in kill order
	committed int
	rate      float64  // committed transactions a second
	lines     []string // one per kill
}

func (r *failoverResult) sorted() []time.Duration { return slices.Sorted(slices.Values(r.gaps)) }
func (r *failoverResult) median() time.Duration   { return r.sorted()[len(r.gaps)/2] }
func (r *failoverResult) max() time.Duration      { return slices.Max(r.gaps) }

func (r *failoverResult) log(b *testing.B) {
	b.Logf("%d owner kills: gap at the consumer median %v, max %v (target <= %v: %s, %s); gaps %v; %d rows committed at %.0f tx/s, every one received once",
		len(r.gaps), r.median().Round(time.Millisecond), r.max().Round(time.Millisecond), failoverTarget,
		metString(r.median() <= failoverTarget), metString(r.max() <= failoverTarget), roundAll(r.gaps), r.committed, r.rate)
	for _, l := range r.lines {
		b.Log(l)
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// measureFailover kills the owner of a destination under a steady write
// load, failoverKills times, and checks that every committed row arrived
// once.
func measureFailover(b *testing.B, bin func() (string, error)) *failoverResult {
	srvs, c := clusterFixture(b, bin, func(i int, s *mysqltest.Server) error {
		conn, err := shardConn(s)
		if err != nil {
			return err
		}
		defer conn.Close()
		for _, db := range []int{2 * i, 2*i + 1} {
			for _, q := range []string{fmt.Sprintf("CREATE DATABASE shop_%d", db),
				fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))", db)} {
				if _, err := conn.Execute(q); err != nil {
					return fmt.Errorf("%s: %w", q, err)
				}
			}
		}
		return nil
	})
	ctx := b.Context()
	const dest = "failover"
	if err := c.CreateDestination(ctx, clusterSpec(dest, srvs, "latest", `shop_\d+\.orders`)); err != nil {
		b.Fatal(err)
	}
	if _, _, _, err := c.Owner(ctx, dest, 30*time.Second); err != nil {
		b.Fatal(err)
	}
	cs := startGapConsumer(b, c, dest, "failover")
	writers := make([]*paceWriter, len(srvs))
	began := time.Now()
	for i, s := range srvs {
		writers[i] = startPaceWriter(b, s, i, failoverPace)
	}

	r := &failoverResult{}
	for kill := 1; kill <= failoverKills; kill++ {
		time.Sleep(1500 * time.Millisecond)
		owner, epoch, leader, err := c.Owner(ctx, dest, 30*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := localcluster.Poll(ctx, 30*time.Second, "rows flowing to the consumer", func() (bool, string) {
			return time.Since(cs.lastArrival()) < time.Second, fmt.Sprintf("last row at %v", cs.lastArrival())
		}); err != nil {
			b.Fatal(err)
		}
		killedAt := time.Now()
		owner.Kill()
		if err := localcluster.Poll(ctx, 30*time.Second, fmt.Sprintf("rows after kill %d (of owner %s)", kill, owner.Name), func() (bool, string) {
			_, _, ok := cs.gap(killedAt)
			return ok, ""
		}); err != nil {
			b.Fatal(err)
		}
		gap, how, _ := cs.gap(killedAt)
		r.gaps = append(r.gaps, gap)
		newOwner, newEpoch, _, err := c.Owner(ctx, dest, 30*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if newEpoch <= epoch {
			b.Fatalf("kill %d: the takeover by %s kept epoch %d (was %d)", kill, newOwner.Name, newEpoch, epoch)
		}
		role := ""
		if owner.Name == leader {
			role = ", the Raft leader too"
		}
		r.lines = append(r.lines, fmt.Sprintf("kill %d: owner %s (epoch %d%s) SIGKILLed; %s took over (epoch %d); gap at the consumer %v (%s)",
			kill, owner.Name, epoch, role, newOwner.Name, newEpoch, gap.Round(time.Millisecond), how))
		if err := c.Restart(owner); err != nil {
			b.Fatal(err)
		}
		if err := c.WaitReady(ctx, 30*time.Second); err != nil {
			b.Fatalf("%s back in the cluster: %v", owner.Name, err)
		}
	}

	var committed []int64
	for _, w := range writers {
		ids, err := w.halt()
		if err != nil {
			b.Fatal(err)
		}
		committed = append(committed, ids...)
	}
	r.committed = len(committed)
	r.rate = float64(len(committed)) / time.Since(began).Seconds()
	if err := localcluster.Poll(ctx, time.Minute, "every committed row at the consumer", func() (bool, string) {
		return cs.missing(committed) == 0, fmt.Sprintf("%d of %d missing", cs.missing(committed), len(committed))
	}); err != nil {
		b.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // for a repeat, if one were coming
	if err := cs.exactlyOnce(committed); err != nil {
		b.Fatal(err)
	}
	Record(Row{Section: "failover", Measure: "owner SIGKILL → consumer gap, median of 5", Value: r.median().Seconds(), Unit: "s",
		Target: "<= 5 s", Met: Met(r.median() <= failoverTarget)})
	Record(Row{Section: "failover", Measure: "owner SIGKILL → consumer gap, max of 5", Value: r.max().Seconds(), Unit: "s",
		Target: "<= 5 s", Met: Met(r.max() <= failoverTarget)})
	return r
}

// arrival is one message with rows as the failover consumer saw it.
type arrival struct {
	at  time.Time
	ids []int64 // the inserted rows' ids
}

// gapConsumer streams a destination through every node of a cluster with
// the Go client, recording when rows arrive and when the stream dropped.
type gapConsumer struct {
	mu       sync.Mutex
	arrivals []arrival
	drops    []time.Time // the client's "stream dropped" log records
}

// startGapConsumer starts consuming; the consumer stops when b ends.
func startGapConsumer(b *testing.B, c *localcluster.Cluster, dest, clientID string) *gapConsumer {
	b.Helper()
	logf, err := os.Create(filepath.Join(b.TempDir(), "consumer.log"))
	if err != nil {
		b.Fatal(err)
	}
	cs := &gapConsumer{}
	cl, err := client.New(c.URLs(), client.WithToken(c.Security.Consumer.User, c.Security.Consumer.Password), client.WithBackoff(50*time.Millisecond, 500*time.Millisecond),
		client.WithAckInterval(100*time.Millisecond),
		client.WithLogger(slog.New(&dropRecorder{Handler: slog.NewTextHandler(logf, nil), cs: cs})))
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cl.Stream(ctx, dest, clientID, func(m client.Message) error {
			if m.Type != "INSERT" {
				return nil
			}
			a := arrival{at: time.Now()}
			for _, row := range m.Data {
				if v := row["id"]; v != nil {
					id, _ := strconv.ParseInt(*v, 10, 64)
					a.ids = append(a.ids, id)
				}
			}
			cs.mu.Lock()
			cs.arrivals = append(cs.arrivals, a)
			cs.mu.Unlock()
			return nil
		})
	}()
	b.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			b.Errorf("consumer: %v", err)
		}
		logf.Close()
		if b.Failed() {
			log, _ := os.ReadFile(logf.Name())
			b.Logf("consumer log:\n%s", log)
		}
	})
	return cs
}

// dropRecorder passes the Go client's log records on and notes when it
// reports a dropped stream.
type dropRecorder struct {
	slog.Handler
	cs *gapConsumer
}

func (h *dropRecorder) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "stream dropped") {
		h.cs.mu.Lock()
		h.cs.drops = append(h.cs.drops, r.Time)
		h.cs.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

// lastArrival is when the latest rows came.
func (cs *gapConsumer) lastArrival() time.Time {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.arrivals) == 0 {
		return time.Time{}
	}
	return cs.arrivals[len(cs.arrivals)-1].at
}

// gap returns the gap a kill at killedAt left, once rows came after it:
// from the last rows before the stream dropped to the first after. Rows
// the killed owner sent before it died may be read a moment after the
// kill; the drop separates them from the new owner's. Without a drop
// record the kill's time separates them (how says which).
func (cs *gapConsumer) gap(killedAt time.Time) (gap time.Duration, how string, ok bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cut, how := killedAt, "split at the kill: no drop logged"
	for _, d := range cs.drops {
		if !d.Before(killedAt) {
			cut, how = d, fmt.Sprintf("stream dropped %v after the kill", d.Sub(killedAt).Round(time.Millisecond))
			break
		}
	}
	var before time.Time
	for _, a := range cs.arrivals {
		if !a.at.After(cut) {
			before = a.at
			continue
		}
		return a.at.Sub(before), how, true
	}
	return 0, how, false
}

// missing counts the committed rows not received yet.
func (cs *gapConsumer) missing(committed []int64) int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	have := map[int64]bool{}
	for _, a := range cs.arrivals {
		for _, id := range a.ids {
			have[id] = true
		}
	}
	n := 0
	for _, id := range committed {
		if !have[id] {
			n++
		}
	}
	return n
}

// exactlyOnce checks that every committed row was received once and
// nothing else was.
func (cs *gapConsumer) exactlyOnce(committed []int64) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	seen := map[int64]int{}
	for _, a := range cs.arrivals {
		for _, id := range a.ids {
			seen[id]++
		}
	}
	var problems []error
	for _, id := range committed {
		switch n := seen[id]; n {
		case 1:
		case 0:
			problems = append(problems, fmt.Errorf("committed row %d never arrived", id))
		default:
			problems = append(problems, fmt.Errorf("row %d arrived %d times", id, n))
		}
		delete(seen, id)
	}
	for id := range seen {
		problems = append(problems, fmt.Errorf("row %d arrived but was not committed", id))
	}
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Errorf("… %d problems in all", len(problems)))
	}
	return errors.Join(problems...)
}

// paceWriter inserts one row a transaction into a shard's two schemas at
// a steady pace, recording the ids committed.
type paceWriter struct {
	mu        sync.Mutex
	committed []int64
	stop      chan struct{}
	done      chan struct{}
	err       error
}

// startPaceWriter starts writing into shard i; it stops when b ends, if
// halt has not stopped it before.
func startPaceWriter(b *testing.B, srv *mysqltest.Server, shard int, pace time.Duration) *paceWriter {
	b.Helper()
	conn := srv.Conn(b)
	w := &paceWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(pace)
		defer t.Stop()
		for k := 1; ; k++ {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			db := 2*shard + k%2
			id := int64(shard)*1_000_000 + int64(k)
			if _, err := conn.Execute(fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, %d, 'k%d')", db, id, db, k)); err != nil {
				w.err = fmt.Errorf("writer of shard %d: %w", shard, err)
				return
			}
			w.mu.Lock()
			w.committed = append(w.committed, id)
			w.mu.Unlock()
		}
	}()
	b.Cleanup(func() { w.halt() })
	return w
}

// halt stops the writer and returns the ids it committed.
func (w *paceWriter) halt() ([]int64, error) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.committed), w.err
}
