package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/internal/localcluster"
)

// executor fires a schedule's faults at their times, against the running
// deployment, and logs each as it fires (what it hit, how it went).
type executor struct {
	run *runState

	mu        sync.Mutex
	expected  map[string]bool // nodes the executor is stopping: their exit is no violation
	fired     map[Kind]int
	alters    int
	takeovers []Takeover
	follows   []Follow
}

func newExecutor(r *runState) *executor {
	return &executor{run: r, expected: map[string]bool{}, fired: map[Kind]int{}}
}

// expect marks node name's next exit as the executor's doing (or not).
func (e *executor) expect(name string, yes bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expected[name] = yes
}

func (e *executor) isExpected(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.expected[name]
}

// execute runs the schedule until its end or ctx's. Node and source faults
// run one after the other (waiting for the cluster to be whole before a
// node fault); the others run beside them.
func (e *executor) execute(ctx context.Context, s Schedule) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, f := range s.Faults {
		if d := f.At - e.run.clock(); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		e.mu.Lock()
		e.fired[f.Kind]++
		e.mu.Unlock()
		switch f.Kind {
		case KillNode, StopNode, RestartNode, PartitionNode, RestartSource, KillSource, FailoverSource,
			StopBroker, RestartBroker:
			e.fire(ctx, f)
		default:
			wg.Go(func() { e.fire(ctx, f) })
		}
	}
}

// fire runs one fault to its end.
func (e *executor) fire(ctx context.Context, f Fault) {
	r := e.run
	sleep := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	switch f.Kind {
	case KillNode, StopNode, RestartNode, PartitionNode:
		if err := r.dep.cluster.WaitReady(ctx, time.Minute); err != nil {
			r.logf("%s %s: the cluster is not whole, firing anyway: %v", f.Kind, f.Target, err)
		}
		n, err := e.node(ctx, f.Target)
		if err != nil {
			r.logf("%s %s: skipped: %v", f.Kind, f.Target, err)
			return
		}
		switch f.Kind {
		case PartitionNode:
			e.partition(ctx, f, n)
		case KillNode:
			e.expect(n.Name, true)
			n.Kill()
			r.logf("%s %s: SIGKILLed %s; starting it again in %v", f.Kind, f.Target, n.Name, f.For)
			sleep(f.For)
			e.startNode(n)
		case StopNode:
			if err := n.Signal(syscall.SIGSTOP); err != nil {
				r.logf("%s %s: SIGSTOP %s: %v", f.Kind, f.Target, n.Name, err)
				return
			}
			r.logf("%s %s: SIGSTOPped %s; SIGCONT in %v", f.Kind, f.Target, n.Name, f.For)
			sleep(f.For)
			_ = n.Signal(syscall.SIGCONT)
			r.logf("%s %s: SIGCONT %s", f.Kind, f.Target, n.Name)
		case RestartNode:
			e.expect(n.Name, true)
			killed := n.Stop(20 * time.Second)
			r.logf("%s %s: stopped %s (SIGTERM; killed after 20s: %v); starting it again", f.Kind, f.Target, n.Name, killed)
			e.startNode(n)
		}
	case RestartSource, KillSource:
		i := slices.Index(sourceNames, f.Target)
		s := r.dep.sources[i]
		if f.Kind == KillSource {
			if err := s.Kill(); err != nil {
				r.logf("%s %s: %v", f.Kind, f.Target, err)
			}
			r.logf("%s %s: SIGKILLed its server; starting it again in %v", f.Kind, f.Target, f.For)
			sleep(f.For)
		} else {
			r.logf("%s %s: stopping its server (SIGTERM) and starting it again", f.Kind, f.Target)
		}
		if err := s.Restart(context.Background()); err != nil {
			r.logf("%s %s: the server did not start again: %v", f.Kind, f.Target, err)
			r.failSetup(fmt.Errorf("source %s did not start again: %w", f.Target, err))
			return
		}
		r.logf("%s %s: its server runs again", f.Kind, f.Target)
	case FailoverSource:
		i := slices.Index(sourceNames, f.Target)
		r.logf("%s %s: the virtual IP stops forwarding; the replica catches up", f.Kind, f.Target)
		began := time.Now()
		// braid's reader may find the promoted server while the former
		// primary starts again: the wait for it begins when the address
		// moves.
		var follow sync.WaitGroup
		moved := func(server uint32) {
			follow.Go(func() { e.follow(ctx, f, server) })
		}
		err := r.dep.failover(ctx, i, moved, r.logf)
		follow.Wait()
		if err != nil {
			r.logf("%s %s: %v", f.Kind, f.Target, err)
			return
		}
		r.logf("%s %s: done in %v", f.Kind, f.Target, time.Since(began).Round(100*time.Millisecond))
	case CutTarget:
		p := r.dep.proxies[f.Target]
		p.setCut(true)
		r.logf("%s %s: cut for %v", f.Kind, f.Target, f.For)
		sleep(f.For)
		p.setCut(false)
		r.logf("%s %s: reachable again", f.Kind, f.Target)
	case StopBroker:
		k := r.dep.kafka
		if err := k.signal(syscall.SIGSTOP); err != nil {
			r.logf("%s kafka: SIGSTOP: %v", f.Kind, err)
			return
		}
		r.logf("%s kafka: SIGSTOPped the broker for %v", f.Kind, f.For)
		sleep(f.For)
		_ = k.signal(syscall.SIGCONT)
		r.logf("%s kafka: SIGCONT", f.Kind)
	case RestartBroker:
		k := r.dep.kafka
		killed := k.end(syscall.SIGTERM)
		r.logf("%s kafka: stopped the broker (SIGTERM; killed after 20s: %v); starting it again on its data", f.Kind, killed)
		// Started whatever ctx says: the end of the run reads its topic.
		if err := k.start(context.Background()); err != nil {
			r.logf("%s kafka: the broker did not start again: %v", f.Kind, err)
			r.failSetup(fmt.Errorf("the kfake broker did not start again: %w", err))
			return
		}
		r.logf("%s kafka: the broker runs again", f.Kind)
	case PauseConsumer:
		r.native.pause(f.For)
		r.logf("%s %s: stops reading for %v", f.Kind, f.Target, f.For)
	case AlterShards:
		e.mu.Lock()
		e.alters++
		col := fmt.Sprintf("c%d", e.alters)
		e.mu.Unlock()
		for k := range shardSchemas {
			stmt := fmt.Sprintf("ALTER TABLE %s.orders ADD COLUMN %s INT NULL", schemaOf(k), col)
			if err := e.sourceExec(ctx, k/2, stmt); err != nil {
				r.logf("%s: %s: %v", f.Kind, stmt, err)
				return
			}
			r.logf("%s: %s", f.Kind, stmt)
			sleep(time.Duration(500+r.rng(1500)) * time.Millisecond)
		}
	case TruncateShard:
		var k int
		fmt.Sscanf(f.Target, "shop_%d.orders", &k)
		if err := r.writers[k/2].truncate(ctx, k%2); err != nil {
			r.logf("%s %s: %v", f.Kind, f.Target, err)
			return
		}
		r.logf("%s %s: done", f.Kind, f.Target)
	case Burst:
		i := slices.Index(sourceNames, f.Target)
		n := 2000 + r.rng(3000)
		r.logf("%s %s: one transaction of %d INSERTs", f.Kind, f.Target, n)
		r.writers[i].burst(ctx, n)
		r.logf("%s %s: committed", f.Kind, f.Target)
	}
}

// follow waits until braid reads source f.Target from the server of
// server_id server, the promoted replica its address moved to, and
// records how long that took (failover-follow holds it to followBound).
// The destination's state names the server each source is read from.
func (e *executor) follow(ctx context.Context, f Fault, server uint32) {
	r := e.run
	moved, at := time.Now(), r.clock()
	want := fmt.Sprintf("server_id %d ", server)
	err := localcluster.Poll(ctx, followWait, "braid reading source "+f.Target+" from its new primary", func() (bool, string) {
		st, err := r.dep.state(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range st.Sources {
			if s.Name == f.Target {
				return strings.HasPrefix(s.Server, want), "it reads " + s.Server
			}
		}
		return false, "no source " + f.Target
	})
	fl := Follow{Source: f.Target, At: at, After: time.Since(moved), Bound: followBound}
	if err != nil {
		if ctx.Err() != nil {
			return // the run ends: nothing to hold braid to
		}
		r.logf("%s %s: %v", f.Kind, f.Target, err)
		fl.After = -1
	} else {
		r.logf("%s %s: braid reads the new primary %v after the virtual IP moved to it", f.Kind, f.Target, fl.After.Round(100*time.Millisecond))
	}
	e.mu.Lock()
	e.follows = append(e.follows, fl)
	e.mu.Unlock()
}

// takeoverBound is the least partition of the owner that must see
// another node take the destination over before it ends: gossip declares
// a silent node dead in about 2.5 s (docs/cluster.md), a new Raft leader
// may be needed first, and the new owner waits a lease; the rest is room
// for a loaded machine.
const takeoverBound = 10 * time.Second

// partition cuts node n from the other nodes for f.For. When n owned the
// destination, the other nodes must give it to one of them while the
// cut lasts (n's lease runs out, and its epoch fences its writes): the
// run records who took over, and when.
func (e *executor) partition(ctx context.Context, f Fault, n *localcluster.Node) {
	r := e.run
	c := r.dep.cluster
	owner, epoch, _, _ := c.Owner(ctx, dest, 10*time.Second)
	wasOwner := owner == n
	r.dep.links.setCut(n.Name, true)
	began := r.clock()
	r.logf("%s %s: cut %s off from the other nodes for %v (owner: %v, epoch %d)", f.Kind, f.Target, n.Name, f.For, wasOwner, epoch)
	end := time.Now().Add(f.For)
	t := Takeover{Node: n.Name, At: began, For: f.For, Bound: takeoverBound}
	for wasOwner && time.Now().Before(end) && ctx.Err() == nil {
		for _, o := range c.Live() {
			if o == n {
				continue
			}
			st, err := c.Status(ctx, o)
			if err != nil {
				continue
			}
			for _, d := range st.Destinations {
				if d.Name == dest && d.Owner != "" && d.Owner != n.Name && d.Epoch > epoch {
					t.By, t.After = d.Owner, r.clock()-began
				}
			}
		}
		if t.By != "" {
			break
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if wasOwner {
		if t.By != "" {
			r.logf("%s %s: %s took %s over after %v", f.Kind, f.Target, t.By, dest, t.After.Round(100*time.Millisecond))
		} else {
			r.logf("%s %s: no other node took %s over in %v", f.Kind, f.Target, dest, f.For)
		}
		e.mu.Lock()
		e.takeovers = append(e.takeovers, t)
		e.mu.Unlock()
	}
	if rest := time.Until(end); rest > 0 {
		select {
		case <-time.After(rest):
		case <-ctx.Done():
		}
	}
	r.dep.links.setCut(n.Name, false)
	r.logf("%s %s: %s reaches the other nodes again", f.Kind, f.Target, n.Name)
}

// startNode starts node n again, retrying while its ports are taken.
func (e *executor) startNode(n *localcluster.Node) {
	r := e.run
	for attempt := 0; attempt < 10; attempt++ {
		err := r.dep.cluster.Restart(n)
		if err == nil {
			r.logf("started %s again", n.Name)
			e.expect(n.Name, false)
			return
		}
		r.logf("starting %s again: %v", n.Name, err)
		time.Sleep(time.Second)
	}
}

// sourceExec runs stmt on source i, retrying while it is down. An ALTER
// whose connection broke may have run all the same (a source killed
// right after it committed): asked again, the server says the column
// is there, which is done, not a failure; stopping there would leave
// the other shard tables un-ALTERed and the shard-DDL lock holding
// their rows for good.
func (e *executor) sourceExec(ctx context.Context, i int, stmt string) error {
	db, err := sql.Open("mysql", dsn(e.run.dep.vips[i].Addr()))
	if err != nil {
		return err
	}
	defer db.Close()
	for attempt := 0; ; attempt++ {
		_, err = db.ExecContext(ctx, stmt)
		var my *mysql.MySQLError
		if attempt > 0 && errors.As(err, &my) && my.Number == 1060 { // ER_DUP_FIELDNAME
			return nil
		}
		if err == nil || attempt == 60 || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

// node resolves a role to a running node.
func (e *executor) node(ctx context.Context, role string) (*localcluster.Node, error) {
	c := e.run.dep.cluster
	owner, _, leader, err := c.Owner(ctx, dest, 30*time.Second)
	if err != nil {
		return nil, err
	}
	if leader == "" {
		st, err := c.LiveStatus(ctx)
		if err != nil {
			return nil, err
		}
		leader = st.Leader
	}
	switch role {
	case RoleOwner:
		return owner, nil
	case RoleLeader:
		if n := c.Node(leader); n != nil && n.Running() {
			return n, nil
		}
		return nil, fmt.Errorf("no running leader (%q)", leader)
	}
	for _, n := range c.Live() {
		if n != owner && n.Name != leader {
			return n, nil
		}
	}
	for _, n := range c.Live() {
		if n != owner {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no running follower")
}
