package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	myclient "github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/internal/mariadb"
	"github.com/braid-cdc/braid/internal/sqlutf8"
)

// The demo's order workload.

// workload writes orders into the six schemas: new orders, payments and
// shipments of earlier ones, a cancellation now and then, and now and then
// one transaction with new orders in both schemas of a server (one seq in
// the stream, two lines). Each transaction is stamped with the real time
// (created_at NOW(3); the binlog's own time). run owns it; done and close
// are called after run returned.
type workload struct {
	shards []*mariadb.Server
	every  time.Duration
	con    *console
	rng    *rand.Rand
	conns  []*myclient.Conn
	nextID int64
	open   []openOrder // orders not shipped or cancelled yet, the oldest first
	txs    int64       // transactions committed
	rows   int64       // rows they changed
	warned time.Time   // when a failed write was last told
}

type openOrder struct {
	id     int64
	schema int
	status string
}

// maxOpen bounds the orders the workload remembers.
const maxOpen = 200

func newWorkload(shards []*mariadb.Server, rate float64, con *console) *workload {
	return &workload{shards: shards, every: time.Duration(float64(time.Second) / rate), con: con,
		rng: rand.New(rand.NewPCG(6, 7)), conns: make([]*myclient.Conn, len(shards))}
}

func (w *workload) run(ctx context.Context) {
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := w.step(); err != nil && ctx.Err() == nil && time.Since(w.warned) > 5*time.Second {
			w.warned = time.Now()
			w.con.sayf("!!! workload: %v (it goes on)", err)
		}
	}
}

// step commits one transaction.
func (w *workload) step() error {
	insert := func(schema int) (string, openOrder) {
		w.nextID++
		o := openOrder{id: w.nextID, schema: schema, status: "new"}
		return fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, %d, %d.%02d, 'new', NOW(3))",
			schema, o.id, 1+w.rng.IntN(50), 5+w.rng.IntN(300), w.rng.IntN(100)), o
	}
	r := w.rng.IntN(100)
	switch {
	case r < 10: // one customer's orders in both schemas of a server
		server := w.rng.IntN(len(w.shards))
		q1, o1 := insert(2 * server)
		q2, o2 := insert(2*server + 1)
		if err := w.exec(server, q1, q2); err != nil {
			return err
		}
		w.remember(o1, o2)
		w.rows += 2
	case r < 45 && len(w.open) > 0: // pay, ship or cancel an earlier order
		k := w.rng.IntN(len(w.open))
		o := w.open[k]
		next, q := "paid", ""
		switch {
		case o.status == "new" && r < 16:
			next, q = "", fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id = %d", o.schema, o.id)
		case o.status == "paid":
			next = "shipped"
		}
		if q == "" {
			q = fmt.Sprintf("UPDATE shop_%d.orders SET status = '%s' WHERE id = %d", o.schema, next, o.id)
		}
		if err := w.exec(o.schema/2, q); err != nil {
			return err
		}
		if next == "paid" {
			w.open[k].status = next
		} else {
			w.open = append(w.open[:k], w.open[k+1:]...)
		}
		w.rows++
	default:
		q, o := insert(w.rng.IntN(2 * len(w.shards)))
		if err := w.exec(o.schema/2, q); err != nil {
			return err
		}
		w.remember(o)
		w.rows++
	}
	w.txs++
	return nil
}

func (w *workload) remember(orders ...openOrder) {
	w.open = append(w.open, orders...)
	if len(w.open) > maxOpen {
		w.open = w.open[len(w.open)-maxOpen:]
	}
}

// exec runs the statements as one transaction on server i, connecting
// first if need be.
func (w *workload) exec(i int, stmts ...string) error {
	c := w.conns[i]
	if c == nil {
		var err error
		if c, err = sqlutf8.Connect(context.Background(), w.shards[i].Addr(), "root", "", "", nil); err != nil {
			return fmt.Errorf("connecting to shard %s: %w", sourceName(i), err)
		}
		w.conns[i] = c
	}
	for _, q := range append(append([]string{"BEGIN"}, stmts...), "COMMIT") {
		r, err := c.Execute(q)
		if err != nil {
			_ = c.Close()
			w.conns[i] = nil
			return fmt.Errorf("shard %s: %s: %w", sourceName(i), abbrevSQL(q, 60), err)
		}
		r.Close()
	}
	return nil
}

// done is what run committed; call after run returned.
func (w *workload) done() (txs, rows int64) { return w.txs, w.rows }

// close ends the workload's sessions; call after run returned.
func (w *workload) close() {
	for _, c := range w.conns {
		if c != nil {
			if c.Quit() != nil {
				_ = c.Close()
			}
		}
	}
}
