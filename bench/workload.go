package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/engine/change"
)

// SelectedTables is the table filter of the benchmarks: the shop shards'
// tables are read, the noise schema is skipped.
var SelectedTables = []string{`shop_\d+\..*`}

// WorkloadConfig sizes a generated binlog.
type WorkloadConfig struct {
	// Batches is how many rounds of three transactions are written; each
	// round alternates between the two shop schemas. Default: 200.
	Batches int
	// Orders is how many orders a round inserts. A round writes 6.75 row
	// changes per order, half of them in noise tables; it must be at least
	// 100 and at most 500 (MySQL's recursive CTEs stop at 1,000 rows).
	// Default: 400, which with 200 rounds makes 540,000 row changes.
	Orders int
	// FirstShop numbers the two shop schemas: shop_<FirstShop> and
	// shop_<FirstShop+1>, so that servers written as shards of one
	// destination hold different schemas. Default: 0 (shop_0 and shop_1).
	FirstShop int
}

// Workload is a binlog written by Generate.
type Workload struct {
	// Start is the binlog's first position: its first file at offset 4.
	Start change.Position
	// Half is the position after the middle round's last transaction; End
	// the position after the last transaction (SHOW MASTER STATUS).
	Half, End change.Position
	// Selected and Filtered count the row changes in tables SelectedTables
	// selects and in the others, from Start to End. HalfSelected counts the
	// selected ones from Start to Half. An UPDATE of one row counts once.
	Selected, Filtered, HalfSelected int
	// Transactions is how many multi-row transactions were committed.
	Transactions int
	// Files and Bytes are the binlog files and their total size at End.
	Files int
	Bytes int64
	// Took is how long the generation took, schema included.
	Took time.Duration
}

// String summarises the workload in one line.
func (w *Workload) String() string {
	return fmt.Sprintf("%d row changes (%d selected, %d filtered) in %d transactions, %d binlog files, %.1f MiB, %s..%s, written in %v",
		w.Selected+w.Filtered, w.Selected, w.Filtered, w.Transactions, w.Files, mib(uint64(w.Bytes)),
		w.Start, w.End, w.Took.Round(time.Millisecond))
}

// schemaSQL creates the tables. The shop tables are selected, the noise
// tables filtered out; between them they hold most column types. {shop0}
// and {shop1} stand for the two shop schemas.
var schemaSQL = []string{
	"CREATE DATABASE {shop0}",
	"CREATE DATABASE {shop1}",
	"CREATE DATABASE noise",
	`CREATE TABLE {shop0}.orders (
		id BIGINT NOT NULL PRIMARY KEY,
		customer_id INT UNSIGNED NOT NULL,
		status ENUM('new','paid','shipped','cancelled') NOT NULL,
		total DECIMAL(12,2) NOT NULL,
		currency CHAR(3) NOT NULL,
		discount DOUBLE NULL,
		note VARCHAR(255) NULL,
		created_at DATETIME(6) NOT NULL,
		updated_at TIMESTAMP(3) NULL,
		attrs JSON NULL,
		flags SET('gift','express','fragile') NOT NULL DEFAULT ''
	) ENGINE=InnoDB`,
	`CREATE TABLE {shop0}.order_items (
		id BIGINT NOT NULL PRIMARY KEY,
		order_id BIGINT NOT NULL,
		sku VARCHAR(32) NOT NULL,
		qty SMALLINT UNSIGNED NOT NULL,
		price DECIMAL(10,2) NOT NULL,
		weight FLOAT NULL,
		ship_date DATE NULL,
		digest BINARY(16) NULL,
		label VARCHAR(64) CHARACTER SET utf8mb4 NULL,
		payload BLOB NULL,
		KEY (order_id)
	) ENGINE=InnoDB`,
	"CREATE TABLE {shop1}.orders LIKE {shop0}.orders",
	"CREATE TABLE {shop1}.order_items LIKE {shop0}.order_items",
	`CREATE TABLE noise.events (
		id BIGINT NOT NULL PRIMARY KEY,
		kind ENUM('click','view','buy') NOT NULL,
		at DATETIME(3) NOT NULL,
		body JSON NULL,
		raw VARBINARY(32) NULL,
		score DECIMAL(8,3) NOT NULL
	) ENGINE=InnoDB`,
	`CREATE TABLE noise.log (
		id BIGINT NOT NULL PRIMARY KEY,
		level TINYINT NOT NULL,
		at TIMESTAMP(3) NULL,
		msg VARCHAR(200) NOT NULL,
		host VARCHAR(64) NOT NULL
	) ENGINE=InnoDB`,
}

// workloadSchema is schemaSQL for the shops firstShop and firstShop+1,
// without the noise schema's statements unless noise.
func workloadSchema(firstShop int, noise bool) []string {
	shops := strings.NewReplacer("{shop0}", fmt.Sprintf("shop_%d", firstShop),
		"{shop1}", fmt.Sprintf("shop_%d", firstShop+1))
	var out []string
	for _, q := range schemaSQL {
		if noise || !strings.Contains(q, "noise") {
			out = append(out, shops.Replace(q))
		}
	}
	return out
}

// Row templates. {cte} is a recursive CTE yielding n = 0..count-1, {base}
// the first id of the statement's rows minus one, {schema} the shop.
const (
	insertOrders = `INSERT INTO {schema}.orders
		(id, customer_id, status, total, currency, discount, note, created_at, updated_at, attrs, flags)
		{cte}
		SELECT {base} + n, ({base} + n) * 7919 % 1000003,
			ELT(1 + n % 4, 'new', 'paid', 'shipped', 'cancelled'),
			(({base} + n) * 37 % 1000000) / 100, ELT(1 + n % 3, 'EUR', 'USD', 'GBP'),
			IF(n % 5 = 0, NULL, n / 7), CONCAT('order ', {base} + n, ' ', REPEAT('x', n % 40)),
			TIMESTAMP '2026-01-01 00:00:00' + INTERVAL ({base} + n) SECOND + INTERVAL n MICROSECOND,
			TIMESTAMP '2026-01-01 00:00:00' + INTERVAL ({base} + n) MINUTE,
			JSON_OBJECT('n', n, 'tags', JSON_ARRAY('a', 'b'), 'gift', n % 2 = 0), n % 8
		FROM seq`
	insertItems = `INSERT INTO {schema}.order_items
		(id, order_id, sku, qty, price, weight, ship_date, digest, label, payload)
		{cte}
		SELECT {base} + n, {orders} + n DIV 2 + 1, CONCAT('SKU-', LPAD(n % 1000, 4, '0')), 1 + n % 20,
			(n % 5000) / 100 + 0.99, n / 3, DATE '2026-01-01' + INTERVAL n % 365 DAY,
			UNHEX(MD5({base} + n)), CONCAT('item ', n, IF(n % 10 = 0, ' 📦 ünïcode', '')),
			IF(n % 4 = 0, NULL, REPEAT(CHAR(65 + n % 26), 16 + n % 200))
		FROM seq`
	insertEvents = `INSERT INTO noise.events (id, kind, at, body, raw, score)
		{cte}
		SELECT {base} + n, ELT(1 + n % 3, 'click', 'view', 'buy'),
			TIMESTAMP '2026-01-01 00:00:00' + INTERVAL ({base} + n) * 1000 MICROSECOND,
			JSON_OBJECT('user', n % 977, 'path', CONCAT('/p/', n), 'ua', REPEAT('m', n % 50)),
			UNHEX(SHA2({base} + n, 256)), (n % 100000) / 1000
		FROM seq`
	insertLog = `INSERT INTO noise.log (id, level, at, msg, host)
		{cte}
		SELECT {base} + n, n % 6, TIMESTAMP '2026-01-01 00:00:00' + INTERVAL ({base} + n) SECOND,
			CONCAT('request ', {base} + n, ' served in ', n % 300, ' ms'), CONCAT('web-', n % 16)
		FROM seq`
	updateOrders = `UPDATE {schema}.orders SET status = 'shipped', total = total + 1,
		updated_at = updated_at + INTERVAL 1 SECOND WHERE id BETWEEN {base} + 1 AND {base} + {count}`
	deleteItems  = `DELETE FROM {schema}.order_items WHERE id BETWEEN {base} + 1 AND {base} + {count}`
	updateEvents = `UPDATE noise.events SET score = score + 1, kind = 'buy' WHERE id BETWEEN {base} + 1 AND {base} + {count}`
	deleteLog    = `DELETE FROM noise.log WHERE id BETWEEN {base} + 1 AND {base} + {count}`
)

// stmt is one statement of the workload and the row changes it must make.
type stmt struct {
	sql      string
	rows     int
	selected bool
}

// fill expands a row template.
func fill(tmpl, schema string, base, count int, orders int) stmt {
	cte := fmt.Sprintf("WITH RECURSIVE seq (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < %d)", count-1)
	r := strings.NewReplacer("{cte}", cte, "{schema}", schema, "{base}", strconv.Itoa(base),
		"{count}", strconv.Itoa(count), "{orders}", strconv.Itoa(orders))
	return stmt{sql: r.Replace(tmpl), rows: count, selected: strings.HasPrefix(schema, "shop_")}
}

// round returns the three transactions of round k: a mixed insert, an
// insert into noise tables only, and a mixed update and delete of rows the
// first one wrote. Per order it writes 3.375 selected and 3.375 filtered
// row changes.
func round(k, orders, firstShop int) [][]stmt {
	shop := fmt.Sprintf("shop_%d", firstShop+k%2)
	o, it, ev, lg := k*orders, k*2*orders, k*2*orders, k*orders // id bases
	touch, drop := orders/4, orders/8
	return [][]stmt{
		{
			fill(insertOrders, shop, o, orders, 0),
			fill(insertItems, shop, it, 2*orders, o),
			fill(insertEvents, "noise", ev, orders, 0),
		},
		{
			fill(insertEvents, "noise", ev+orders, orders, 0),
			fill(insertLog, "noise", lg, orders, 0),
		},
		{
			fill(updateOrders, shop, o, touch, 0),
			fill(updateEvents, "noise", ev, touch, 0),
			fill(deleteItems, shop, it, drop, 0),
			fill(deleteLog, "noise", lg, drop, 0),
		},
	}
}

// Generate writes the workload into the server behind c, which must have
// the binary log on in ROW format and neither the noise database nor the
// two shop databases cfg names. Every statement's affected-row count is
// checked, so the counts in the result are what the binlog holds.
func Generate(c *client.Conn, cfg WorkloadConfig) (*Workload, error) {
	if cfg.Batches <= 0 {
		cfg.Batches = 200
	}
	if cfg.Orders == 0 {
		cfg.Orders = 400
	}
	if cfg.Orders < 100 || cfg.Orders > 500 {
		return nil, fmt.Errorf("bench: workload: %d orders per round: want 100 to 500", cfg.Orders)
	}
	if cfg.FirstShop < 0 {
		return nil, fmt.Errorf("bench: workload: first shop %d: want 0 or more", cfg.FirstShop)
	}
	began := time.Now()
	files, err := binlogFiles(c)
	if err != nil {
		return nil, err
	}
	w := &Workload{Start: change.Position{File: files[0].name, Pos: 4}}
	for _, q := range workloadSchema(cfg.FirstShop, true) {
		if _, err := c.Execute(q); err != nil {
			return nil, fmt.Errorf("bench: workload schema: %s: %w", firstLine(q), err)
		}
	}
	for k := range cfg.Batches {
		for _, tx := range round(k, cfg.Orders, cfg.FirstShop) {
			if err := runTx(c, tx, w); err != nil {
				return nil, fmt.Errorf("bench: workload round %d: %w", k, err)
			}
		}
		if k == cfg.Batches/2-1 {
			if w.Half, err = masterStatus(c); err != nil {
				return nil, err
			}
			w.HalfSelected = w.Selected
		}
	}
	if w.End, err = masterStatus(c); err != nil {
		return nil, err
	}
	if files, err = binlogFiles(c); err != nil {
		return nil, err
	}
	w.Files = len(files)
	for _, f := range files {
		w.Bytes += f.size
	}
	w.Took = time.Since(began)
	return w, nil
}

// runTx commits the statements as one transaction and adds their row
// changes to w.
func runTx(c *client.Conn, tx []stmt, w *Workload) error {
	if _, err := c.Execute("BEGIN"); err != nil {
		return err
	}
	for _, s := range tx {
		r, err := c.Execute(s.sql)
		if err != nil {
			_, _ = c.Execute("ROLLBACK")
			return fmt.Errorf("%s: %w", firstLine(s.sql), err)
		}
		if int(r.AffectedRows) != s.rows {
			_, _ = c.Execute("ROLLBACK")
			return fmt.Errorf("%s: %d rows affected, want %d", firstLine(s.sql), r.AffectedRows, s.rows)
		}
		if s.selected {
			w.Selected += s.rows
		} else {
			w.Filtered += s.rows
		}
	}
	if _, err := c.Execute("COMMIT"); err != nil {
		return err
	}
	w.Transactions++
	return nil
}

func masterStatus(c *client.Conn) (change.Position, error) {
	r, err := c.Execute("SHOW MASTER STATUS")
	if err != nil {
		return change.Position{}, fmt.Errorf("bench: SHOW MASTER STATUS: %w", err)
	}
	if r.RowNumber() == 0 {
		return change.Position{}, fmt.Errorf("bench: SHOW MASTER STATUS: no row: is the binary log off?")
	}
	file, _ := r.GetString(0, 0)
	pos, _ := r.GetUint(0, 1)
	return change.Position{File: file, Pos: uint32(pos)}, nil
}

type binlogFile struct {
	name string
	size int64
}

func binlogFiles(c *client.Conn) ([]binlogFile, error) {
	r, err := c.Execute("SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("bench: SHOW BINARY LOGS: %w", err)
	}
	if r.RowNumber() == 0 {
		return nil, fmt.Errorf("bench: SHOW BINARY LOGS: no file: is the binary log off?")
	}
	files := make([]binlogFile, r.RowNumber())
	for i := range files {
		files[i].name, _ = r.GetString(i, 0)
		size, _ := r.GetInt(i, 1)
		files[i].size = size
	}
	return files, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// mib converts bytes to MiB.
func mib(b uint64) float64 { return float64(b) / (1 << 20) }
