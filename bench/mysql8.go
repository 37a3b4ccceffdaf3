package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
)

// MySQLOrdersTables is the table filter of the MySQL orders history: the
// orders table is read, the audit table beside it is not.
var MySQLOrdersTables = []string{`shop\.orders`}

// mysqlBinlogFileSize is where the MySQL orders history rotates to a new
// file, as max_binlog_size would (the MariaDB fixtures use 16 MiB too).
const mysqlBinlogFileSize = 16 << 20

// MySQLOrders is the orders shape of GenerateOrders written as a MySQL 8.4
// server writes it (package mysqlbinlog), to be served by the MySQL test
// source: a schema shop with an orders table (BIGINT key, INT, DECIMAL,
// VARCHARs, DATETIME(6), JSON) and an audit table the filter excludes;
// Transactions INSERT transactions of OrdersPerTx orders and half as
// many audit rows, then UPDATEs of every other order, ordersUpdateChunk
// ids a transaction, with full before and after images
// (binlog_row_image=FULL). With Compressed, every row transaction is one
// TRANSACTION_PAYLOAD (binlog_transaction_compression=ON); the DDL never
// is, as on MySQL.
func MySQLOrders(transactions int, compressed bool) (mysqlbinlog.Workload, *Workload, error) {
	orders := &mysqlbinlog.TableDef{Schema: "shop", Name: "orders", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "bigint", NotNull: true, AutoIncrement: true},
		{Name: "user_id", Type: "int", NotNull: true},
		{Name: "amount", Type: "decimal(12,2)", NotNull: true},
		{Name: "status", Type: "varchar(16)", NotNull: true},
		{Name: "note", Type: "varchar(64)"},
		{Name: "created", Type: "datetime(6)", NotNull: true},
		{Name: "payload", Type: "json"},
	}}
	audit := &mysqlbinlog.TableDef{Schema: "shop", Name: "audit", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "bigint", NotNull: true, AutoIncrement: true},
		{Name: "order_id", Type: "bigint", NotNull: true},
		{Name: "action", Type: "varchar(16)", NotNull: true},
		{Name: "at", Type: "datetime(6)", NotNull: true},
		{Name: "detail", Type: "json"},
	}}
	txns := []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: orders}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: audit}},
	}
	w := &Workload{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	order := func(tx, n int) []any {
		id := tx*OrdersPerTx + n + 1
		k := tx*OrdersPerTx + n
		var note any
		if n%6 != 0 {
			s := fmt.Sprintf("deliver to door %d", n)
			if n%9 == 0 {
				s += " — ünïcode ✓"
			}
			note = s
		}
		amount := k * 37 % 1000000
		city := []string{"Lyon", "Kraków", "Zürich"}[n%3]
		tag := "std"
		if n%2 == 0 {
			tag = "gift"
		}
		price := n%5000 + 99 // cents
		payload := fmt.Sprintf(`{"sku":"SKU-%05d","qty":%d,"price":%d.%02d,"tags":["web","%s"],"ship":{"city":"%s","zip":"%05d"}}`,
			n, 1+n%7, price/100, price%100, tag, city, n*31%99999)
		return []any{int64(id), k * 7919 % 100003, fmt.Sprintf("%d.%02d", amount/100, amount%100),
			[]string{"new", "paid", "packed", "cancelled"}[n%4], note,
			base.Add(time.Duration(tx)*time.Second + time.Duration(n*1013)*time.Microsecond), payload}
	}
	auditID := 0
	for tx := range transactions {
		var rows, auditRows []mysqlbinlog.Row
		for n := range OrdersPerTx {
			rows = append(rows, mysqlbinlog.Row{After: order(tx, n)})
		}
		for n := range OrdersPerTx / 2 {
			auditID++
			auditRows = append(auditRows, mysqlbinlog.Row{After: []any{int64(auditID), int64(tx*OrdersPerTx + n*2 + 1), "created",
				base.Add(time.Duration(tx) * time.Second), fmt.Sprintf(`{"by":"svc-%d","n":%d}`, n%4, n)}})
		}
		txns = append(txns, mysqlbinlog.Txn{Compressed: compressed, Statements: []mysqlbinlog.Statement{
			{Kind: mysqlbinlog.Insert, Table: "shop.orders", Rows: rows},
			{Kind: mysqlbinlog.Insert, Table: "shop.audit", Rows: auditRows},
		}})
		w.Selected += len(rows)
		w.Filtered += len(auditRows)
	}
	total := transactions * OrdersPerTx
	for from := 1; from <= total; from += ordersUpdateChunk {
		to := min(from+ordersUpdateChunk-1, total)
		var rows []mysqlbinlog.Row
		for id := from; id <= to; id++ {
			if id%2 != 0 {
				continue
			}
			before := order((id-1)/OrdersPerTx, (id-1)%OrdersPerTx)
			after := append([]any(nil), before...)
			after[3] = "shipped"
			var cents int
			fmt.Sscanf(strings.Replace(before[2].(string), ".", "", 1), "%d", &cents)
			cents += 100
			after[2] = fmt.Sprintf("%d.%02d", cents/100, cents%100)
			after[6] = strings.TrimSuffix(before[6].(string), "}") + `,"shipped":true}`
			rows = append(rows, mysqlbinlog.Row{Before: before, After: after})
		}
		txns = append(txns, mysqlbinlog.Txn{Compressed: compressed, Statements: []mysqlbinlog.Statement{
			{Kind: mysqlbinlog.Update, Table: "shop.orders", Rows: rows},
		}})
		w.Selected += len(rows)
	}
	w.Transactions = len(txns) - 3
	return mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: mysqlsource.Version84}, Txns: txns}, w, nil
}

// ServeMySQLOrders writes the MySQL orders history and serves it from s,
// rotating files at mysqlBinlogFileSize, and returns the workload with
// its positions and sizes filled in.
func ServeMySQLOrders(s *mysqlsource.Server, transactions int, compressed bool) (*Workload, error) {
	began := time.Now()
	wl, w, err := MySQLOrders(transactions, compressed)
	if err != nil {
		return nil, err
	}
	wl.Server.Version = s.Version()
	wr, err := mysqlbinlog.NewWriter(wl.Server)
	if err != nil {
		return nil, err
	}
	var last mysqlbinlog.TxnPos
	for i, txn := range wl.Txns {
		if last, err = wr.Write(txn); err != nil {
			return nil, fmt.Errorf("bench: MySQL orders transaction %d: %w", i, err)
		}
		if last.End >= mysqlBinlogFileSize && i < len(wl.Txns)-1 {
			if err := wr.Rotate(); err != nil {
				return nil, err
			}
		}
	}
	if err := s.Feed(wr).Sync(); err != nil {
		return nil, err
	}
	b, err := wr.Binlog()
	if err != nil {
		return nil, err
	}
	w.Start = change.Position{File: b.Files[0].Name, Pos: 4}
	w.End = change.Position{File: last.File, Pos: last.End}
	w.Files = len(b.Files)
	for _, f := range b.Files {
		w.Bytes += int64(len(f.Data))
	}
	w.Took = time.Since(began)
	return w, nil
}
