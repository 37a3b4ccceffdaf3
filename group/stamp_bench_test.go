package group

import (
	"fmt"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/spec"
)

// BenchmarkStamp is the merge loop's stamp of a rows event as a reader
// hands it out (its rows on the reader's table version), with rows of
// one table or of eight in turn (a transaction over several tables).
func BenchmarkStamp(b *testing.B) {
	router, err := NewRouter([]spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, rows := range []int{1, 20} {
		for _, tables := range []int{1, 8} {
			b.Run(fmt.Sprintf("rows=%d/tables=%d", rows, tables), func(b *testing.B) {
				d := &Destination{router: router}
				var evs []*change.Event
				var versions []*change.Table
				for i := range tables {
					t := &change.Table{Schema: fmt.Sprintf("shop_%d", i), Name: "orders",
						Columns: []change.Column{{Name: "id", Type: "int", Key: true}, {Name: "note", Type: "varchar"}}}
					vals := make([][]change.Value, rows)
					for k := range vals {
						vals[k] = []change.Value{int64(k), "x"}
					}
					versions = append(versions, t)
					evs = append(evs, &change.Event{Type: change.EventRows, Rows: change.NewValueRows(t, 0, vals)})
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					ev, t := evs[i%tables], versions[i%tables]
					for k := range ev.Rows {
						ev.Rows[k].Table = t // as its reader made it
					}
					d.stamp(ev)
				}
			})
		}
	}
}
