package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/engine/change"
)

// OrdersTables is the table filter of the orders workload: each shard's
// orders table is read, its audit table is not.
var OrdersTables = []string{`shop_\d+\.orders`}

// OrdersConfig sizes an orders workload (GenerateOrders).
type OrdersConfig struct {
	// Transactions is how many INSERT transactions are written, each of
	// OrdersPerTx orders and half as many audit rows. Default: 3,000.
	Transactions int
	// Shop numbers the shard's schema, shop_<Shop>.
	Shop int
}

// OrdersPerTx is how many orders an INSERT transaction of the orders
// workload writes; it writes half as many rows to the audit table.
const OrdersPerTx = 50

// ordersUpdateChunk is how many ids an UPDATE of the orders workload
// spans; it changes every other one of them.
const ordersUpdateChunk = 500

// ordersSchemaSQL is the shape users run and the issue on capture's speed
// measured from outside: an auto-increment key, a DECIMAL, short strings,
// a DATETIME(6) and a JSON document per order, beside an audit table the
// destination does not select.
var ordersSchemaSQL = []string{
	"CREATE DATABASE {shop}",
	`CREATE TABLE {shop}.orders (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		user_id INT NOT NULL,
		amount DECIMAL(12,2) NOT NULL,
		status VARCHAR(16) NOT NULL,
		note VARCHAR(64) NULL,
		created DATETIME(6) NOT NULL,
		payload JSON NULL
	) ENGINE=InnoDB`,
	`CREATE TABLE {shop}.audit (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		order_id BIGINT NOT NULL,
		action VARCHAR(16) NOT NULL,
		at DATETIME(6) NOT NULL,
		detail JSON NULL
	) ENGINE=InnoDB`,
}

// The orders workload's statements; {shop} is the schema, {tx} the
// transaction's number, {cte} a recursive CTE yielding n = 0..count-1.
// The orders' ids are given, 1 up, so that the UPDATEs know which rows
// exist whatever innodb_autoinc_lock_mode leaves as gaps.
const (
	insertShopOrders = `INSERT INTO {shop}.orders (id, user_id, amount, status, note, created, payload)
		{cte}
		SELECT {tx} * 50 + n + 1, ({tx} * 50 + n) * 7919 % 100003, (({tx} * 50 + n) * 37 % 1000000) / 100,
			ELT(1 + n % 4, 'new', 'paid', 'packed', 'cancelled'),
			IF(n % 6 = 0, NULL, CONCAT('deliver to door ', n, IF(n % 9 = 0, ' — ünïcode ✓', ''))),
			TIMESTAMP '2026-01-01 00:00:00' + INTERVAL {tx} SECOND + INTERVAL n * 1013 MICROSECOND,
			JSON_OBJECT('sku', CONCAT('SKU-', LPAD(n, 5, '0')), 'qty', 1 + n % 7, 'price', (n % 5000) / 100 + 0.99,
				'tags', JSON_ARRAY('web', IF(n % 2 = 0, 'gift', 'std')),
				'ship', JSON_OBJECT('city', ELT(1 + n % 3, 'Lyon', 'Kraków', 'Zürich'), 'zip', LPAD(n * 31 % 99999, 5, '0')))
		FROM seq`
	insertShopAudit = `INSERT INTO {shop}.audit (order_id, action, at, detail)
		{cte}
		SELECT {tx} * 50 + n * 2 + 1, 'created', TIMESTAMP '2026-01-01 00:00:00' + INTERVAL {tx} SECOND,
			JSON_OBJECT('by', CONCAT('svc-', n % 4), 'n', n)
		FROM seq`
	updateShopOrders = `UPDATE {shop}.orders SET status = 'shipped', amount = amount + 1,
		payload = JSON_SET(payload, '$.shipped', TRUE) WHERE id BETWEEN {from} AND {to} AND id % 2 = 0`
)

// GenerateOrders writes the orders workload into the server behind c: a
// schema shop_<Shop> with its orders and audit tables, cfg.Transactions
// INSERT transactions of OrdersPerTx orders and half as many audit rows,
// then UPDATEs of every other order (their before and after images in the
// binlog), ordersUpdateChunk ids a transaction. The server must not hold
// that schema. The counts in the result are checked against each
// statement's affected rows.
func GenerateOrders(c *client.Conn, cfg OrdersConfig) (*Workload, error) {
	if cfg.Transactions <= 0 {
		cfg.Transactions = 3000
	}
	began := time.Now()
	files, err := binlogFiles(c)
	if err != nil {
		return nil, err
	}
	w := &Workload{Start: change.Position{File: files[0].name, Pos: 4}}
	shop := fmt.Sprintf("shop_%d", cfg.Shop)
	for _, q := range ordersSchemaSQL {
		q = strings.ReplaceAll(q, "{shop}", shop)
		if _, err := c.Execute(q); err != nil {
			return nil, fmt.Errorf("bench: orders workload schema: %s: %w", firstLine(q), err)
		}
	}
	cte := func(n int) string {
		return fmt.Sprintf("WITH RECURSIVE seq (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < %d)", n-1)
	}
	for tx := range cfg.Transactions {
		r := strings.NewReplacer("{shop}", shop, "{tx}", fmt.Sprint(tx))
		if err := runTx(c, []stmt{
			{sql: strings.ReplaceAll(r.Replace(insertShopOrders), "{cte}", cte(OrdersPerTx)), rows: OrdersPerTx, selected: true},
			{sql: strings.ReplaceAll(r.Replace(insertShopAudit), "{cte}", cte(OrdersPerTx/2)), rows: OrdersPerTx / 2},
		}, w); err != nil {
			return nil, fmt.Errorf("bench: orders workload transaction %d: %w", tx, err)
		}
		if tx == cfg.Transactions/2-1 {
			if w.Half, err = masterStatus(c); err != nil {
				return nil, err
			}
			w.HalfSelected = w.Selected
		}
	}
	orders := cfg.Transactions * OrdersPerTx
	for from := 1; from <= orders; from += ordersUpdateChunk {
		to := min(from+ordersUpdateChunk-1, orders)
		r := strings.NewReplacer("{shop}", shop, "{from}", fmt.Sprint(from), "{to}", fmt.Sprint(to))
		if err := runTx(c, []stmt{{sql: r.Replace(updateShopOrders), rows: to/2 - (from-1)/2, selected: true}}, w); err != nil {
			return nil, fmt.Errorf("bench: orders workload update of ids %d..%d: %w", from, to, err)
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
