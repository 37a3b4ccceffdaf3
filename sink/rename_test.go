package sink_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// TestRenameRefused: a RENAME of a logical table, as RENAME TABLE or
// ALTER TABLE … RENAME TO, is refused with one line naming the DDL, the
// tables and the ways past it (the runner then stops the sink instead of
// retrying it for ever); an ALTER that renames nothing is not; and a
// RENAME between two names the sink's tables map to one target table
// (the way past it the line names) runs nothing and is not refused.
func TestRenameRefused(t *testing.T) {
	target := func(logical string) string { return "warehouse." + strings.TrimPrefix(logical, "shop.") }
	for _, sql := range []string{
		"RENAME TABLE `shop`.`orders` TO `shop`.`orders_archive`",
		"ALTER TABLE `shop`.`orders` RENAME TO `shop`.`orders_archive`",
	} {
		ev := &change.Event{Type: change.EventDDL, Seq: 7, Source: "a",
			DDL: &change.DDL{Schema: "shop", SQL: sql, Tables: []string{"shop.orders", "shop.orders_archive"}, LogicalTables: []string{"shop.orders", "shop.orders_archive"}}}
		_, err := sink.TargetDDLs("wh", ev, target)
		if !errors.Is(err, sink.ErrDDLRefused) {
			t.Fatalf("%s: err %v, want ErrDDLRefused", sql, err)
		}
		msg := err.Error()
		for _, want := range []string{"seq 7", "renames shop.orders to shop.orders_archive", "map shop.orders and shop.orders_archive to one target table", "ddl: ignore", "tables (from/to"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error lacks %q: %s", sql, want, msg)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("not one line: %q", msg)
		}
	}
	ev := &change.Event{Type: change.EventDDL, Seq: 8, Source: "a",
		DDL: &change.DDL{Schema: "shop", SQL: "ALTER TABLE `shop`.`orders` ADD COLUMN gift varchar(20) NULL", Tables: []string{"shop.orders"}}}
	if _, err := sink.TargetDDLs("wh", ev, target); err != nil {
		t.Fatalf("an ALTER was refused: %v", err)
	}
	mapped := func(logical string) string {
		if logical == "shop.orders_archive" {
			return "warehouse.orders"
		}
		return target(logical)
	}
	for _, sql := range []string{
		"RENAME TABLE `shop`.`orders` TO `shop`.`orders_archive`",
		"ALTER TABLE `shop`.`orders` RENAME TO `shop`.`orders_archive`",
	} {
		ev := &change.Event{Type: change.EventDDL, Seq: 7, Source: "a",
			DDL: &change.DDL{Schema: "shop", SQL: sql, Tables: []string{"shop.orders", "shop.orders_archive"}, LogicalTables: []string{"shop.orders", "shop.orders_archive"}}}
		if out, err := sink.TargetDDLs("wh", ev, mapped); err != nil || len(out) != 0 {
			t.Fatalf("%s, both names mapped to warehouse.orders: %v, %v; want nothing to run", sql, out, err)
		}
	}
}
