package group_test

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/group/grouptest"
	"github.com/braid-cdc/braid/spec"
)

// modelSources are scripted sources whose readers, as the binlog reader's
// schema model does when a DDL comes, compare each table version they
// handed out with a copy of it once the event carrying it is emitted: on
// a goroutine of their own, in no order with the merge's work (the
// binlog reader's next DDL may come at any time).
type modelSources struct {
	*grouptest.Sources
	t *testing.T
}

func (s modelSources) Reader(cfg binlog.Config) (group.Reader, error) {
	r, err := s.Sources.Reader(cfg)
	return modelReader{Reader: r, t: s.t}, err
}

type modelReader struct {
	group.Reader
	t *testing.T
}

func (r modelReader) Run(ctx context.Context, emit func(*change.Event) error) error {
	var model sync.WaitGroup
	defer model.Wait()
	return r.Reader.Run(ctx, func(ev *change.Event) error {
		var version *change.Table
		if len(ev.Rows) > 0 {
			version = ev.Rows[0].Table
		}
		if err := emit(ev); err != nil {
			return err
		}
		if version == nil {
			return nil
		}
		model.Go(func() {
			// schemaState.equal: every field, the logical names last.
			if !reflect.DeepEqual(version, version.Clone()) {
				r.t.Errorf("the merge changed the table version %s its reader handed out", version.FullName())
			}
		})
		return nil
	})
}

// TestStampLeavesReadersVersions: the merge stamps a table version's
// logical names on a copy of its own, never on the version the reader
// handed out, which the reader's schema model keeps and compares with a
// DDL's new one on the reader's goroutine (run with -race: on the old
// code the race detector reports the stamp against the comparison).
// The rows of one version go out with one stamped copy.
func TestStampLeavesReadersVersions(t *testing.T) {
	ds := scriptSpec(1, spec.ShardDDLPassthrough)
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	s0 := srcs.Log("s0")
	d := runScripted(t, group.Config{Spec: ds, Sources: modelSources{Sources: srcs, t: t}, Clock: clock})
	version := orders("shop_0")
	s0.Tx(scriptT0, version, row(1, "a"), row(2, "b"))
	s0.Tx(scriptT0, version, row(3, "c"))
	a, b := d.next(t), d.next(t)
	d.none(t)
	if version.LogicalSchema != "" || version.LogicalName != "" {
		t.Errorf("the reader's version was stamped %s.%s", version.LogicalSchema, version.LogicalName)
	}
	stamped := a.changes[0].Table
	for _, rc := range append(a.changes, b.changes...) {
		if rc.Table != stamped {
			t.Fatalf("rows of one version went out with tables %p and %p", stamped, rc.Table)
		}
	}
	if stamped == version {
		t.Fatal("rows went out with the reader's own version")
	}
	if ls, ln := stamped.Logical(); ls != "shop" || ln != "orders" || !reflect.DeepEqual(stamped.Columns, version.Columns) {
		t.Errorf("rows went out as %s.%s with columns %v; want shop.orders with the version's %v", ls, ln, stamped.Columns, version.Columns)
	}
}
