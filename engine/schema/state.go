package schema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/charset"

	"github.com/braid-cdc/braid/engine/change"
)

// The methods below edit a table's state for one ALTER TABLE clause (or the
// same change made by CREATE TABLE, CREATE/DROP INDEX). Column names compare
// case-insensitively, as in MySQL.

func (st *schemaState) alterSpec(spec *ast.AlterTableSpec) error {
	switch spec.Tp {
	case ast.AlterTableAddColumns:
		pos := spec.Position
		if len(spec.NewColumns) > 1 {
			pos = nil
		}
		for _, def := range spec.NewColumns {
			if err := st.addColumn(def, pos, spec.IfNotExists); err != nil {
				return err
			}
		}
		for _, c := range spec.NewConstraints {
			if ix, ok := ddlIndex(c); ok {
				st.addIndex(ix, c.IfNotExists)
			}
		}
	case ast.AlterTableDropColumn:
		return st.dropColumn(spec.OldColumnName.Name.O, spec.IfExists)
	case ast.AlterTableModifyColumn:
		def := spec.NewColumns[0]
		return st.replaceColumn(def.Name.Name.O, def, spec.Position, spec.IfExists)
	case ast.AlterTableChangeColumn:
		return st.replaceColumn(spec.OldColumnName.Name.O, spec.NewColumns[0], spec.Position, spec.IfExists)
	case ast.AlterTableRenameColumn:
		return st.renameColumn(spec.OldColumnName.Name.O, spec.NewColumnName.Name.O)
	case ast.AlterTableAddConstraint:
		if ix, ok := ddlIndex(spec.Constraint); ok {
			st.addIndex(ix, spec.IfNotExists || spec.Constraint.IfNotExists)
		}
	case ast.AlterTableDropPrimaryKey:
		st.dropIndex("PRIMARY")
	case ast.AlterTableDropIndex:
		st.dropIndex(spec.Name)
	case ast.AlterTableDropCheck:
		// DROP CONSTRAINT name (MySQL 8.0.19) also drops a unique index.
		if spec.Constraint != nil {
			st.dropIndex(spec.Constraint.Name)
		}
	case ast.AlterTableRenameIndex:
		if i := st.indexNamed(spec.FromKey.O); i >= 0 && !st.indexes[i].Primary {
			st.indexes[i].Name = spec.ToKey.O
		}
	case ast.AlterTableOption:
		for _, opt := range spec.Options {
			cs := ddlOptionCharset(opt)
			if cs == "" {
				continue
			}
			st.table.Charset = ddlKeptCharset(cs)
			if opt.Tp == ast.TableOptionCharset && opt.UintValue == ast.TableOptionCharsetWithConvertTo {
				st.convertTo(cs)
			}
		}
	}
	// ALTER COLUMN SET/DROP DEFAULT, table options, partitioning, locks,
	// other indexes and checks do not change the model.
	return nil
}

// addColumn adds a column at pos (nil: last).
func (st *schemaState) addColumn(def *ast.ColumnDef, pos *ast.ColumnPosition, ifNotExists bool) error {
	col, primary, unique, err := ddlColumn(def, st.table.Charset)
	if err != nil {
		return err
	}
	if st.table.ColumnIndex(col.Name) >= 0 {
		if ifNotExists {
			return nil
		}
		return fmt.Errorf("column %q already exists", col.Name)
	}
	if err := st.insertColumn(col, pos, len(st.table.Columns)); err != nil {
		return err
	}
	st.columnIndexes(col.Name, primary, unique)
	return nil
}

// insertColumn inserts col at FIRST, AFTER x, or else at index at.
func (st *schemaState) insertColumn(col change.Column, pos *ast.ColumnPosition, at int) error {
	if pos != nil {
		switch pos.Tp {
		case ast.ColumnPositionFirst:
			at = 0
		case ast.ColumnPositionAfter:
			i := st.table.ColumnIndex(pos.RelativeColumn.Name.O)
			if i < 0 {
				return fmt.Errorf("AFTER column %q not found", pos.RelativeColumn.Name.O)
			}
			at = i + 1
		}
	}
	st.table.Columns = slices.Insert(st.table.Columns, at, col)
	return nil
}

// columnIndexes adds the indexes a column definition declares inline.
func (st *schemaState) columnIndexes(name string, primary, unique bool) {
	if primary {
		st.addIndex(change.SchemaIndex{Name: "PRIMARY", Primary: true, Columns: []string{name}}, false)
	}
	if unique {
		st.addIndex(change.SchemaIndex{Columns: []string{name}}, false)
	}
}

// replaceColumn is MODIFY (old is the new definition's name) and CHANGE.
func (st *schemaState) replaceColumn(old string, def *ast.ColumnDef, pos *ast.ColumnPosition, ifExists bool) error {
	i := st.table.ColumnIndex(old)
	if i < 0 {
		if ifExists {
			return nil
		}
		return fmt.Errorf("column %q not found", old)
	}
	col, primary, unique, err := ddlColumn(def, st.table.Charset)
	if err != nil {
		return err
	}
	if j := st.table.ColumnIndex(col.Name); j >= 0 && j != i {
		return fmt.Errorf("column %q already exists", col.Name)
	}
	oldName := st.table.Columns[i].Name
	st.table.Columns = slices.Delete(st.table.Columns, i, i+1)
	if err := st.insertColumn(col, pos, i); err != nil {
		return err
	}
	st.renameInIndexes(oldName, col.Name)
	st.columnIndexes(col.Name, primary, unique)
	return nil
}

func (st *schemaState) renameColumn(old, name string) error {
	i := st.table.ColumnIndex(old)
	if i < 0 {
		return fmt.Errorf("column %q not found", old)
	}
	if j := st.table.ColumnIndex(name); j >= 0 && j != i {
		return fmt.Errorf("column %q already exists", name)
	}
	st.renameInIndexes(st.table.Columns[i].Name, name)
	st.table.Columns[i].Name = name
	return nil
}

// dropColumn removes a column and takes it out of the indexes; an index
// left without columns is dropped, as MySQL does.
func (st *schemaState) dropColumn(name string, ifExists bool) error {
	i := st.table.ColumnIndex(name)
	if i < 0 {
		if ifExists {
			return nil
		}
		return fmt.Errorf("column %q not found", name)
	}
	st.table.Columns = slices.Delete(st.table.Columns, i, i+1)
	kept := st.indexes[:0]
	for _, ix := range st.indexes {
		n := len(ix.Columns)
		ix.Columns = slices.DeleteFunc(ix.Columns, func(c string) bool { return strings.EqualFold(c, name) })
		if n == 0 || len(ix.Columns) > 0 {
			kept = append(kept, ix)
		}
	}
	st.indexes = slices.Clip(kept)
	return nil
}

func (st *schemaState) renameInIndexes(old, name string) {
	for _, ix := range st.indexes {
		for j, c := range ix.Columns {
			if strings.EqualFold(c, old) {
				ix.Columns[j] = name
			}
		}
	}
}

func (st *schemaState) indexNamed(name string) int {
	return slices.IndexFunc(st.indexes, func(ix change.SchemaIndex) bool { return strings.EqualFold(ix.Name, name) })
}

// addIndex adds a primary key (replacing one) or a unique index; an
// unnamed unique index is named after its first column, as MySQL does.
func (st *schemaState) addIndex(ix change.SchemaIndex, ifNotExists bool) {
	if ix.Primary {
		st.dropIndex("PRIMARY")
		st.indexes = slices.Insert(st.indexes, 0, ix)
		return
	}
	if ix.Name == "" {
		base := "functional_index"
		if len(ix.Columns) > 0 {
			base = ix.Columns[0]
		}
		ix.Name = base
		for n := 2; st.indexNamed(ix.Name) >= 0; n++ {
			ix.Name = fmt.Sprintf("%s_%d", base, n)
		}
	}
	if i := st.indexNamed(ix.Name); i >= 0 {
		if !ifNotExists {
			st.indexes[i] = ix
		}
		return
	}
	st.indexes = append(st.indexes, ix)
}

func (st *schemaState) dropIndex(name string) {
	if strings.EqualFold(name, "PRIMARY") {
		st.indexes = slices.DeleteFunc(st.indexes, func(ix change.SchemaIndex) bool { return ix.Primary })
		return
	}
	if i := st.indexNamed(name); i >= 0 {
		st.indexes = slices.Delete(st.indexes, i, i+1)
	}
}

// deriveKeys sets Column.Key from the indexes: the primary key, else the
// first unique index on whole NOT NULL columns. Primary key columns are
// NOT NULL.
func (st *schemaState) deriveKeys() {
	cols := st.table.Columns
	for i := range cols {
		cols[i].Key = false
	}
	var key []string
	for _, ix := range st.indexes {
		if ix.Primary {
			key = ix.Columns
			for _, c := range key {
				if j := st.table.ColumnIndex(c); j >= 0 {
					cols[j].Nullable = false
				}
			}
			break
		}
	}
	for _, ix := range st.indexes {
		if key != nil {
			break
		}
		if ix.Partial || len(ix.Columns) == 0 {
			continue
		}
		if !slices.ContainsFunc(ix.Columns, func(c string) bool {
			j := st.table.ColumnIndex(c)
			return j < 0 || cols[j].Nullable
		}) {
			key = ix.Columns
		}
	}
	for _, c := range key {
		if j := st.table.ColumnIndex(c); j >= 0 {
			cols[j].Key = true
		}
	}
	st.table.Unique = nil
	for _, ix := range st.indexes {
		if !ix.Primary && !ix.Partial && len(ix.Columns) > 0 && !slices.Equal(ix.Columns, key) {
			st.table.Unique = append(st.table.Unique, slices.Clone(ix.Columns))
		}
	}
}

// convertTo is CONVERT TO CHARACTER SET cs: character columns take the
// charset, and with binary become their binary counterparts.
func (st *schemaState) convertTo(cs string) {
	if cs == charset.CharsetBin {
		st.convertToBinary()
		return
	}
	for i := range st.table.Columns {
		if c := &st.table.Columns[i]; TextTypes[c.Type] && !c.Binary {
			c.Charset = ""
			if change.ConvertedCharset(cs) {
				c.Charset = cs
			}
		}
	}
}

// convertToBinary is CONVERT TO CHARACTER SET binary: character columns
// become their binary counterparts.
func (st *schemaState) convertToBinary() {
	to := map[string]string{"char": "binary", "varchar": "varbinary", "tinytext": "tinyblob",
		"text": "blob", "mediumtext": "mediumblob", "longtext": "longblob"}
	for i := range st.table.Columns {
		c := &st.table.Columns[i]
		if b, ok := to[c.Type]; ok && !c.Binary {
			c.RawType = b + strings.TrimPrefix(c.RawType, c.Type)
			c.Type, c.Binary, c.Charset = b, true, ""
		}
	}
}
