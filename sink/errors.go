package sink

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/braid-cdc/braid/engine/change"
)

// ErrBehind: a target's checkpoint is past what a runner was applying
// (another runner applied it); the runner starts again from the
// checkpoints.
var ErrBehind = errors.New("the target has applied this already")

// ErrCollision: two shard tables write the same key into one target
// table that has no origin column to keep them apart (a *CollisionError
// says which).
var ErrCollision = errors.New("two shard tables write one key")

// CollisionError is an INSERT (or a key-changing UPDATE) that found its
// key in the target although its checkpoint says it was never applied:
// another shard table's row, or one there before the sink.
type CollisionError struct {
	Sink string
	// Table is the target table, Logical the logical one.
	Table, Logical string
	// Source and Origin ("schema.table") are the shard table whose change
	// found the key.
	Source, Origin string
	// Columns and Values are the key.
	Columns []string
	Values  []change.Value
	// Holders are the shard tables ("source/schema.table") that hold the
	// key at the sources, once looked up (Runner.Holders); empty when not
	// known.
	Holders []string
}

func (e *CollisionError) Error() string {
	key := make([]string, len(e.Columns))
	for i, c := range e.Columns {
		key[i] = fmt.Sprintf("%s=%v", c, e.Values[i])
	}
	by := "written by another shard table of " + e.Logical + " or there before the sink"
	if others := slices.DeleteFunc(slices.Clone(e.Holders), func(h string) bool { return h == e.Source+"/"+e.Origin }); len(others) > 0 {
		by = "written by " + strings.Join(others, " and ")
	}
	return fmt.Sprintf("%v: sink %s: %s/%s writes key %s into %s, which holds it already, %s: set origin_column (e.g. _shard) to keep each shard table's rows apart",
		ErrCollision, e.Sink, e.Source, e.Origin, strings.Join(key, ","), e.Table, by)
}

// Collision is the CollisionError of change c, applied by sink sinkName
// to target table table, whose INSERT found a key taken: the key of
// columns (a target key's column names, as the target gives them), with
// c's values of them; its primary key when columns is empty or names a
// column the change does not have (the origin column, say).
func Collision(sinkName, table string, c Change, columns []string) *CollisionError {
	rc := c.Row
	var idx []int
	for _, name := range columns {
		i := slices.IndexFunc(rc.Table.Columns, func(col change.Column) bool { return strings.EqualFold(col.Name, name) })
		if i < 0 {
			idx = nil
			break
		}
		idx = append(idx, i)
	}
	if idx == nil {
		idx = KeyColumns(rc.Table)
	}
	e := &CollisionError{Sink: sinkName, Table: table, Logical: c.Logical, Source: c.Source, Origin: c.Origin}
	for _, i := range idx {
		e.Columns = append(e.Columns, rc.Table.Columns[i].Name)
		e.Values = append(e.Values, c.After[i])
	}
	return e
}

// Is makes errors.Is(err, ErrCollision) hold.
func (e *CollisionError) Is(target error) bool { return target == ErrCollision }

// PartialImageError is the error of change c, whose after image leaves
// columns out, for a sink that cannot apply it.
func PartialImageError(sinkName string, c Change) error {
	return fmt.Errorf("sink %s: seq %d, %s from %s/%s: the binlog's row image leaves columns out (binlog_row_image is MINIMAL or NOBLOB on source %s), and the sink writes whole rows, so it would set them NULL: set binlog_row_image=FULL there; the rows written so far need a snapshot (snapshot: initial) or a start past them",
		sinkName, c.Seq, c.Logical, c.Source, c.Origin, c.Source)
}
