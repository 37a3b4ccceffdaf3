package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
)

// Issue 42 point 3: an initial snapshot goes on across a source switch.
// A chunk's high watermark is the end of binlog of the server its SELECT
// ran on; once the reader reads another server, the file:pos of its
// boundaries are the new server's, and comparing the two says nothing.

// churn updates, inserts and deletes rows of shop.items (ids 1 to n at
// the start) through addr until stopped, reconnecting after errors.
type churn struct {
	cancel context.CancelFunc
	done   chan struct{}
	writes chan struct{} // one per write acknowledged, dropped when full
}

func startChurn(t *testing.T, addr string, n int64) *churn {
	ctx, cancel := context.WithCancel(context.Background())
	ch := &churn{cancel: cancel, done: make(chan struct{}), writes: make(chan struct{}, 1<<20)}
	go func() {
		defer close(ch.done)
		rnd := rand.New(rand.NewPCG(1, 2))
		next := n + 1
		var c *client.Conn
		defer func() {
			if c != nil {
				_ = c.Close()
			}
		}()
		for ctx.Err() == nil {
			if c == nil {
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				var err error
				c, err = sqlutf8.Connect(cctx, addr, "root", "", "", nil, func(c *client.Conn) error {
					c.ReadTimeout, c.WriteTimeout = 2*time.Second, 2*time.Second
					return nil
				})
				ccancel()
				if err != nil {
					c = nil
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
			}
			var q string
			switch k := rnd.IntN(10); {
			case k < 6:
				q = fmt.Sprintf("UPDATE shop.items SET v = v + 1, pad = REPEAT(CHAR(97 + v %% 26), 4000) WHERE id = %d", 1+rnd.Int64N(next-1))
			case k < 8:
				q = fmt.Sprintf("INSERT INTO shop.items (id, v) VALUES (%d, 0)", next)
				next++
			default:
				q = fmt.Sprintf("DELETE FROM shop.items WHERE id = %d", 1+rnd.Int64N(next-1))
			}
			r, err := c.Execute(q)
			if err != nil {
				_ = c.Close()
				c = nil
				continue
			}
			r.Close()
			select {
			case ch.writes <- struct{}{}:
			default:
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(ch.stop)
	return ch
}

func (ch *churn) stop() {
	ch.cancel()
	<-ch.done
}

// waitWrites waits until the churn has made n more writes.
func (ch *churn) waitWrites(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-ch.writes:
		case <-time.After(60 * time.Second):
			t.Fatalf("the churn made no write for 60s")
		}
	}
}

// applyItems applies the capture's lines of shop.items to a table kept
// in memory, strictly: an INSERT of a row there, or an UPDATE or DELETE
// of a row not there or whose old values differ, fails the test (a row
// or change twice, or one missed). It returns the rows (id -> v) and how
// many lines it applied.
func applyItems(t *testing.T, c *failoverCapture) (map[int64]string, int) {
	t.Helper()
	out := c.out.String()
	rows := map[int64]string{}
	lines := 0
	for line := range strings.Lines(out) {
		if !strings.HasSuffix(line, "\n") {
			break
		}
		var m struct {
			Type, Table string
			IsDdl       bool
			Data, Old   []map[string]*string
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		lines++
		if m.IsDdl {
			continue
		}
		if m.Table != "items" {
			t.Fatalf("unexpected line: %s", line)
		}
		for i, d := range m.Data {
			id, err := strconv.ParseInt(*d["id"], 10, 64)
			if err != nil {
				t.Fatalf("id of %s: %v", line, err)
			}
			v := *d["v"]
			cur, there := rows[id]
			switch m.Type {
			case "INSERT":
				if there {
					t.Fatalf("line %d inserts id %d, which the stream has already (v=%s): %s\nstderr:\n%s", lines, id, cur, line, c.errb.String())
				}
				rows[id] = v
			case "UPDATE":
				old := cur
				if i < len(m.Old) && m.Old[i]["v"] != nil {
					old = *m.Old[i]["v"]
				}
				if !there || old != cur {
					t.Fatalf("line %d updates id %d from v=%s, the stream has (%v) v=%s: %s\nstderr:\n%s", lines, id, old, there, cur, line, c.errb.String())
				}
				rows[id] = v
			case "DELETE":
				if !there || v != cur {
					t.Fatalf("line %d deletes id %d v=%s, the stream has (%v) v=%s: %s\nstderr:\n%s", lines, id, v, there, cur, line, c.errb.String())
				}
				delete(rows, id)
			default:
				t.Fatalf("unexpected line: %s", line)
			}
		}
	}
	return rows, lines
}

// TestCaptureSnapshotAcrossFailover: a capture with `snapshot: initial`
// whose source fails over to its replica while the snapshot is read in
// small chunks under a write load. Applied in order, the stream makes
// the promoted server's table: every row once, no change twice or lost.
// The replica's binlog files are numbered ahead of the primary's, so the
// old code took the chunks selected on the old primary as passed at once
// on the new server and sent them out before changes they held already,
// which then went out again.
func TestCaptureSnapshotAcrossFailover(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	replica.FlushLogs(t)
	replica.FlushLogs(t)
	const n = 40000
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.items (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, pad TEXT)")
	for base := int64(0); base < n; base += 500 {
		var b strings.Builder
		b.WriteString("INSERT INTO shop.items (id, v) VALUES ")
		for id := base + 1; id <= base+500; id++ {
			if id > base+1 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, 0)", id)
		}
		primary.Exec(t, b.String())
	}
	vip := tcpproxy.Start(t, primary.Addr())
	w := startChurn(t, vip.Addr(), n)
	w.waitWrites(t, 20)
	c := startCaptureSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s'}]\ntables: ['shop\\.items']\nheartbeat: 100ms\nsnapshot: initial\nsnapshot_chunk_rows: 5\n", vip.Addr()))
	retry.Until(t, 120*time.Second, func() error {
		if _, lines := applyItems(t, c); lines < 50 {
			return fmt.Errorf("%d lines printed, want 50 before the failover", lines)
		}
		return nil
	})
	if strings.Contains(c.errb.String(), "snapshot done") {
		t.Fatalf("the snapshot was done before the failover: make it slower\n%s", c.errb.String())
	}

	// The capture's output blocks: its queue fills and its reader stops
	// behind the primary's writes (their fat rows more than the sockets
	// hold), while the snapshot selects the next chunks, each with the
	// primary's end of binlog as its watermark.
	// The source fails over meanwhile: the reader goes on on the promoted
	// replica from far behind those watermarks.
	func() {
		defer c.out.Hold()()
		w.waitWrites(t, 300)
		tp.FailOver(t, vip, replica)
	}()
	w.waitWrites(t, 100)
	if e := c.errb.String(); strings.Contains(e, "snapshot done") && strings.Index(e, "snapshot done") < strings.Index(e, "source switched servers") {
		t.Fatalf("the snapshot was done before the failover: make it slower\n%s", e)
	}
	retry.Until(t, 180*time.Second, func() error {
		if !strings.Contains(c.errb.String(), "snapshot done") {
			return fmt.Errorf("the snapshot is not done")
		}
		return nil
	})
	w.stop()
	want := map[int64]string{}
	for _, r := range replica.Query(t, "SELECT id, v FROM shop.items") {
		id, _ := strconv.ParseInt(r[0], 10, 64)
		want[id] = r[1]
	}
	err := retry.Wait(t.Context(), 60*time.Second, func() error {
		select {
		case code := <-c.code:
			c.code <- code
			t.Fatalf("capture exited (%d); stderr:\n%s", code, c.errb.String())
		default:
		}
		got, _ := applyItems(t, c)
		if !maps.Equal(got, want) {
			return fmt.Errorf("the stream applied has %d rows, the promoted server %d (or values differ)", len(got), len(want))
		}
		return nil
	})
	if err != nil {
		got, _ := applyItems(t, c)
		for id, v := range want {
			if got[id] != v {
				t.Errorf("id %d: stream %q, server %q", id, got[id], v)
			}
		}
		t.Fatalf("%v; stderr:\n%s", err, c.errb.String())
	}
	if !strings.Contains(c.errb.String(), "source switched servers") {
		t.Errorf("no switch line in the log:\n%s", c.errb.String())
	}
}
