package mysqlbinlog

import (
	"fmt"
	"strings"
)

// TableDef describes a table once, as CREATE TABLE would: a workload
// writes its rows, prints its SHOW CREATE TABLE and its
// information_schema rows from it.
type TableDef struct {
	Schema, Name string
	Columns      []ColumnDef
	PrimaryKey   []string // column names, in key order
	UniqueKeys   []KeyDef
	// Collation is the table's default collation; "" is
	// utf8mb4_0900_ai_ci, MySQL 8's default.
	Collation string
}

// KeyDef is a unique key.
type KeyDef struct {
	Name    string
	Columns []string
}

// ColumnDef is one column as CREATE TABLE declares it.
type ColumnDef struct {
	Name string
	// Type as CREATE TABLE writes it: "int unsigned", "varchar(32)",
	// "decimal(10,2)", "enum('a','b')", "json", "vector(3)".
	Type    string
	NotNull bool
	// Default is printed after DEFAULT as is ("'0'", "CURRENT_TIMESTAMP");
	// "" is none (DEFAULT NULL for a nullable column).
	Default       string
	AutoIncrement bool
	Invisible     bool // MySQL 8.0.23+
	// Generated is the expression of a generated column as SHOW CREATE
	// TABLE prints it (without the outer parentheses); Stored picks
	// STORED over VIRTUAL.
	Generated string
	Stored    bool
	// Collation of a character column; "" is the table's.
	Collation string
}

// QualifiedName is "schema.name".
func (d *TableDef) QualifiedName() string { return d.Schema + "." + d.Name }

func (d *TableDef) tableCollation() (Collation, error) {
	if d.Collation == "" {
		return CollationByID(CollationUTF8MB4_0900AICI)
	}
	return CollationByName(d.Collation)
}

// Table returns the table the encoders take, with table id id.
func (d *TableDef) Table(id uint64) (*Table, error) {
	tc, err := d.tableCollation()
	if err != nil {
		return nil, err
	}
	t := &Table{ID: id, Schema: d.Schema, Name: d.Name}
	index := map[string]int{}
	for i, cd := range d.Columns {
		c, err := ParseColumnType(cd.Type)
		if err != nil {
			return nil, fmt.Errorf("%s column %s: %w", d.QualifiedName(), cd.Name, err)
		}
		c.Name = cd.Name
		c.Nullable = !cd.NotNull
		c.Invisible = cd.Invisible
		if c.hasCharset() {
			c.Collation = tc.ID
			if cd.Collation != "" {
				cc, err := CollationByName(cd.Collation)
				if err != nil {
					return nil, fmt.Errorf("%s column %s: %w", d.QualifiedName(), cd.Name, err)
				}
				c.Collation = cc.ID
			}
		}
		if _, dup := index[cd.Name]; dup {
			return nil, fmt.Errorf("mysqlbinlog: %s has two columns named %s", d.QualifiedName(), cd.Name)
		}
		index[cd.Name] = i
		t.Columns = append(t.Columns, c)
	}
	for _, name := range d.PrimaryKey {
		i, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("mysqlbinlog: %s primary key names column %s, which the table does not have", d.QualifiedName(), name)
		}
		t.Columns[i].Nullable = false // a primary key's columns are NOT NULL
		t.PrimaryKey = append(t.PrimaryKey, i)
	}
	return t, nil
}

// ShowCreateTable is the table's SHOW CREATE TABLE as MySQL 8.4 prints it.
func (d *TableDef) ShowCreateTable() (string, error) {
	t, err := d.Table(0)
	if err != nil {
		return "", err
	}
	tc, _ := d.tableCollation()
	var lines []string
	for i, cd := range d.Columns {
		c := t.Columns[i]
		var b strings.Builder
		b.WriteString(quoteName(cd.Name) + " " + c.TypeSQL())
		if c.hasCharset() && c.Collation != tc.ID {
			cc, err := CollationByID(c.Collation)
			if err != nil {
				return "", err
			}
			if cc.Charset != tc.Charset {
				b.WriteString(" CHARACTER SET " + cc.Charset)
			}
			if !cc.Primary || cc.Charset == tc.Charset {
				b.WriteString(" COLLATE " + cc.Name)
			}
		}
		switch {
		case cd.Generated != "":
			kind := "VIRTUAL"
			if cd.Stored {
				kind = "STORED"
			}
			fmt.Fprintf(&b, " GENERATED ALWAYS AS (%s) %s", cd.Generated, kind)
			if !c.Nullable {
				b.WriteString(" NOT NULL")
			}
		default:
			if !c.Nullable {
				b.WriteString(" NOT NULL")
			}
			switch {
			case cd.Default != "":
				b.WriteString(" DEFAULT " + cd.Default)
			case c.Nullable && c.binlogType() != 0xfc: // BLOB and TEXT print no DEFAULT NULL
				b.WriteString(" DEFAULT NULL")
			}
			if cd.AutoIncrement {
				b.WriteString(" AUTO_INCREMENT")
			}
		}
		if cd.Invisible {
			b.WriteString(" /*!80023 INVISIBLE */")
		}
		lines = append(lines, b.String())
	}
	if len(d.PrimaryKey) > 0 {
		lines = append(lines, "PRIMARY KEY ("+quoteNames(d.PrimaryKey)+")")
	}
	for _, k := range d.UniqueKeys {
		lines = append(lines, "UNIQUE KEY "+quoteName(k.Name)+" ("+quoteNames(k.Columns)+")")
	}
	return fmt.Sprintf("CREATE TABLE %s (\n  %s\n) ENGINE=InnoDB DEFAULT CHARSET=%s COLLATE=%s",
		quoteName(d.Name), strings.Join(lines, ",\n  "), tc.Charset, tc.Name), nil
}

func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoteName(n)
	}
	return strings.Join(q, ",")
}

// ColumnInfo is one row of information_schema.COLUMNS as MySQL 8.4 fills
// it. Pointer fields are NULL when nil.
type ColumnInfo struct {
	TableSchema, TableName, ColumnName string
	OrdinalPosition                    int
	ColumnDefault                      *string
	IsNullable                         string // "YES" or "NO"
	DataType                           string
	CharacterMaximumLength             *int64
	CharacterOctetLength               *int64
	NumericPrecision, NumericScale     *int64
	DatetimePrecision                  *int64
	CharacterSetName, CollationName    *string
	ColumnType                         string
	ColumnKey                          string // "PRI", "UNI" or ""
	Extra                              string
	GenerationExpression               string
}

// StatisticsInfo is one row of information_schema.STATISTICS.
type StatisticsInfo struct {
	TableSchema, TableName, IndexName, ColumnName string
	NonUnique                                     int
	SeqInIndex                                    int
	SubPart                                       *int64
}

// InformationSchema returns the table's rows of information_schema
// COLUMNS and STATISTICS.
func (d *TableDef) InformationSchema() ([]ColumnInfo, []StatisticsInfo, error) {
	t, err := d.Table(0)
	if err != nil {
		return nil, nil, err
	}
	pk := map[string]bool{}
	for _, n := range d.PrimaryKey {
		pk[n] = true
	}
	uni := map[string]bool{}
	for _, k := range d.UniqueKeys {
		if len(k.Columns) == 1 {
			uni[k.Columns[0]] = true
		}
	}
	i64 := func(v int64) *int64 { return &v }
	str := func(s string) *string { return &s }
	var cols []ColumnInfo
	for i, cd := range d.Columns {
		c := t.Columns[i]
		ci := ColumnInfo{
			TableSchema: d.Schema, TableName: d.Name, ColumnName: cd.Name, OrdinalPosition: i + 1,
			IsNullable: "YES", DataType: c.DataType(), ColumnType: c.TypeSQL(),
			GenerationExpression: cd.Generated,
		}
		if !c.Nullable {
			ci.IsNullable = "NO"
		}
		if cd.Default != "" {
			ci.ColumnDefault = str(strings.Trim(cd.Default, "'"))
		}
		switch {
		case pk[cd.Name]:
			ci.ColumnKey = "PRI"
		case uni[cd.Name]:
			ci.ColumnKey = "UNI"
		}
		var extra []string
		if cd.AutoIncrement {
			extra = append(extra, "auto_increment")
		}
		if cd.Generated != "" {
			if cd.Stored {
				extra = append(extra, "STORED GENERATED")
			} else {
				extra = append(extra, "VIRTUAL GENERATED")
			}
		}
		if cd.Invisible {
			extra = append(extra, "INVISIBLE")
		}
		ci.Extra = strings.Join(extra, " ")
		switch c.Kind {
		case KindTinyInt:
			ci.NumericPrecision, ci.NumericScale = i64(3), i64(0)
		case KindSmallInt:
			ci.NumericPrecision, ci.NumericScale = i64(5), i64(0)
		case KindMediumInt:
			ci.NumericPrecision, ci.NumericScale = i64(7), i64(0)
		case KindInt:
			ci.NumericPrecision, ci.NumericScale = i64(10), i64(0)
		case KindBigInt:
			p := int64(19)
			if c.Unsigned {
				p = 20
			}
			ci.NumericPrecision, ci.NumericScale = i64(p), i64(0)
		case KindDecimal:
			ci.NumericPrecision, ci.NumericScale = i64(int64(c.Precision)), i64(int64(c.Scale))
		case KindFloat:
			ci.NumericPrecision = i64(12)
		case KindDouble:
			ci.NumericPrecision = i64(22)
		case KindBit:
			ci.NumericPrecision = i64(int64(c.Length))
		case KindTime, KindDatetime, KindTimestamp:
			ci.DatetimePrecision = i64(int64(c.FSP))
		}
		if c.hasCharset() {
			cc, err := CollationByID(c.Collation)
			if err != nil {
				return nil, nil, err
			}
			ci.CharacterSetName, ci.CollationName = str(cc.Charset), str(cc.Name)
			maxLen, _ := collationMaxLen(cc.ID)
			var chars int64
			switch c.Kind {
			case KindChar, KindVarchar:
				chars = int64(c.Length)
			case KindTinyText:
				chars = 255 / int64(maxLen)
			case KindText:
				chars = 65535 / int64(maxLen)
			case KindMediumText:
				chars = 16777215 / int64(maxLen)
			case KindLongText:
				chars = 4294967295 / int64(maxLen)
			case KindEnum, KindSet:
				longest := 0
				for _, e := range c.Elements {
					longest = max(longest, len([]rune(e)))
				}
				if c.Kind == KindSet {
					longest = 0
					for j, e := range c.Elements {
						longest += len([]rune(e))
						if j > 0 {
							longest++
						}
					}
				}
				chars = int64(longest)
			}
			ci.CharacterMaximumLength, ci.CharacterOctetLength = i64(chars), i64(chars*int64(maxLen))
			if c.Kind == KindText || c.Kind == KindTinyText || c.Kind == KindMediumText || c.Kind == KindLongText {
				ci.CharacterOctetLength = i64(map[Kind]int64{KindTinyText: 255, KindText: 65535, KindMediumText: 16777215, KindLongText: 4294967295}[c.Kind])
			}
		}
		switch c.Kind {
		case KindBinary, KindVarbinary:
			ci.CharacterMaximumLength, ci.CharacterOctetLength = i64(int64(c.Length)), i64(int64(c.Length))
		case KindTinyBlob, KindBlob, KindMediumBlob, KindLongBlob:
			n := map[Kind]int64{KindTinyBlob: 255, KindBlob: 65535, KindMediumBlob: 16777215, KindLongBlob: 4294967295}[c.Kind]
			ci.CharacterMaximumLength, ci.CharacterOctetLength = i64(n), i64(n)
		}
		cols = append(cols, ci)
	}
	var stats []StatisticsInfo
	for i, n := range d.PrimaryKey {
		stats = append(stats, StatisticsInfo{TableSchema: d.Schema, TableName: d.Name, IndexName: "PRIMARY", ColumnName: n, SeqInIndex: i + 1})
	}
	for _, k := range d.UniqueKeys {
		for i, n := range k.Columns {
			stats = append(stats, StatisticsInfo{TableSchema: d.Schema, TableName: d.Name, IndexName: k.Name, ColumnName: n, SeqInIndex: i + 1})
		}
	}
	return cols, stats, nil
}
