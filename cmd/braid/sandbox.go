package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/braid-cdc/braid/internal/mariadb"
	"github.com/braid-cdc/braid/spec"
)

// sandbox is two throwaway MariaDB servers, each holding one shard of an
// orders table, with a small order workload running on both, for a
// newcomer's first `braid capture --sandbox`: the stream it prints is the
// merge of two servers' binlogs into one logical table, shop.orders, which
// is what braid is for. One server would show no merge at all.
type sandbox struct {
	srvs   []*mariadb.Server // srvs[i] holds shop_i.orders; source sandboxSources[i] reads it
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sandboxSources names the spec's sources, one per server.
var sandboxSources = []string{"a", "b"}

// sandboxSchema is what the workload writes into on server i: its own shard
// schema, so that the route below has two shard tables to merge.
func sandboxSchema(i int) []string {
	return []string{
		fmt.Sprintf("CREATE DATABASE shop_%d", i),
		fmt.Sprintf(`CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, customer VARCHAR(40) NOT NULL,
		amount DECIMAL(10,2) NOT NULL, status ENUM('new','paid','shipped') NOT NULL DEFAULT 'new',
		created_at DATETIME(6) NOT NULL)`, i),
	}
}

// sandboxSpec is the spec the sandbox runs, written as a user writes one
// (README's tour shows the same shape): every source from its first binlog,
// the shard tables routed to one logical table.
func sandboxSpec(srvs []*mariadb.Server) string {
	var b strings.Builder
	b.WriteString("name: sandbox\nsources:\n")
	for i, s := range srvs {
		fmt.Fprintf(&b, "  - name: %s\n    address: %s\n    start: earliest\n", sandboxSources[i], s.Addr())
	}
	b.WriteString("tables: ['shop_\\d+\\.orders']\nroute:\n  - match: 'shop_\\d+\\.(\\w+)'\n    to: 'shop.$1'\n")
	return b.String()
}

// startSandbox launches the servers and the workload and returns a spec that
// reads them from the start.
func startSandbox(ctx context.Context, log *slog.Logger) (*sandbox, *spec.Spec, error) {
	log.Info("sandbox: starting two private MariaDB servers (the first start initialises a data dir, a few seconds)")
	// The template data dir is made once; the servers then start side by side.
	if err := mariadb.Prepare(ctx); err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	srvs := make([]*mariadb.Server, len(sandboxSources))
	errs := make([]error, len(srvs))
	var wg sync.WaitGroup
	for i := range srvs {
		wg.Go(func() {
			srv, err := mariadb.Launch(ctx, mariadb.Options{ServerID: uint32(i + 1)})
			if err != nil {
				errs[i] = fmt.Errorf("sandbox: server %s: %w", sandboxSources[i], err)
				return
			}
			srvs[i] = srv
			if err := srv.Exec(sandboxSchema(i)...); err != nil {
				errs[i] = fmt.Errorf("sandbox: server %s: create schema: %w", sandboxSources[i], err)
			}
		})
	}
	wg.Wait()
	s := &sandbox{srvs: srvs, cancel: func() {}}
	if err := errors.Join(errs...); err != nil {
		s.close()
		return nil, nil, err
	}
	for i, srv := range srvs {
		log.Info(fmt.Sprintf("sandbox: MariaDB ready; writing orders into shop_%d.orders", i), "source", sandboxSources[i], "addr", srv.Addr(), "data_dir", srv.DataDir)
	}
	ds, err := spec.Parse([]byte(sandboxSpec(srvs)))
	if err != nil {
		s.close()
		return nil, nil, fmt.Errorf("sandbox: its spec: %w", err)
	}
	log.Info("sandbox: shop_0.orders and shop_1.orders are routed to shop.orders; the stream merges both servers")
	wctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.wg.Go(func() { s.workload(wctx, log) })
	return s, ds, nil
}

// workload writes a transaction every 200ms, to each server in turn: a new
// order on that server's shard, and now and then a payment or a
// cancellation of an earlier order of the same shard. Order ids are unique
// across the shards (id i lives on shard i%2), as a sharded application
// keeps them.
func (s *sandbox) workload(ctx context.Context, log *slog.Logger) {
	rng := rand.New(rand.NewPCG(1, 2))
	customers := []string{"ada", "grace", "linus", "barbara", "ken", "margaret"}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	n := len(s.srvs)
	for id := 1; ; id++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		shard := id % n
		stmts := []string{"BEGIN", fmt.Sprintf("INSERT INTO shop_%d.orders (id, customer, amount, created_at) VALUES (%d, '%s', %d.%02d, NOW(6))",
			shard, id, customers[rng.IntN(len(customers))], 5+rng.IntN(200), rng.IntN(100))}
		switch prev := id - n; {
		case prev > 0 && rng.IntN(3) == 0:
			stmts = append(stmts, fmt.Sprintf("UPDATE shop_%d.orders SET status = 'paid' WHERE id = %d", shard, prev))
		case prev > 0 && rng.IntN(8) == 0:
			stmts = append(stmts, fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id = %d", shard, prev))
		}
		if err := s.srvs[shard].Exec(append(stmts, "COMMIT")...); err != nil {
			if ctx.Err() == nil {
				log.Warn("sandbox: workload write failed", "source", sandboxSources[shard], "err", err)
			}
			return
		}
	}
}

// close stops the workload and removes the servers and their data.
func (s *sandbox) close() {
	s.cancel()
	s.wg.Wait()
	for _, srv := range s.srvs {
		if srv != nil {
			srv.Remove()
		}
	}
	mariadb.RemoveTemplate()
}
