package schema_test

import (
	"slices"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// TestSpellWithoutIntWidths: a MySQL 8.0.19+ source's types are spelled as
// it prints them (canal's mysqlType): integers and year without display
// width, except tinyint(1) and a ZEROFILL column's; a DDL read later
// (ALTER) spells its columns the same way. By default (MariaDB, older
// MySQL) the widths stay, the declared or the type's default.
func TestSpellWithoutIntWidths(t *testing.T) {
	const create = "CREATE TABLE t (a INT, b INT(11) UNSIGNED, c TINYINT(1), d TINYINT, e INT(5) ZEROFILL, f YEAR, g BIGINT UNSIGNED, h VARCHAR(10), i DECIMAL(5,2))"
	raw := func(tr *schema.Tracker) []string {
		tb, ok := tr.Table("db", "t")
		if !ok {
			t.Fatal("no table")
		}
		var out []string
		for _, c := range tb.Columns {
			out = append(out, c.RawType)
		}
		return out
	}
	for _, c := range []struct {
		name       string
		noWidths   bool
		load, diff []string
	}{
		{"mysql 8.0.19+", true,
			[]string{"int", "int unsigned", "tinyint(1)", "tinyint", "int(5) unsigned zerofill", "year", "bigint unsigned", "varchar(10)", "decimal(5,2)"},
			[]string{"smallint", "mediumint(3) unsigned zerofill"}},
		{"mariadb", false,
			[]string{"int(11)", "int(11) unsigned", "tinyint(1)", "tinyint(4)", "int(5) unsigned zerofill", "year(4)", "bigint(20) unsigned", "varchar(10)", "decimal(5,2)"},
			[]string{"smallint(6)", "mediumint(3) unsigned zerofill"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := schema.NewTracker()
			tr.SpellWithoutIntWidths(c.noWidths)
			if err := tr.LoadCreate(change.Position{File: "binlog.000001", Pos: 4}, "db", create); err != nil {
				t.Fatal(err)
			}
			if got := raw(tr); !slices.Equal(got, c.load) {
				t.Errorf("loaded: %q, want %q", got, c.load)
			}
			if _, err := tr.ApplyDDL(change.Position{File: "binlog.000001", Pos: 100}, "db", "ALTER TABLE t ADD COLUMN j SMALLINT, ADD COLUMN k MEDIUMINT(3) ZEROFILL", 0); err != nil {
				t.Fatal(err)
			}
			if got := raw(tr); !slices.Equal(got, append(slices.Clone(c.load), c.diff...)) {
				t.Errorf("after the ALTER: %q, want %q then %q", got, c.load, c.diff)
			}
		})
	}
}
