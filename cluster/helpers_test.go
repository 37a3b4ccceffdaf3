package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// startSource starts a MariaDB server holding app.orders.
func startSource(t *testing.T) *mysqltest.Server {
	t.Helper()
	src := mysqltest.Start(t)
	src.Exec(t, "CREATE DATABASE app", "CREATE TABLE app.orders (id BIGINT PRIMARY KEY, note VARCHAR(40))")
	return src
}

// destSpec is a destination of app.orders on src, from the start of its
// binlog.
func destSpec(name string, src *mysqltest.Server) string {
	return fmt.Sprintf(`
name: %s
sources:
  - {name: a, address: '%s', start: earliest}
tables: ['app\.orders']
heartbeat: 100ms
`, name, src.Addr())
}

// insert commits one transaction per id.
func insert(t *testing.T, src *mysqltest.Server, ids ...int64) {
	t.Helper()
	var sqls []string
	for _, id := range ids {
		sqls = append(sqls, fmt.Sprintf("INSERT INTO app.orders VALUES (%d, 'row %d')", id, id))
	}
	src.Exec(t, sqls...)
}

func span(from, to int64) []int64 {
	var ids []int64
	for id := from; id <= to; id++ {
		ids = append(ids, id)
	}
	return ids
}

// consumer streams a destination with the Go client, as an application
// would, and records the rows that arrive.
type consumer struct {
	mu   sync.Mutex
	seen map[int64]int    // id → times delivered
	seqs map[int64]uint64 // id → its transaction's seq
}

// consume streams dest under clientID through the given nodes' URLs (the
// client moves to the next when one fails, and follows redirects to the
// owner) until the test ends.
func consume(t *testing.T, urls []string, dest, clientID string) *consumer {
	t.Helper()
	tr := &http.Transport{}
	cl, err := client.New(strings.Join(urls, ","), client.WithHTTPClient(&http.Client{Transport: tr}),
		client.WithToken(clustertest.ConsumerUser, clustertest.ConsumerPassword), client.WithBackoff(50*time.Millisecond, 300*time.Millisecond), client.WithAckInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cs := &consumer{seen: map[int64]int{}, seqs: map[int64]uint64{}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cl.Stream(ctx, dest, clientID, func(m client.Message) error {
			if m.Type != "INSERT" {
				return nil
			}
			cs.mu.Lock()
			defer cs.mu.Unlock()
			for _, row := range m.Data {
				id, _ := strconv.ParseInt(*row["id"], 10, 64)
				cs.seen[id]++
				cs.seqs[id] = m.Seq
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("consumer %s: %v", clientID, err)
		}
		tr.CloseIdleConnections()
	})
	return cs
}

// waitRows waits until every id has arrived, then checks that each came
// once and that the seqs follow the ids' commit order, one a transaction.
func (cs *consumer) waitRows(t *testing.T, ids ...int64) {
	t.Helper()
	retry.Until(t, clustertest.Timeout, func() error {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		var missing []int64
		for _, id := range ids {
			if cs.seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("rows %v never arrived", missing)
		}
		return nil
	})
	cs.mu.Lock()
	defer cs.mu.Unlock()
	sorted := slices.Sorted(maps.Keys(cs.seen))
	for i, id := range sorted {
		if n := cs.seen[id]; n != 1 {
			t.Errorf("row %d delivered %d times", id, n)
		}
		if i > 0 && cs.seqs[id] != cs.seqs[sorted[i-1]]+1 {
			t.Errorf("row %d has seq %d after row %d's %d: want one transaction after the other", id, cs.seqs[id], sorted[i-1], cs.seqs[sorted[i-1]])
		}
	}
}

// loads counts the destinations each connected node owns (0 included).
func loads(c *clustertest.Cluster) map[string]int {
	out := map[string]int{}
	for _, n := range c.Connected() {
		out[n.Name] = 0
	}
	for _, a := range c.EnsureSame() {
		out[a.Owner]++
	}
	return out
}
