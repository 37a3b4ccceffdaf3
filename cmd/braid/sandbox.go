package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/braid-cdc/braid/internal/mariadb"
	"github.com/braid-cdc/braid/spec"
)

// sandbox is a throwaway MariaDB with a small order workload running, for a
// newcomer's first `braid capture --sandbox`.
type sandbox struct {
	srv    *mariadb.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sandboxSchema is what the sandbox workload writes into.
var sandboxSchema = []string{
	"CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
	`CREATE TABLE shop_0.orders (id INT PRIMARY KEY, customer VARCHAR(40) NOT NULL,
		amount DECIMAL(10,2) NOT NULL, status ENUM('new','paid','shipped') NOT NULL DEFAULT 'new',
		created_at DATETIME(6) NOT NULL)`,
	"CREATE TABLE shop_1.orders LIKE shop_0.orders",
}

// startSandbox launches the server and the workload and returns a spec that
// reads it from the start.
func startSandbox(ctx context.Context, log *slog.Logger) (*sandbox, *spec.Spec, error) {
	log.Info("sandbox: starting a private MariaDB (the first start initialises a data dir, a few seconds)")
	srv, err := mariadb.Launch(ctx, mariadb.Options{ServerID: 1})
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := srv.Exec(sandboxSchema...); err != nil {
		srv.Remove()
		return nil, nil, fmt.Errorf("sandbox: create schema: %w", err)
	}
	log.Info("sandbox: MariaDB ready; writing orders into shop_0.orders and shop_1.orders", "addr", srv.Addr(), "data_dir", srv.DataDir)
	wctx, cancel := context.WithCancel(ctx)
	s := &sandbox{srv: srv, cancel: cancel}
	s.wg.Go(func() { s.workload(wctx, log) })
	spec := spec.Spec{
		Name:    "sandbox",
		Sources: []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Tables:  []string{`shop_\d+\.orders`},
	}.WithDefaults()
	return s, &spec, spec.Validate()
}

// workload writes a transaction every 200ms: a new order on one shard, and
// now and then a payment or a cancellation of an earlier one.
func (s *sandbox) workload(ctx context.Context, log *slog.Logger) {
	rng := rand.New(rand.NewPCG(1, 2))
	customers := []string{"ada", "grace", "linus", "barbara", "ken", "margaret"}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for id := 1; ; id++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		shard := id % 2
		stmts := []string{"BEGIN", fmt.Sprintf("INSERT INTO shop_%d.orders (id, customer, amount, created_at) VALUES (%d, '%s', %d.%02d, NOW(6))",
			shard, id, customers[rng.IntN(len(customers))], 5+rng.IntN(200), rng.IntN(100))}
		switch prev := id - 2; {
		case prev > 0 && rng.IntN(3) == 0:
			stmts = append(stmts, fmt.Sprintf("UPDATE shop_%d.orders SET status = 'paid' WHERE id = %d", shard, prev))
		case prev > 0 && rng.IntN(8) == 0:
			stmts = append(stmts, fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id = %d", shard, prev))
		}
		if err := s.srv.Exec(append(stmts, "COMMIT")...); err != nil {
			if ctx.Err() == nil {
				log.Warn("sandbox: workload write failed", "err", err)
			}
			return
		}
	}
}

// close stops the workload and removes the server and its data.
func (s *sandbox) close() {
	s.cancel()
	s.wg.Wait()
	s.srv.Remove()
	mariadb.RemoveTemplate()
}
