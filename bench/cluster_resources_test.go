package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// resourcesResult is what the resources part measured.
type resourcesResult struct {
	rows      int           // selected row changes delivered
	elapsed   time.Duration // from creating the destination to the last row
	firstRow  time.Duration // from creating the destination to the first row
	storePeak int64         // the most the owner's store held, bytes
	cpu       time.Duration // the owner's CPU time over elapsed
	peakRSS   uint64        // the owner's VmHWM, bytes
	idleRSS   uint64        // an idle node's VmHWM, bytes
	bound     uint64        // the destination's memory bound, bytes
	lines     []string      // logged after the totals
}

func (r *resourcesResult) cpuPerMillion() float64 { return r.cpu.Seconds() / (float64(r.rows) / 1e6) }
func (r *resourcesResult) rowsPerSec() float64    { return float64(r.rows) / r.elapsed.Seconds() }
func (r *resourcesResult) rssMet() bool           { return r.peakRSS <= r.idleRSS+2*r.bound }

func (r *resourcesResult) log(b *testing.B) {
	b.Logf("owner: %.2f s CPU per million row changes (%.2f s for %d), peak RSS %.1f MiB (target: at most an idle node's %.1f MiB + 2 × the %.0f MiB bound = %.1f MiB: %s); catch-up %.0f rows/s (%v)",
		r.cpuPerMillion(), r.cpu.Seconds(), r.rows, mib(r.peakRSS), mib(r.idleRSS), mib(r.bound),
		mib(r.idleRSS+2*r.bound), metString(r.rssMet()), r.rowsPerSec(), r.elapsed.Round(time.Millisecond))
	for _, l := range r.lines {
		b.Log(l)
	}
}

// errCaughtUp stops a consumer that has every row change it waited for.
var errCaughtUp = errors.New("bench: caught up")

// measureResources writes the workload into fresh shards, then has a
// fresh cluster catch up on it while one Go client consumes, and measures
// the owner.
func measureResources(b *testing.B, bin func() (string, error)) *resourcesResult {
	ws := make([]*Workload, clusterShards)
	began := time.Now()
	srvs, c := clusterFixture(b, bin, func(i int, s *mysqltest.Server) error {
		conn, err := shardConn(s)
		if err != nil {
			return err
		}
		defer conn.Close()
		ws[i], err = Generate(conn, WorkloadConfig{Batches: clusterRounds, FirstShop: 2 * i})
		return err
	})
	setup := time.Since(began)
	want := 0
	var binlog int64
	for _, w := range ws {
		want += w.Selected
		binlog += w.Bytes
	}
	// Strict order lets a source's last transaction go once the others'
	// heartbeats pass its commit time less max_clock_skew: let them.
	time.Sleep(time.Second)

	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	cpuBefore := map[string]time.Duration{}
	for _, n := range c.Nodes {
		cpu, err := ProcCPU(n.PID())
		if err != nil {
			b.Fatal(err)
		}
		cpuBefore[n.Name] = cpu
	}
	start := time.Now()
	const dest = "bulk"
	if err := c.CreateDestination(ctx, clusterSpec(dest, srvs, "earliest", `shop_\d+\..*`)); err != nil {
		b.Fatal(err)
	}
	cl, err := client.New(c.URLs(), client.WithToken(c.Security.Consumer.User, c.Security.Consumer.Password), client.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	var rows int
	var first, last time.Time
	done := make(chan error, 1)
	go func() {
		done <- cl.StreamViews(ctx, dest, "resources", func(m *client.MessageView) error {
			if m.IsDdl {
				return nil
			}
			if rows == 0 {
				first = time.Now()
			}
			rows += m.Rows()
			if rows >= want {
				last = time.Now()
				return errCaughtUp
			}
			return nil
		})
	}()
	owner, epoch, leader, err := c.Owner(ctx, dest, 30*time.Second)
	if err != nil {
		cancel()
		<-done
		b.Fatal(err)
	}
	if err := <-done; !errors.Is(err, errCaughtUp) {
		b.Fatalf("consumer stopped after %d of %d row changes: %v", rows, want, err)
	}
	r := &resourcesResult{rows: rows, elapsed: last.Sub(start), firstRow: first.Sub(start),
		bound: uint64(clusterStoreBytes + clusterShards*(group.DefaultQueueBytes+group.DefaultReadAhead*clusterReadAheadEventBytes))}
	var others []string
	for _, n := range c.Nodes {
		cpu, err := ProcCPU(n.PID())
		if err != nil {
			b.Fatal(err)
		}
		rss, err := ProcPeakRSS(n.PID())
		if err != nil {
			b.Fatal(err)
		}
		cpu -= cpuBefore[n.Name]
		switch {
		case n == owner:
			r.cpu, r.peakRSS = cpu, rss
		case n.Name != leader || r.idleRSS == 0:
			r.idleRSS = rss // prefer a node that does not lead Raft
		}
		if n != owner {
			role := "follower"
			if n.Name == leader {
				role = "leader"
			}
			others = append(others, fmt.Sprintf("%s (%s) %.2f s CPU, peak RSS %.1f MiB", n.Name, role, cpu.Seconds(), mib(rss)))
		}
	}
	st, err := c.State(ctx, owner, dest)
	if err != nil {
		b.Fatal(err)
	}
	r.storePeak = st.Store.PeakBytes
	if rows != want {
		b.Fatalf("the consumer got %d selected row changes, want %d (what the workload wrote)", rows, want)
	}
	ownerRole := "a Raft follower"
	if owner.Name == leader {
		ownerRole = "the Raft leader"
	}
	r.lines = []string{
		fmt.Sprintf("workload: %d shards × %d rounds, %d selected row changes, %.1f MiB of binlog in all; shards, workload and cluster set up in %v",
			clusterShards, clusterRounds, want, mib(uint64(binlog)), setup.Round(time.Millisecond)),
		fmt.Sprintf("first row %v after the create (the new owner serves a lease after its takeover), then %.0f rows/s; the owner's store held at most %.1f of its %d MiB",
			r.firstRow.Round(time.Millisecond), float64(rows)/(r.elapsed-r.firstRow).Seconds(), mib(uint64(r.storePeak)), clusterStoreBytes>>20),
		fmt.Sprintf("owner %s (epoch %d), %s; the other nodes over the catch-up: %s", owner.Name, epoch, ownerRole, strings.Join(others, "; ")),
	}
	Record(Row{Section: "resources", Measure: "braid node CPU per million rows", Value: r.cpuPerMillion(), Unit: "s"})
	Record(Row{Section: "resources", Measure: "braid node peak RSS", Value: mib(r.peakRSS), Unit: "MiB",
		Target: "bounded by the store size (64 MiB) + fixed overhead", Met: Met(r.rssMet())})
	Record(Row{Section: "resources", Measure: "cluster catch-up, 4 shards to one Go client", Value: r.rowsPerSec(), Unit: "rows/s"})
	return r
}
