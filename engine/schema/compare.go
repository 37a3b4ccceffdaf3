package schema

import (
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/braid-cdc/braid/engine/change"
)

// Shard tables of one logical table may live on MariaDB and MySQL
// servers, which spell the same table differently: MariaDB and MySQL
// before 8.0.19 print integer display widths (int(11)), later MySQL does
// not (int); MariaDB's JSON is LONGTEXT with a CHECK (json_valid(col));
// their default collations differ (utf8mb4_general_ci,
// utf8mb4_0900_ai_ci), and MySQL 8.0.30+ and MariaDB 10.6+ call utf8
// utf8mb3. The shard-DDL merge compares shard tables (ComparableType) and
// shard statements (LogicalDDL.Key) without these differences, so that
// identical tables on both kinds of server are one logical table.

// ComparableType is c's type as shard tables are compared: RawType
// without an integer display width (ZEROFILL's stays: it pads values).
// MariaDB's JSON is already "json" in the model (ddlJSONCheck).
func ComparableType(c change.Column) string {
	if strings.Contains(c.RawType, "zerofill") || !intTypes[c.Type] {
		return c.RawType
	}
	open := strings.IndexByte(c.RawType, '(')
	end := strings.IndexByte(c.RawType, ')')
	if open < 0 || end < open {
		return c.RawType
	}
	return c.RawType[:open] + c.RawType[end+1:]
}

// CollationFamily is a collation as shard statements are compared: its
// character set (utf8 read as utf8mb3) and whether it tells letter case
// and accents apart: "utf8mb4_ci" for utf8mb4_general_ci,
// utf8mb4_unicode_ci and utf8mb4_0900_ai_ci alike, "utf8mb4_cs" for the
// case-sensitive ones, "utf8mb4_bin" for utf8mb4_bin. A name it does not
// know the form of comes back lower case.
func CollationFamily(collation string) string {
	c := strings.ToLower(collation)
	cs, rest, ok := strings.Cut(c, "_")
	if !ok {
		return c
	}
	cs = charsetAlias(cs)
	switch {
	case rest == "bin" || strings.HasSuffix(rest, "_bin"):
		return cs + "_bin"
	case strings.HasSuffix(rest, "_ci"):
		return cs + "_ci"
	case strings.HasSuffix(rest, "_cs"):
		return cs + "_cs"
	}
	return cs + "_" + rest
}

// charsetAlias is a character set's name as MySQL 8.0.30+ and MariaDB
// 10.6+ print it.
func charsetAlias(cs string) string {
	cs = strings.ToLower(cs)
	if cs == "utf8" {
		return "utf8mb3"
	}
	return cs
}

// spellingEraser drops, from a statement, what only spells a default or
// a server's habit (see the top of the file), for LogicalDDL.Key:
// integer display widths, an explicit NULL, MariaDB's JSON spelling, and
// collations and character sets down to their family.
type spellingEraser struct{}

func (spellingEraser) Enter(n ast.Node) (ast.Node, bool) {
	switch n := n.(type) {
	case *ast.ColumnDef:
		eraseColumnSpelling(n)
	case *ast.ColumnOption:
		if n.Tp == ast.ColumnOptionCollate {
			n.StrValue = CollationFamily(n.StrValue)
		}
	case *ast.TableOption:
		eraseTableOption(n)
	case *ast.AlterTableSpec:
		for _, o := range n.Options { // not visited by the walk
			eraseTableOption(o)
		}
	}
	return n, false
}

func (spellingEraser) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func eraseColumnSpelling(c *ast.ColumnDef) {
	c.Options = slices.DeleteFunc(c.Options, func(o *ast.ColumnOption) bool { return o.Tp == ast.ColumnOptionNull })
	if c.Tp == nil {
		return
	}
	switch c.Tp.GetType() {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		c.Tp.SetFlen(types.UnspecifiedLength)
	case mysql.TypeLongBlob:
		if ddlJSONCheck(c) && !strings.EqualFold(c.Tp.GetCharset(), "binary") {
			// MariaDB's JSON: LONGTEXT [CHARACTER SET utf8mb4 COLLATE
			// utf8mb4_bin] CHECK (json_valid(col)) is MySQL's JSON.
			c.Tp = types.NewFieldType(mysql.TypeJSON)
			c.Options = slices.DeleteFunc(c.Options, func(o *ast.ColumnOption) bool {
				return o.Tp == ast.ColumnOptionCollate || o.Tp == ast.ColumnOptionCheck && isJSONValid(o, c)
			})
			return
		}
	}
	if cs := c.Tp.GetCharset(); cs != "" {
		c.Tp.SetCharset(charsetAlias(cs))
	}
	if co := c.Tp.GetCollate(); co != "" {
		c.Tp.SetCollate(CollationFamily(co))
	}
}

// isJSONValid reports whether o is CHECK (json_valid(c)).
func isJSONValid(o *ast.ColumnOption, c *ast.ColumnDef) bool {
	return ddlJSONCheck(&ast.ColumnDef{Name: c.Name, Options: []*ast.ColumnOption{o}})
}

func eraseTableOption(o *ast.TableOption) {
	switch o.Tp {
	case ast.TableOptionCharset:
		o.StrValue = charsetAlias(o.StrValue)
	case ast.TableOptionCollate:
		o.StrValue = CollationFamily(o.StrValue)
	}
}
