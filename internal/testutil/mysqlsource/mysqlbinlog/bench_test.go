package mysqlbinlog

import (
	"testing"
)

// BenchmarkWriteWorkload measures writing a workload of 100 000 rows in
// 1 000 transactions, half of them compressed: what a benchmark of
// braid's decoding spends before it starts.
func BenchmarkWriteWorkload(b *testing.B) {
	def := &TableDef{Schema: "s", Name: "orders", PrimaryKey: []string{"id"}, Columns: []ColumnDef{
		{Name: "id", Type: "bigint", NotNull: true}, {Name: "customer", Type: "int"}, {Name: "amount", Type: "decimal(10,2)"},
		{Name: "note", Type: "varchar(64)"}, {Name: "at", Type: "datetime(6)"}}}
	txns := []Txn{{DDL: &DDL{Schema: "s", Table: def}}}
	id := 0
	for i := range 1000 {
		var rows []Row
		for range 100 {
			id++
			rows = append(rows, Row{After: []any{id, id % 97, "123.45", "a note of some length", "2026-03-01 10:00:00.123456"}})
		}
		txns = append(txns, Txn{Compressed: i%2 == 1, Statements: []Statement{{Kind: Insert, Table: "s.orders", Rows: rows}}})
	}
	b.ResetTimer()
	for range b.N {
		out, err := Write(Workload{Txns: txns})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(out.Files[0].Data)))
	}
}
