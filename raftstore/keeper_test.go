package raftstore

import (
	"errors"
	"testing"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/keeptest"
)

// TestFencedKeeper: the owner's keeper on a real single-node store keeps
// all; reopening is a restart of the node on its data directory.
func TestFencedKeeper(t *testing.T) {
	keeptest.Run(t, func(t *testing.T) keeptest.Open {
		c := newCluster(t, 1, nil)
		ctx := testCtx(t)
		s := c.leader()
		if _, err := s.CreateDestination(ctx, testSpec("shop")); err != nil {
			t.Fatal(err)
		}
		epoch, err := s.Assign(ctx, "shop", s.ID())
		if err != nil {
			t.Fatal(err)
		}
		opened := 0
		return func() group.Keeper {
			if opened++; opened > 1 {
				c.kill(0)
				c.restart(0)
				s = c.leader()
				if err := s.Consistent(ctx); err != nil {
					t.Fatal(err)
				}
			}
			return s.Keeper("shop", epoch, 0)
		}
	})
}

// TestFencedKeeperRefusedOnceDeposed: a deposed owner's keeper keeps
// nothing more.
func TestFencedKeeperRefusedOnceDeposed(t *testing.T) {
	c := newCluster(t, 1, nil)
	ctx := testCtx(t)
	s := c.leader()
	if _, err := s.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	e1, err := s.Assign(ctx, "shop", s.ID())
	if err != nil {
		t.Fatal(err)
	}
	k := s.Keeper("shop", e1, 0)
	defer k.Close()
	if _, err := s.Assign(ctx, "shop", s.ID()); err != nil {
		t.Fatal(err)
	}
	if err := k.KeepDecision(ctx, group.DDLDecision{Lock: 1, Action: group.DecisionSkip}); !errors.Is(err, ErrStaleEpoch) {
		t.Errorf("decision of a deposed owner: %v", err)
	}
	if err := k.KeepPlacement(ctx, group.Placement{Table: "shop_0.orders"}); !errors.Is(err, ErrStaleEpoch) {
		t.Errorf("placement of a deposed owner: %v", err)
	}
	if err := k.SaveCursor("c1", &group.Cursor{Seq: 3}); err != nil {
		t.Fatal(err) // pending until the next batch
	}
	if err := k.cursors.Flush(ctx); !errors.Is(err, ErrStaleEpoch) {
		t.Errorf("cursors of a deposed owner: %v", err)
	}
	if err := k.SaveCursor("c1", &group.Cursor{Seq: 4}); !errors.Is(err, ErrStaleEpoch) {
		t.Errorf("cursor saved after the owner was fenced: %v", err)
	}
}
