package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/braid-cdc/braid/destination"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// Ownership and fencing.
//
// The Raft leader assigns each destination to one node with an epoch (the
// Raft index of the assignment). A node runs the destinations assigned to
// it, each from the slowest consumer's cursor, and writes the consumers'
// cursors to Raft fenced by its epoch: once a newer epoch is committed,
// its writes are rejected and it stops.
//
// Serving is fenced by a lease. An owner hands events to consumers only
// until Lease after the start of its last successful linearizable read
// that found it still the owner (renewed every Lease/4). A new owner
// starts serving only Lease after it saw its assignment: any read the old
// owner confirmed its lease with happened before that assignment was
// committed, so its lease has run out by then, even if the old owner was
// stalled (SIGSTOP, a long GC pause, a cut network) rather than dead, and
// it never serves again without first learning of the new epoch. The
// price is Lease added to a takeover.

// ownerTick is how often a node compares what it runs with what Raft
// assigns it.
const ownerTick = 200 * time.Millisecond

// ownerRetry is how long a node waits before starting again a destination
// whose run failed (a source refused it for good).
const ownerRetry = 5 * time.Second

// owner runs one destination on this node for one epoch.
type owner struct {
	n     *Node
	name  string
	epoch uint64
	stop  context.CancelFunc
	done  chan struct{} // closed when run returns

	mu         sync.Mutex
	servableAt time.Time // the takeover's wait ends (see above)
	leaseUntil time.Time
}

// ownerLoop keeps what this node runs in step with its assignments.
func (n *Node) ownerLoop(ctx context.Context) {
	retryAt := map[string]time.Time{}
	t := time.NewTicker(ownerTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		want := map[string]uint64{}
		for _, a := range n.store.Assignments() {
			if a.Owner == n.cfg.Name {
				want[a.Destination] = a.Epoch
			}
		}
		n.mu.Lock()
		for name, o := range n.owned {
			finished := false
			select {
			case <-o.done:
				finished = true
				retryAt[name] = time.Now().Add(ownerRetry)
			default:
			}
			if epoch, ok := want[name]; !ok || epoch != o.epoch || finished {
				o.stop()
				<-o.done
				delete(n.owned, name)
			}
		}
		for name, epoch := range want {
			if _, running := n.owned[name]; running || time.Now().Before(retryAt[name]) {
				continue
			}
			delete(retryAt, name)
			n.owned[name] = n.startOwner(ctx, name, epoch)
		}
		n.mu.Unlock()
	}
}

// stopAll stops every destination this node runs.
func (n *Node) stopAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, o := range n.owned {
		o.stop()
		<-o.done
		delete(n.owned, name)
	}
}

func (n *Node) startOwner(ctx context.Context, name string, epoch uint64) *owner {
	ctx, stop := context.WithCancel(ctx)
	now := time.Now()
	o := &owner{n: n, name: name, epoch: epoch, stop: stop, done: make(chan struct{}),
		servableAt: now.Add(n.cfg.Lease), leaseUntil: now.Add(n.cfg.Lease)}
	go func() {
		defer close(o.done)
		log := n.log.With("dest", name, "epoch", epoch)
		log.Info("taking the destination over")
		n.takeovers.Add(1)
		err := o.run(ctx)
		switch {
		case ctx.Err() != nil:
			log.Info("destination stopped here")
		case err == nil:
			log.Info("destination stopped here: another node owns it now")
		default:
			log.Error("destination failed here; retrying", "err", err, "in", ownerRetry)
		}
	}()
	return o
}

// live is the Served.Live of the destination: see the fencing notes above.
func (o *owner) live() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if now.Before(o.servableAt) {
		return fmt.Errorf("destination %s is being taken over by node %s: retry in a moment", o.name, o.n.cfg.Name)
	}
	if now.After(o.leaseUntil) {
		return fmt.Errorf("node %s cannot confirm it still owns destination %s (is it cut off from the cluster?): retry, another node may own it", o.n.cfg.Name, o.name)
	}
	return nil
}

// errMoved: the destination was assigned elsewhere or deleted.
var errMoved = errors.New("cluster: the destination moved")

// renew confirms the ownership with a linearizable read and extends the
// lease; errMoved when this node no longer owns the destination.
func (o *owner) renew(ctx context.Context) error {
	began := time.Now()
	rctx, cancel := context.WithTimeout(ctx, o.n.cfg.Lease/2)
	defer cancel()
	if err := o.n.store.Consistent(rctx); err != nil {
		return err // no quorum now: the lease runs out unless a later read succeeds
	}
	a, err := o.n.store.Assignment(o.name)
	if err != nil || a.Owner != o.n.cfg.Name || a.Epoch != o.epoch {
		return errMoved
	}
	o.mu.Lock()
	o.leaseUntil = began.Add(o.n.cfg.Lease)
	o.mu.Unlock()
	o.n.renewals.Add(1)
	return nil
}

// run runs the destination until ctx ends, the node is fenced or the
// pipeline fails.
func (o *owner) run(ctx context.Context) error {
	n := o.n
	log := n.log.With("dest", o.name, "epoch", o.epoch)
	d, err := n.store.Destination(o.name)
	if err != nil {
		return err
	}
	ds, err := d.Spec.MapPasswords(n.box.Open)
	if err != nil {
		return fmt.Errorf("node %s cannot open destination %s's passwords: %w", n.cfg.Name, o.name, err)
	}
	// The references are read here, on the node that runs the
	// destination, under this node's rules (as create checked them on
	// the node that took the spec).
	if ds, err = n.cfg.SecretRefs.Resolve(ds); err != nil {
		return fmt.Errorf("node %s cannot run destination %s: %w", n.cfg.Name, o.name, err)
	}
	for i := range ds.Sources {
		src := &ds.Sources[i]
		// MariaDB refuses a second replica with a server_id already
		// reading (ER_SLAVE_SAME_ID), and a stalled former owner's
		// connection stays open until its TCP times out; each epoch
		// therefore reads with its own id, unless the spec chose one.
		if src.ServerID == spec.DeriveServerID(ds.Name, src.Name) {
			src.ServerID = spec.DeriveServerID(ds.Name, fmt.Sprintf("%s#%d", src.Name, o.epoch))
		}
	}
	// The assignment is applied here, so every cursor, shard-DDL decision
	// and placement a former owner wrote is too (its writes came before
	// the assignment in the log, and none can follow it). A new decision,
	// snapshot chunk or late transaction is kept in Raft, fenced by this
	// epoch, before it applies or goes out: a later owner applies it at
	// the same point, with the same seq. Each sink is a store client of
	// its own, whose cursor is kept like a consumer's; a new owner's sinks
	// go on from the targets' checkpoints.
	keep := n.store.Keeper(o.name, o.epoch, n.cfg.CursorInterval)
	defer func() {
		if err := keep.Close(); err != nil {
			log.Info("last cursors not saved", "err", err)
		}
	}()
	cfg := destination.Config{Spec: &ds, Keep: keep, Serve: true, Live: o.live, KeepEvery: n.cfg.Lease / 4,
		Logger: n.log.With("epoch", o.epoch)} // the pipeline's logs name the destination themselves
	err = destination.Run(ctx, cfg, func(ctx context.Context, r *destination.Running) error {
		n.sinks.Store(o.name, r.Sinks)
		defer n.sinks.CompareAndDelete(o.name, r.Sinks)
		n.reg.Add(r.Served)
		defer n.reg.Remove(o.name)
		bound := group.MemoryBound(len(ds.Sources), group.Config{Spec: &ds}, stream.DefaultBytes)
		n.memory.add(bound)
		defer n.memory.add(-bound)
		return o.hold(ctx, r.Pipeline)
	})
	if err != nil && keep.Err() != nil {
		log.Warn("fenced: cursor writes refused", "err", err)
		return nil
	}
	return err
}

// hold renews the ownership lease until ctx ends, the pipeline fails or
// the destination is no longer this node's (nil).
func (o *owner) hold(ctx context.Context, p *stream.Pipeline) error {
	t := time.NewTicker(o.n.cfg.Lease / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Done():
			return p.Err()
		case <-t.C:
		}
		if err := o.renew(ctx); errors.Is(err, errMoved) {
			o.n.log.Warn("fenced: the destination is no longer this node's", "dest", o.name, "epoch", o.epoch)
			return nil
		} else if err != nil {
			o.n.log.Warn("cannot renew the ownership lease", "dest", o.name, "epoch", o.epoch, "err", err)
		}
	}
}
