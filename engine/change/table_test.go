package change

import (
	"sync"
	"testing"
)

// A table version stamped with its logical names defines the same table
// as the unstamped one, and comparing never reads the names: package
// group stamps them while the schema model compares (run with -race).
func TestSameDefinitionIgnoresLogicalNames(t *testing.T) {
	cols := func() []Column { return []Column{{Name: "id", Type: "int"}, {Name: "note", Type: "varchar"}} }
	stamped := &Table{Schema: "shop_0", Name: "orders", Columns: cols()}
	plain := &Table{Schema: "shop_0", Name: "orders", Columns: cols()}
	var wg sync.WaitGroup
	wg.Go(func() { stamped.LogicalSchema, stamped.LogicalName = "shop", "orders" })
	for range 100 {
		if !plain.SameDefinition(stamped) {
			t.Fatal("a stamped version differs from the unstamped one")
		}
	}
	wg.Wait()
	wider := &Table{Schema: "shop_0", Name: "orders", Columns: append(cols(), Column{Name: "gift", Type: "varchar"})}
	if plain.SameDefinition(wider) || plain.SameDefinition(nil) || !(*Table)(nil).SameDefinition(nil) {
		t.Fatal("tables of other columns, or nil, compare as the same")
	}
}
