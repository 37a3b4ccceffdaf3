package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/mariadb"
)

// TargetArgs are the settings of the fresh servers BenchmarkSinkApply
// applies to, both MariaDB's replica and braid's like-for-like target, on
// top of internal/mariadb's defaults: a 128 MiB buffer pool, a 96 MiB redo
// log, a flush of the redo log at every commit, doublewrite on, O_DIRECT,
// no binary log, as the machine's MariaDB on 3306 runs. SHOW GLOBAL
// VARIABLES of such a server differs from 3306's only in paths, ports and
// ids, the relay log's name, binlog_format (ROW; no binary log is written
// either way), a 4 MiB ibtmp1 and the buffer pool not dumped at shutdown
// nor loaded at start-up (internal/mariadb's defaults, none of which an
// apply touches).
var TargetArgs = []string{
	"--skip-log-bin",
	"--log-slave-updates=OFF",
	"--innodb-buffer-pool-size=128M",
	"--innodb-log-file-size=96M",
	"--innodb-flush-log-at-trx-commit=1",
	"--innodb-doublewrite=ON",
	"--innodb-flush-method=O_DIRECT",
	"--skip-slave-start",
	"--relay-log=relay",
}

// targetServerID numbers the fresh servers, apart from mysqltest's (100 up).
var targetServerID atomic.Uint32

// LaunchTarget starts a fresh MariaDB with TargetArgs and a server_id no
// other server of the process has. The caller removes it.
func LaunchTarget(ctx context.Context) (*mariadb.Server, error) {
	id := 900 + targetServerID.Add(1)
	return mariadb.Launch(ctx, mariadb.Options{ServerID: id, Args: TargetArgs})
}

// ReplicaSource is one master of a multi-source replica: a connection
// name, the master's address and the part of its binlog to apply.
type ReplicaSource struct {
	Name       string
	Addr       string
	Start, End change.Position
}

// ReplicaConfig says how a replica applies.
type ReplicaConfig struct {
	// Threads is slave_parallel_threads: 0 is serial (one SQL thread per
	// connection, so still one per source), more is a pool of workers the
	// connections share.
	Threads int
	// Mode is slave_parallel_mode of every connection: "conservative"
	// (only what the master group-committed together runs at once) or
	// "optimistic" (every transaction may, a conflict rolls it back and
	// retries). Unused when Threads is 0.
	Mode string
	// WildDoTable is every connection's replicate_wild_do_table, e.g.
	// `shop\_%.%`; empty: no filter.
	WildDoTable string
}

// String names the configuration: "serial", "4 threads optimistic".
func (c ReplicaConfig) String() string {
	if c.Threads == 0 {
		return "serial"
	}
	return fmt.Sprintf("%d threads %s", c.Threads, c.Mode)
}

// Replicate makes srv, a fresh server, a multi-source replica of the
// sources (CHANGE MASTER 'name' TO ... MASTER_LOG_FILE, MASTER_LOG_POS
// each source's Start, MASTER_USE_GTID=no, user root without a password),
// starts every connection at once with START ALL SLAVES and waits until
// each connection has executed its source's binlog to End (SHOW ALL
// SLAVES STATUS: Relay_Master_Log_File and Exec_Master_Log_Pos, polled
// every 5 ms). It returns the time from START ALL SLAVES to the last
// connection reaching its End. A connection that stops with an error
// fails it, with the error.
func Replicate(ctx context.Context, srv *mariadb.Server, sources []ReplicaSource, cfg ReplicaConfig) (time.Duration, error) {
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	exec := func(q string) error {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("bench: replica %s: %s: %w", srv.Addr(), q, err)
		}
		return nil
	}
	if err := exec("SET GLOBAL slave_parallel_threads = " + strconv.Itoa(cfg.Threads)); err != nil {
		return 0, err
	}
	for _, s := range sources {
		host, port, ok := strings.Cut(s.Addr, ":")
		if !ok {
			return 0, fmt.Errorf("bench: replica source %s: address %q is not host:port", s.Name, s.Addr)
		}
		if err := exec(fmt.Sprintf("CHANGE MASTER '%s' TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='root', MASTER_PASSWORD='', MASTER_LOG_FILE='%s', MASTER_LOG_POS=%d, MASTER_USE_GTID=no",
			s.Name, host, port, s.Start.File, s.Start.Pos)); err != nil {
			return 0, err
		}
		// The per-connection variables are set for the session's default
		// connection.
		if err := exec(fmt.Sprintf("SET @@default_master_connection = '%s'", s.Name)); err != nil {
			return 0, err
		}
		if cfg.WildDoTable != "" {
			if err := exec("SET GLOBAL replicate_wild_do_table = '" + strings.ReplaceAll(cfg.WildDoTable, `\`, `\\`) + "'"); err != nil {
				return 0, err
			}
		}
		if cfg.Mode != "" {
			if err := exec("SET GLOBAL slave_parallel_mode = '" + cfg.Mode + "'"); err != nil {
				return 0, err
			}
		}
	}
	if err := exec("SET @@default_master_connection = ''"); err != nil {
		return 0, err
	}
	// Check that each connection took its settings before timing it.
	st, err := slavesStatus(ctx, conn)
	if err != nil {
		return 0, err
	}
	if len(st) != len(sources) {
		return 0, fmt.Errorf("bench: replica %s: %d connections, want %d", srv.Addr(), len(st), len(sources))
	}
	for _, r := range st {
		if r["Replicate_Wild_Do_Table"] != cfg.WildDoTable {
			return 0, fmt.Errorf("bench: replica connection %s: replicate_wild_do_table %q, want %q", r["Connection_name"], r["Replicate_Wild_Do_Table"], cfg.WildDoTable)
		}
		if cfg.Mode != "" && r["Parallel_Mode"] != cfg.Mode {
			return 0, fmt.Errorf("bench: replica connection %s: slave_parallel_mode %q, want %q", r["Connection_name"], r["Parallel_Mode"], cfg.Mode)
		}
	}
	ends := make(map[string]change.Position, len(sources))
	for _, s := range sources {
		ends[s.Name] = s.End
	}
	began := time.Now()
	if err := exec("START ALL SLAVES"); err != nil {
		return 0, err
	}
	defer func() {
		// Leave the server idle; it is removed next.
		_, _ = conn.ExecContext(context.Background(), "STOP ALL SLAVES")
	}()
	for {
		st, err := slavesStatus(ctx, conn)
		if err != nil {
			return 0, err
		}
		done := 0
		for _, r := range st {
			if e := r["Last_SQL_Error"] + r["Last_IO_Error"]; e != "" {
				return 0, fmt.Errorf("bench: replica connection %s stopped: %s", r["Connection_name"], e)
			}
			pos, _ := strconv.ParseUint(r["Exec_Master_Log_Pos"], 10, 32)
			at := change.Position{File: r["Relay_Master_Log_File"], Pos: uint32(pos)}
			if end, ok := ends[r["Connection_name"]]; ok && at.Compare(end) >= 0 {
				done++
			}
		}
		if done == len(sources) {
			return time.Since(began), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("bench: replica %s: %w", srv.Addr(), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// slavesStatus returns SHOW ALL SLAVES STATUS, a map of column to value
// for each connection.
func slavesStatus(ctx context.Context, conn *sql.Conn) ([]map[string]string, error) {
	rows, err := conn.QueryContext(ctx, "SHOW ALL SLAVES STATUS")
	if err != nil {
		return nil, fmt.Errorf("bench: SHOW ALL SLAVES STATUS: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]string, len(cols))
		for i, c := range cols {
			m[c] = string(vals[i])
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// TableSums summarises the shop tables a server holds: their row counts
// and a sum over a column each, to compare a target with the shards.
type TableSums struct {
	Orders, Items int64
	OrdersCents   int64 // SUM(total) in cents, which the updates move
	OrdersUpdated int64 // SUM(UNIX_TIMESTAMP(updated_at)), which the updates move
	ItemsQty      int64 // SUM(qty)
}

// ShopSums adds up TableSums over the tables named database.orders and
// database.order_items of every database whose name matches like (a LIKE
// pattern: `shop\_%` for the shards and the replica, the target's name for
// braid's).
func ShopSums(ctx context.Context, db *sql.DB, like string) (TableSums, error) {
	var dbs []string
	rows, err := db.QueryContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", like)
	if err != nil {
		return TableSums{}, err
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return TableSums{}, err
		}
		dbs = append(dbs, s)
	}
	rows.Close()
	if len(dbs) == 0 {
		return TableSums{}, fmt.Errorf("bench: no database like %q", like)
	}
	var sum TableSums
	for _, d := range dbs {
		var n, cents, upd, qty int64
		q := fmt.Sprintf("SELECT COUNT(*), CAST(COALESCE(SUM(total * 100), 0) AS SIGNED), CAST(COALESCE(SUM(FLOOR(UNIX_TIMESTAMP(updated_at))), 0) AS SIGNED) FROM `%s`.orders", d)
		if err := db.QueryRowContext(ctx, q).Scan(&n, &cents, &upd); err != nil {
			return TableSums{}, fmt.Errorf("bench: %s: %w", q, err)
		}
		sum.Orders += n
		sum.OrdersCents += cents
		sum.OrdersUpdated += upd
		q = fmt.Sprintf("SELECT COUNT(*), CAST(COALESCE(SUM(qty), 0) AS SIGNED) FROM `%s`.order_items", d)
		if err := db.QueryRowContext(ctx, q).Scan(&n, &qty); err != nil {
			return TableSums{}, fmt.Errorf("bench: %s: %w", q, err)
		}
		sum.Items += n
		sum.ItemsQty += qty
	}
	return sum, nil
}

// ServerPID returns the process id of a server started by internal/mariadb
// (from its pid file in dir, Server.Dir).
func ServerPID(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, errors.New("bench: pid file " + filepath.Join(dir, "pid") + ": " + err.Error())
	}
	return pid, nil
}
