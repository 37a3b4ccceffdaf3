package mysqltest_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
)

// A load behind a proxy follows a failover by itself: writes stop while
// the proxy is a black hole, the primary is killed once the replica has
// everything, the replica is promoted and the proxy switched, and the
// load goes on against the new primary. Every id it calls committed is
// on the new primary, and every id there was either committed or left
// unknown, never refused.
func TestLoadFollowsFailover(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	old, replica := tp.Primary(), tp.Replicas()[0]
	old.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id BIGINT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))")
	tp.WaitCaughtUp(t)
	proxy := tcpproxy.Start(t, old.Addr())
	load := mysqltest.StartLoad(t, proxy.Addr(), "d", "t", 10*time.Millisecond)
	committed := func(atLeast int) {
		t.Helper()
		retry.Until(t, 60*time.Second, func() error {
			if n := len(load.Result().Committed); n < atLeast {
				return fmt.Errorf("%d writes committed, want %d", n, atLeast)
			}
			return nil
		})
	}
	committed(20)

	proxy.Pause()
	tp.WaitCaughtUp(t)
	tp.KillPrimary(t)
	tp.Promote(t, replica)
	before := len(load.Result().Committed)
	proxy.Switch(replica.Addr())
	proxy.Resume()
	committed(before + 20) // nothing commits while paused: these went to the new primary
	res := load.Stop()

	onReplica := map[int64]bool{}
	for _, r := range replica.Query(t, "SELECT id FROM d.t") {
		id, _ := strconv.ParseInt(r[0], 10, 64)
		onReplica[id] = true
	}
	for _, id := range res.Committed {
		if !onReplica[id] {
			t.Errorf("id %d committed but not on the new primary", id)
		}
	}
	for id := range onReplica {
		if !slices.Contains(res.Committed, id) && !slices.Contains(res.Unknown, id) {
			t.Errorf("id %d on the new primary was neither committed nor unknown (refused: %v)", id, slices.Contains(res.Refused, id))
		}
	}
	t.Logf("%d committed, %d unknown, %d refused, %d failed connects", len(res.Committed), len(res.Unknown), len(res.Refused), res.ConnectFailures)
}
