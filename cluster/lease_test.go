package cluster_test

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/stream"
)

// TestOneOwnerServes: a destination created through one node gets one
// owner the nodes agree on, with an epoch; only the owner serves it, the
// others redirect to it, and its stream reaches a consumer through any
// node.
func TestOneOwnerServes(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 3)
	c.Node("n2").Create(destSpec("shop", src))
	owner, epoch := c.Owner("shop")
	if epoch == 0 {
		t.Fatal("assigned without an epoch")
	}
	for _, n := range c.Nodes() {
		status, loc := n.Get("/v1/destinations/shop")
		serving := n.Serving("shop")
		if n == owner {
			if status != http.StatusOK || serving != nil {
				t.Errorf("owner %s: state %d, serving: %v; want 200 and serving", n.Name, status, serving)
			}
			continue
		}
		if status != http.StatusTemporaryRedirect || !strings.HasPrefix(loc, owner.URL()+"/") {
			t.Errorf("%s: state %d to %q, want a redirect to the owner %s", n.Name, status, loc, owner.URL())
		}
		if !errors.Is(serving, stream.ErrUnknownDestination) {
			t.Errorf("%s serves shop too: %v", n.Name, serving)
		}
	}

	// Through a node that is not the owner, which redirects.
	var via []string
	for _, n := range c.Nodes() {
		if n != owner {
			via = append(via, n.URL())
		}
	}
	insert(t, src, span(1, 5)...)
	cs := consume(t, via, "shop", "app")
	cs.waitRows(t, span(1, 5)...)
	insert(t, src, span(6, 8)...)
	cs.waitRows(t, span(1, 8)...)
}

// TestCrashedOwnerReplaced: when the owner fails, another node takes the
// destination over with a higher epoch and the consumer goes on from its
// cursor, nothing lost or repeated; the failed node, restarted, rejoins
// without taking the destination back (loads differ by one at most).
func TestCrashedOwnerReplaced(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 3)
	c.Create(destSpec("shop", src))
	owner, epoch := c.Owner("shop")
	cs := consume(t, c.URLs(), "shop", "app")
	insert(t, src, span(1, 5)...)
	cs.waitRows(t, span(1, 5)...)

	// Whatever of the consumer's acks the owner had not yet written to
	// Raft comes again from the new owner, with the same seqs, and the
	// client drops it: waitRows sees every row once.
	owner.Crash()
	insert(t, src, span(6, 10)...)
	next, epoch2 := c.WaitOwner("shop", func(n *clustertest.Node, e uint64) bool { return n != owner })
	if epoch2 <= epoch {
		t.Errorf("takeover by %s at epoch %d, not above %s's %d", next.Name, epoch2, owner.Name, epoch)
	}
	cs.waitRows(t, span(1, 10)...)

	owner.Restart()
	a := c.EnsureSame()["shop"]
	if a.Owner != next.Name || a.Epoch != epoch2 {
		t.Errorf("after %s came back: shop owned by %s at %d, want it left on %s at %d", owner.Name, a.Owner, a.Epoch, next.Name, epoch2)
	}
	if err := owner.Serving("shop"); err == nil {
		t.Errorf("restarted %s serves shop, owned by %s", owner.Name, next.Name)
	}
	insert(t, src, span(11, 12)...)
	cs.waitRows(t, span(1, 12)...)
}

// TestIsolatedOwnerFenced: an owner cut off from the others keeps running
// and still believes it owns its destination (its Raft state stopped at
// the cut), yet by the time another node serves the destination the cut
// one has stopped serving: its lease ran out, its open stream ended, and
// it refuses new ones. Healed, it learns of the new epoch, stops the
// destination and redirects to the new owner; the consumer got every row
// once throughout.
func TestIsolatedOwnerFenced(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 3)
	// Two destinations on two of the three nodes: at least one of them a
	// follower (the harness cannot cut the leader off). The takeover goes
	// to the idle node, so loads stay even and nothing moves back after
	// the heal.
	for _, name := range []string{"d1", "d2"} {
		c.Create(destSpec(name, src))
	}
	var (
		x     *clustertest.Node
		dest  string
		epoch uint64
	)
	assigned := c.EnsureSame()
	for _, f := range c.Followers() {
		for d, a := range assigned {
			if a.Owner == f.Name && x == nil {
				x, dest, epoch = f, d, a.Epoch
			}
		}
	}
	if x == nil {
		t.Fatalf("no follower owns a destination: %v", assigned)
	}
	c.Owner(dest)
	cs := consume(t, c.URLs(), dest, "app")
	insert(t, src, span(1, 3)...)
	cs.waitRows(t, span(1, 3)...)

	// A stream open on x itself, which must end once x may not serve.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, x.URL()+"/v1/destinations/"+dest+"/stream?client-id=direct", nil)
	req.SetBasicAuth(clustertest.ConsumerUser, clustertest.ConsumerPassword)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream on %s: %v %v", x.Name, resp, err)
	}
	ended := make(chan error, 1)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
		ended <- sc.Err()
	}()

	x.Isolate()
	insert(t, src, span(4, 6)...)
	y, epoch2 := c.WaitOwner(dest, func(n *clustertest.Node, e uint64) bool { return n != x })
	// y serves now: x must not, whatever it believes.
	if err := x.Serving(dest); err == nil {
		t.Fatalf("cut-off %s still serves %s while %s does", x.Name, dest, y.Name)
	} else {
		t.Logf("%s: %v", x.Name, err)
	}
	if epoch2 <= epoch {
		t.Errorf("takeover by %s at epoch %d, not above %d", y.Name, epoch2, epoch)
	}
	if a, err := x.Raft().Assignment(dest); err != nil || a.Owner != x.Name || a.Epoch != epoch {
		t.Errorf("cut-off %s's own state: %+v %v; want it still the owner at %d (it heard nothing)", x.Name, a, err, epoch)
	}
	select {
	case <-ended:
	case <-time.After(clustertest.Timeout):
		t.Fatalf("the stream open on cut-off %s did not end", x.Name)
	}
	if status, _ := x.Get("/v1/destinations/" + dest + "/stream?client-id=late"); status != http.StatusServiceUnavailable {
		t.Errorf("cut-off %s answered a new stream with %d, want 503", x.Name, status)
	}
	cs.waitRows(t, span(1, 6)...)

	x.Heal()
	c.WaitFor(x.Name+" to stop "+dest, func() (bool, string) {
		err := x.Serving(dest)
		return errors.Is(err, stream.ErrUnknownDestination), "serving: " + errString(err)
	})
	if status, loc := x.Get("/v1/destinations/" + dest); status != http.StatusTemporaryRedirect || !strings.HasPrefix(loc, y.URL()+"/") {
		t.Errorf("healed %s: state %d to %q, want a redirect to %s", x.Name, status, loc, y.URL())
	}
	if a := c.EnsureSame()[dest]; a.Owner != y.Name || a.Epoch != epoch2 {
		t.Errorf("after the heal %s is owned by %s at %d, want %s at %d", dest, a.Owner, a.Epoch, y.Name, epoch2)
	}
	insert(t, src, span(7, 8)...)
	cs.waitRows(t, span(1, 8)...)
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// TestAssignmentSpreads: destinations go to the least loaded live nodes;
// a failed node's destination moves to a live one and nothing else moves;
// the node, back, gets its share again.
func TestAssignmentSpreads(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 3)
	for i, name := range []string{"d1", "d2", "d3"} {
		c.Nodes()[i].Create(destSpec(name, src))
	}
	for _, d := range []string{"d1", "d2", "d3"} {
		c.Owner(d)
	}
	if l := loads(c); l["n1"] != 1 || l["n2"] != 1 || l["n3"] != 1 {
		t.Fatalf("loads %v, want one destination a node", l)
	}
	before := c.EnsureSame()

	// The leader fails: a new one is elected and moves its destination.
	victim := c.Leader()
	var moved string
	for d, a := range before {
		if a.Owner == victim.Name {
			moved = d
		}
	}
	victim.Crash()
	to, _ := c.WaitOwner(moved, func(n *clustertest.Node, e uint64) bool { return n != victim })
	after := c.EnsureSame()
	for d, a := range after {
		if d != moved && a != before[d] {
			t.Errorf("%s moved from %v to %v, though its owner is alive", d, before[d], a)
		}
	}
	if l := loads(c); l[to.Name] != 2 || len(l) != 2 {
		t.Errorf("loads %v after %s failed, want 2 on %s and 1 on the other", l, victim.Name, to.Name)
	}

	// Back, it gets one destination, and loads are even again.
	victim.Restart()
	c.WaitFor("loads to even out", func() (bool, string) {
		l := loads(c)
		return l["n1"] == 1 && l["n2"] == 1 && l["n3"] == 1, fmt.Sprint("loads ", l)
	})
	for _, d := range []string{"d1", "d2", "d3"} {
		c.Owner(d)
	}
}
