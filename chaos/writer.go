package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ledger is the writer's record of every transaction it committed, or
// may have committed.
type ledger struct {
	mu  sync.Mutex
	txs []*Tx
}

func (l *ledger) add(tx *Tx) {
	l.mu.Lock()
	l.txs = append(l.txs, tx)
	l.mu.Unlock()
}

// snapshot returns the transactions so far.
func (l *ledger) snapshot() []*Tx {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Tx(nil), l.txs...)
}

// writer commits transactions on one source's two shard tables: INSERTs
// of new ids, UPDATEs and DELETEs of rows it knows, each transaction also
// leaving its id in chaos_ledger.tx. Its rows are its alone, so it knows
// what each holds. Faults that change its tables (TRUNCATE, a burst) take
// its lock, so they come between its transactions.
type writer struct {
	idx    int // the source's index; it holds shard tables 2*idx and 2*idx+1
	addr   string
	ledger *ledger
	clock  func() time.Duration
	next   func() int64 // the next version, unique over the run
	txIDs  *atomic.Int64
	rng    *rand.Rand
	db     *sql.DB

	mu      sync.Mutex
	live    [2]map[int64]int64 // per shard table: id → its version, as committed
	ids     [2][]int64         // live's keys, to pick from
	nextRow [2]int64
	commits atomic.Int64
	errs    atomic.Int64
}

func newWriter(idx int, addr string, seed uint64, l *ledger, clock func() time.Duration, next func() int64, txIDs *atomic.Int64) (*writer, error) {
	db, err := sql.Open("mysql", dsn(addr))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	w := &writer{idx: idx, addr: addr, ledger: l, clock: clock, next: next, txIDs: txIDs,
		rng: rand.New(rand.NewPCG(seed, uint64(idx))), db: db}
	for j := range 2 {
		w.live[j] = map[int64]int64{}
		w.nextRow[j] = preloadRows // ids after the preloaded rows; those are the snapshot's
	}
	return w, nil
}

// table is the shard table j (0, 1) of the writer's source.
func (w *writer) table(j int) string { return schemaOf(2*w.idx+j) + ".orders" }

// run commits about rate transactions a second until ctx ends.
func (w *writer) run(ctx context.Context, rate float64) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		w.commit(ctx, w.ops(1+w.rng.IntN(4)))
		w.mu.Unlock()
	}
}

// op is one statement of a transaction and the change it makes.
type op struct {
	sql    string
	change string
	apply  func() // what it does to live, once committed
	freeze func() // what to forget if the COMMIT's outcome is unknown
}

// ops draws n changes to distinct rows.
func (w *writer) ops(n int) []op {
	var out []op
	used := map[int64]bool{}
	for range n {
		j := w.rng.IntN(2)
		kind := w.rng.IntN(10)
		if len(w.ids[j]) < 20 {
			kind = 0
		}
		switch {
		case kind < 5:
			out = append(out, w.insert(j))
		default:
			id := w.ids[j][w.rng.IntN(len(w.ids[j]))]
			if used[id] {
				out = append(out, w.insert(j))
				continue
			}
			used[id] = true
			if kind < 8 {
				v := w.next()
				out = append(out, op{
					sql:    fmt.Sprintf("UPDATE %s SET v = %d, amount = %s, note = 'n%d' WHERE id = %d", w.table(j), v, amountOf(v), v, id),
					change: change('U', id, v),
					apply:  func() { w.live[j][id] = v },
					freeze: func() { w.forget(j, id) },
				})
			} else {
				old := w.live[j][id]
				out = append(out, op{
					sql:    fmt.Sprintf("DELETE FROM %s WHERE id = %d", w.table(j), id),
					change: change('D', id, old),
					apply:  func() { w.forget(j, id) },
					freeze: func() { w.forget(j, id) },
				})
			}
		}
	}
	return out
}

func (w *writer) insert(j int) op {
	w.nextRow[j]++
	id, v := int64(2*w.idx+j+1)*idStride+w.nextRow[j], w.next()
	return op{
		sql:    fmt.Sprintf("INSERT INTO %s (id, v, amount, note) VALUES (%d, %d, %s, 'n%d')", w.table(j), id, v, amountOf(v), v),
		change: change('I', id, v),
		apply: func() {
			w.live[j][id] = v
			w.ids[j] = append(w.ids[j], id)
		},
		freeze: func() {},
	}
}

// forget drops id from what the writer picks from.
func (w *writer) forget(j int, id int64) {
	delete(w.live[j], id)
	for i, x := range w.ids[j] {
		if x == id {
			w.ids[j][i] = w.ids[j][len(w.ids[j])-1]
			w.ids[j] = w.ids[j][:len(w.ids[j])-1]
			return
		}
	}
}

// commit runs ops as one transaction. A failure before COMMIT rolls it
// back (the server does, when the connection breaks); a failure of the
// COMMIT itself leaves it uncertain, in the ledger, its rows never
// touched again.
func (w *writer) commit(ctx context.Context, ops []op) {
	txID := w.txIDs.Add(1)
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		w.errs.Add(1)
		return
	}
	for _, o := range ops {
		if _, err := tx.ExecContext(ctx, o.sql); err != nil {
			_ = tx.Rollback()
			w.errs.Add(1)
			return
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO chaos_ledger.tx VALUES (%d)", txID)); err != nil {
		_ = tx.Rollback()
		w.errs.Add(1)
		return
	}
	rec := &Tx{Source: sourceNames[w.idx], ID: txID, At: w.clock()}
	for _, o := range ops {
		rec.Changes = append(rec.Changes, o.change)
	}
	if err := tx.Commit(); err != nil {
		rec.Uncertain = true
		for _, o := range ops {
			o.freeze()
		}
		w.ledger.add(rec)
		w.errs.Add(1)
		return
	}
	for _, o := range ops {
		o.apply()
	}
	w.ledger.add(rec)
	w.commits.Add(1)
}

// burst commits one transaction of n INSERTs into one shard table, in
// multi-row statements, retrying until it commits or ctx ends.
func (w *writer) burst(ctx context.Context, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.rng.IntN(2)
	var ops []op
	for range n {
		ops = append(ops, w.insert(j))
	}
	// One statement per 500 rows: the ops' own statements joined.
	var batched []op
	for i := 0; i < len(ops); i += 500 {
		part := ops[i:min(i+500, len(ops))]
		vals := make([]string, len(part))
		for k, o := range part {
			vals[k] = o.sql[strings.Index(o.sql, "VALUES ")+len("VALUES "):]
		}
		batched = append(batched, op{sql: "INSERT INTO " + w.table(j) + " (id, v, amount, note) VALUES " + strings.Join(vals, ", ")})
	}
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		if w.commitBatched(ctx, batched, ops) {
			return
		}
		time.Sleep(time.Second)
	}
}

// commitBatched is commit with statements that differ from the changes'
// own (several changes to a statement). It reports whether the
// transaction reached its COMMIT (committed, or uncertain): not to be
// tried again.
func (w *writer) commitBatched(ctx context.Context, stmts, ops []op) bool {
	txID := w.txIDs.Add(1)
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return false
	}
	for _, s := range append(stmts, op{sql: fmt.Sprintf("INSERT INTO chaos_ledger.tx VALUES (%d)", txID)}) {
		if _, err := tx.ExecContext(ctx, s.sql); err != nil {
			_ = tx.Rollback()
			return false
		}
	}
	rec := &Tx{Source: sourceNames[w.idx], ID: txID, At: w.clock()}
	for _, o := range ops {
		rec.Changes = append(rec.Changes, o.change)
	}
	if err := tx.Commit(); err != nil {
		rec.Uncertain = true
		w.ledger.add(rec)
		return true
	}
	for _, o := range ops {
		o.apply()
	}
	w.ledger.add(rec)
	w.commits.Add(1)
	return true
}

// truncate empties shard table j between two of the writer's
// transactions.
func (w *writer) truncate(ctx context.Context, j int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	for attempt := 0; attempt < 30 && ctx.Err() == nil; attempt++ {
		if _, err = w.db.ExecContext(ctx, "TRUNCATE TABLE "+w.table(j)); err == nil {
			w.live[j] = map[int64]int64{}
			w.ids[j] = nil
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

// resolve asks the source, for each uncertain transaction of this
// writer, whether it committed.
func (w *writer) resolve(ctx context.Context, txs []*Tx) error {
	for _, tx := range txs {
		if !tx.Uncertain || tx.Source != sourceNames[w.idx] {
			continue
		}
		var n int
		if err := w.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM chaos_ledger.tx WHERE id = ?", tx.ID).Scan(&n); err != nil {
			return fmt.Errorf("source %s: asking whether tx %d committed: %w", tx.Source, tx.ID, err)
		}
		tx.Committed = n == 1
	}
	return nil
}
