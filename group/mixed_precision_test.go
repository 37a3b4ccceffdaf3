package group_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/group/grouptest"
	"github.com/braid-cdc/braid/spec"
)

// TestMixedPrecisionOrder merges a MySQL 8 source, whose commit times are
// its original_commit_timestamp in µs, with a MariaDB one, whose are whole
// seconds: the merge orders them by commit time to the µs, a µs source's
// transaction of a whole second ties with the other's of the same second
// and goes first by its source index, and the merged events keep their
// µs.
func TestMixedPrecisionOrder(t *testing.T) {
	ds := scriptSpec(2, spec.ShardDDLPassthrough)
	srcs, clock := grouptest.NewSources(), grouptest.NewClock(scriptT0)
	mysql, mariadb := srcs.Log("s0"), srcs.Log("s1")
	t0 := scriptT0.Add(-10 * time.Second)
	// Both binlogs are read before the merge starts, so it has every
	// transaction's key to choose from.
	mariadb.Tx(t0, orders("shop_1"), row(1, "second"))
	mysql.Tx(t0.Add(250*time.Millisecond), orders("shop_0"), row(2, "µs"))
	mysql.Tx(t0.Add(750*time.Millisecond+1*time.Microsecond), orders("shop_0"), row(3, "µs"))
	mysql.Tx(t0.Add(time.Second), orders("shop_0"), row(4, "a whole second"))
	mariadb.Tx(t0.Add(time.Second), orders("shop_1"), row(5, "second"))
	mysql.Tx(t0.Add(time.Second+1*time.Microsecond), orders("shop_0"), row(6, "µs"))
	d := runScripted(t, group.Config{Spec: ds, Sources: srcs, Clock: clock})
	mysql.Heartbeat(false)
	mariadb.Heartbeat(false)
	var ids []int64
	var got []string
	for range 6 {
		x := d.next(t)
		ids = append(ids, x.ids...)
		got = append(got, fmt.Sprintf("%s %v", x.source, x.ids))
		if slices.Equal(x.ids, []int64{3}) && !x.commit.Equal(t0.Add(750*time.Millisecond+time.Microsecond)) {
			t.Errorf("id 3 went out with commit time %s, its µs lost", x.commit.Format(time.RFC3339Nano))
		}
	}
	d.none(t)
	if !slices.Equal(ids, []int64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("merged as %v; want by commit time to the µs, a tie by source index", got)
	}
	if st := d.d.Stats(); st.Late != 0 || st.Undercut != 0 {
		t.Errorf("%d late, %d below their source's watermark; want none", st.Late, st.Undercut)
	}
}
