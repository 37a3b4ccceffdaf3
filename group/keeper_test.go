package group_test

import (
	"testing"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/keeptest"
)

// TestFileKeeper: a destination's directory keeps all, across reopening.
func TestFileKeeper(t *testing.T) {
	keeptest.Run(t, func(t *testing.T) keeptest.Open {
		dir := t.TempDir()
		return func() group.Keeper { return group.NewFileKeeper(dir, "shop") }
	})
}

// TestFileKeeperKeepsDestinationsApart: two destinations in one directory
// see only their own cursors, decisions and placements.
func TestFileKeeperKeepsDestinationsApart(t *testing.T) {
	dir := t.TempDir()
	shop, shop2 := group.NewFileKeeper(dir, "shop"), group.NewFileKeeper(dir, "shop_2")
	if err := shop.SaveCursor("capture", &group.Cursor{Seq: 4}); err != nil {
		t.Fatal(err)
	}
	if err := shop2.SaveCursor("sink:x", &group.Cursor{Seq: 9}); err != nil {
		t.Fatal(err)
	}
	if err := shop2.KeepDecision(t.Context(), group.DDLDecision{Lock: 1, Action: group.DecisionSkip}); err != nil {
		t.Fatal(err)
	}
	got, err := shop.Cursors()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["capture"] == nil || got["capture"].Seq != 4 {
		t.Errorf("shop's cursors: %v", got)
	}
	if d, err := shop.Decisions(); err != nil || len(d) != 0 {
		t.Errorf("shop's decisions: %v, %v", d, err)
	}
}

// TestMemKeeper: memory keeps all for the process, across Close.
func TestMemKeeper(t *testing.T) {
	keeptest.Run(t, func(t *testing.T) keeptest.Open {
		m := &group.MemKeeper{}
		return func() group.Keeper { return m }
	})
}
