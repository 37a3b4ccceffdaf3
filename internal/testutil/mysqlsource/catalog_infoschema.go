package mysqlsource

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/charset"
)

// information_schema's views, built from the catalog with MySQL 8's
// columns (upper case, as 8.0's views name them) in its order. Columns a
// test cannot set get MySQL's usual values.

// infoSchemaLocked returns information_schema.<name> as rows.
func (s *Server) infoSchemaLocked(name string) ([]string, [][]any, bool) {
	switch strings.ToUpper(name) {
	case "SCHEMATA":
		cols := []string{"CATALOG_NAME", "SCHEMA_NAME", "DEFAULT_CHARACTER_SET_NAME", "DEFAULT_COLLATION_NAME", "SQL_PATH", "DEFAULT_ENCRYPTION"}
		var rows [][]any
		for _, sys := range systemSchemas {
			cs, coll := "utf8mb4", "utf8mb4_0900_ai_ci"
			if sys == "information_schema" || sys == "performance_schema" {
				cs, coll = "utf8mb3", "utf8mb3_general_ci"
			}
			rows = append(rows, []any{"def", sys, cs, coll, nil, "NO"})
		}
		for _, sc := range s.catalog.Schemas {
			rows = append(rows, []any{"def", sc.Name, sc.charset(), sc.collation(), nil, "NO"})
		}
		return cols, rows, true
	case "TABLES":
		cols := []string{"TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "ENGINE", "VERSION", "ROW_FORMAT", "TABLE_ROWS",
			"AVG_ROW_LENGTH", "DATA_LENGTH", "MAX_DATA_LENGTH", "INDEX_LENGTH", "DATA_FREE", "AUTO_INCREMENT", "CREATE_TIME", "UPDATE_TIME",
			"CHECK_TIME", "TABLE_COLLATION", "CHECKSUM", "CREATE_OPTIONS", "TABLE_COMMENT"}
		var rows [][]any
		for _, sc := range s.catalog.Schemas {
			for _, t := range sc.Tables {
				n := int64(len(t.Rows))
				if t.EstimatedRows != nil {
					n = *t.EstimatedRows
				}
				rows = append(rows, []any{"def", sc.Name, t.Name, "BASE TABLE", t.engine(), int64(10), "Dynamic", n,
					int64(0), int64(16384), int64(0), int64(0), int64(0), nil, "2024-01-01 00:00:00", nil,
					nil, t.collation(sc), nil, "", ""})
			}
		}
		return cols, rows, true
	case "COLUMNS":
		cols := []string{"TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION", "COLUMN_DEFAULT", "IS_NULLABLE",
			"DATA_TYPE", "CHARACTER_MAXIMUM_LENGTH", "CHARACTER_OCTET_LENGTH", "NUMERIC_PRECISION", "NUMERIC_SCALE", "DATETIME_PRECISION",
			"CHARACTER_SET_NAME", "COLLATION_NAME", "COLUMN_TYPE", "COLUMN_KEY", "EXTRA", "PRIVILEGES", "COLUMN_COMMENT",
			"GENERATION_EXPRESSION", "SRS_ID"}
		var rows [][]any
		for _, sc := range s.catalog.Schemas {
			for _, t := range sc.Tables {
				for i, col := range t.Columns {
					nullable := "NO"
					if col.Nullable {
						nullable = "YES"
					}
					var def, cs, coll any
					if col.Default != nil {
						def = *col.Default
					}
					if c, co := col.charsetIn(t, sc); c != "" {
						cs, coll = c, co
					}
					rows = append(rows, []any{"def", sc.Name, t.Name, col.Name, int64(i + 1), def, nullable,
						dataType(col.Type), nil, nil, nil, nil, nil,
						cs, coll, col.Type, columnKey(t, col.Name), col.Extra, "select,insert,update,references", col.Comment,
						col.Generation, nil})
				}
			}
		}
		return cols, rows, true
	case "STATISTICS":
		cols := []string{"TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "NON_UNIQUE", "INDEX_SCHEMA", "INDEX_NAME", "SEQ_IN_INDEX",
			"COLUMN_NAME", "COLLATION", "CARDINALITY", "SUB_PART", "PACKED", "NULLABLE", "INDEX_TYPE", "COMMENT", "INDEX_COMMENT",
			"IS_VISIBLE", "EXPRESSION"}
		var rows [][]any
		for _, sc := range s.catalog.Schemas {
			for _, t := range sc.Tables {
				for _, r := range indexRows(&t) {
					rows = append(rows, []any{"def", sc.Name, t.Name, r.nonUnique, sc.Name, r.index, r.seq,
						r.column, "A", int64(0), r.subPart, nil, r.nullable, "BTREE", "", "", r.visible, nil})
				}
			}
		}
		return cols, rows, true
	case "KEY_COLUMN_USAGE":
		cols := []string{"CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME",
			"COLUMN_NAME", "ORDINAL_POSITION", "POSITION_IN_UNIQUE_CONSTRAINT", "REFERENCED_TABLE_SCHEMA", "REFERENCED_TABLE_NAME",
			"REFERENCED_COLUMN_NAME"}
		var rows [][]any
		for _, sc := range s.catalog.Schemas {
			for _, t := range sc.Tables {
				for _, ix := range t.Indexes {
					if !ix.Unique && ix.Name != "PRIMARY" {
						continue
					}
					for k, p := range ix.Columns {
						rows = append(rows, []any{"def", sc.Name, ix.Name, "def", sc.Name, t.Name, p.Column, int64(k + 1), nil, nil, nil, nil})
					}
				}
			}
		}
		return cols, rows, true
	case "CHECK_CONSTRAINTS":
		// MySQL's has no LEVEL column (MariaDB's has): a query on it fails.
		cols := []string{"CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "CHECK_CLAUSE"}
		var rows [][]any
		for _, sc := range s.catalog.Schemas {
			for _, t := range sc.Tables {
				for _, ch := range t.Checks {
					rows = append(rows, []any{"def", sc.Name, ch.Name, ch.Clause})
				}
			}
		}
		return cols, rows, true
	case "COLLATIONS":
		cols := []string{"COLLATION_NAME", "CHARACTER_SET_NAME", "ID", "IS_DEFAULT", "IS_COMPILED", "SORTLEN", "PAD_ATTRIBUTE"}
		var rows [][]any
		seen := map[string]bool{}
		all := charset.GetSupportedCollations()
		for _, sc := range s.catalog.Schemas {
			names := []string{sc.collation()}
			for _, t := range sc.Tables {
				names = append(names, t.collation(sc))
				for _, col := range t.Columns {
					if _, coll := col.charsetIn(t, sc); coll != "" {
						names = append(names, coll)
					}
				}
			}
			for _, n := range names {
				if c, err := charset.GetCollationByName(n); err == nil {
					all = append(all, c)
				}
			}
		}
		for _, c := range all {
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			isDefault := ""
			if c.IsDefault || defaultCollation(c.CharsetName) == c.Name {
				isDefault = "Yes"
			}
			pad := "PAD SPACE"
			if strings.Contains(c.Name, "_0900_") {
				pad = "NO PAD"
			}
			rows = append(rows, []any{c.Name, c.CharsetName, int64(c.ID), isDefault, "Yes", int64(1), pad})
		}
		return cols, rows, true
	}
	return nil, nil, false
}

// columnKey is COLUMN_KEY: PRI, UNI or MUL for the first column of an
// index.
func columnKey(t Table, col string) string {
	key := ""
	for _, ix := range t.Indexes {
		if len(ix.Columns) == 0 || ix.Columns[0].Column != col {
			continue
		}
		switch {
		case ix.Name == "PRIMARY":
			return "PRI"
		case ix.Unique && len(ix.Columns) == 1:
			key = "UNI"
		case key == "":
			key = "MUL"
		}
	}
	return key
}
