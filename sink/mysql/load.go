package mysql

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	driver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/sink"
)

// A run of INSERTs goes as LOAD DATA LOCAL INFILE from memory: measured on
// the benchmark's orders, MariaDB loads rows about twice as fast as it
// parses the same rows as a multi-row INSERT. A server that refuses it
// (local_infile off) gets multi-row INSERTs from then on.

// errNoLoad: the server refuses LOAD DATA LOCAL; use an INSERT.
var errNoLoad = errors.New("the server refuses LOAD DATA LOCAL INFILE")

// loadReaders numbers the in-memory files LOAD DATA reads.
var loadReaders atomic.Uint64

// loadable reports whether rows of tv can be loaded: every column's value
// has a text form LOAD DATA reads back exactly (not a GEOMETRY's), and
// the server has not refused.
func (t *Target) loadable(tv *change.Table) bool {
	if t.noLoad.Load() {
		return false
	}
	for _, c := range tv.Columns {
		switch c.Type {
		case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
			return false
		}
	}
	return true
}

// viaHex reports whether column c is loaded as hex through a variable
// (its bytes carry no character set); viaNumber, as a number: a BIT, whose
// text would be taken as the bits of its characters, and a YEAR, whose
// text "0" is 2000 where the number 0 is 0000.
func viaHex(c change.Column) bool    { return c.Binary }
func viaNumber(c change.Column) bool { return c.Type == "bit" || c.Type == "year" }

// loadStatement is the LOAD DATA of rows of tv into table, with %s for the
// in-memory file's name.
func (t *Target) loadStatement(tv *change.Table, table string) string {
	k := statementKey{tv, 'l'}
	if s, ok := t.stmts.Load(k); ok {
		return s.(string)
	}
	cols := make([]string, 0, len(tv.Columns)+1)
	var set []string
	for i, c := range tv.Columns {
		switch v := "@v" + strconv.Itoa(i); {
		case viaHex(c):
			cols = append(cols, v)
			set = append(set, quote(c.Name)+" = UNHEX("+v+")")
		case viaNumber(c):
			cols = append(cols, v)
			set = append(set, quote(c.Name)+" = CAST("+v+" AS UNSIGNED)")
		default:
			cols = append(cols, quote(c.Name))
		}
	}
	if oc := t.spec.OriginColumn; oc != "" {
		cols = append(cols, quote(oc))
	}
	q := "LOAD DATA LOCAL INFILE 'Reader::%s' IGNORE INTO TABLE " + strings.ReplaceAll(table, "%", "%%") +
		" CHARACTER SET utf8mb4 (" + strings.ReplaceAll(strings.Join(cols, ", "), "%", "%%") + ")"
	if len(set) > 0 {
		q += " SET " + strings.ReplaceAll(strings.Join(set, ", "), "%", "%%")
	}
	t.stmts.Store(k, q)
	return q
}

// load inserts cs, INSERTs of table version tv, with LOAD DATA: each row
// inserted, and no warning (a duplicate key, a value the column could not
// hold), or errOneByOne; errNoLoad when the server refuses it.
func (t *Target) load(ctx context.Context, tx *sql.Tx, tv *change.Table, table string, cs []sink.Change) error {
	hexCol := make([]bool, len(tv.Columns))
	for i, c := range tv.Columns {
		hexCol[i] = viaHex(c)
	}
	var b []byte
	for k, c := range cs {
		if k == 1 {
			b = slices.Grow(b, len(b)*len(cs)*5/4) // rows are about as long as the first
		}
		for i, v := range c.After {
			if i > 0 {
				b = append(b, '\t')
			}
			b = appendField(b, v, hexCol[i])
		}
		if t.spec.OriginColumn != "" {
			b = append(b, '\t')
			b = appendField(b, c.Source+"/"+c.Origin, false)
		}
		b = append(b, '\n')
	}
	name := "braid-sink-" + strconv.FormatUint(loadReaders.Add(1), 10)
	driver.RegisterReaderHandler(name, func() io.Reader { return bytes.NewReader(b) })
	defer driver.DeregisterReaderHandler(name)
	res, err := tx.ExecContext(ctx, fmt.Sprintf(t.loadStatement(tv, table), name))
	if refused(err) {
		t.noLoad.Store(true)
		return errNoLoad
	}
	if err != nil {
		return fmt.Errorf("sink %s: %d INSERTs into %s from seq %d: %w", t.spec.Name, len(cs), table, cs[0].Seq, err)
	}
	var warnings int
	if err := tx.QueryRowContext(ctx, "SELECT @@warning_count").Scan(&warnings); err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != int64(len(cs)) || warnings != 0 {
		return errOneByOne
	}
	return nil
}

// refused reports the errors of a server (or driver) that does not allow
// LOAD DATA LOCAL INFILE.
func refused(err error) bool {
	var me *driver.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1148, 3948, 4166: // not allowed with this version, local data disabled
			return true
		}
	}
	return err != nil && strings.Contains(err.Error(), "local_infile")
}

// appendField appends v as a field of LOAD DATA's default format: \N for
// NULL, tabs, newlines, NULs and backslashes escaped; as hex when asHex.
func appendField(b []byte, v change.Value, asHex bool) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, `\N`...)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case float32:
		return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case string:
		if asHex {
			return hex.AppendEncode(b, []byte(v))
		}
		return appendEscaped(b, v)
	case []byte:
		if asHex {
			return hex.AppendEncode(b, v)
		}
		return appendEscaped(b, string(v))
	}
	return appendEscaped(b, fmt.Sprint(v))
}

func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case 0:
			b = append(b, `\0`...)
		default:
			b = append(b, c)
		}
	}
	return b
}
