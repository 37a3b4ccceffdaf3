package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Watching the demo's cluster: takeovers, instructions, the end of a run.

// watch streams until ctx ends or --duration passes: it kills the owner
// at --kill-after, tells each takeover and restarts the node that died,
// and at --duration drains the stream and sums up.
func (d *demo) watch(ctx context.Context) error {
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if d.opts.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, d.opts.Duration)
	}
	defer cancel()
	var killC <-chan time.Time
	if d.opts.KillAfter > 0 {
		t := time.NewTimer(d.opts.KillAfter)
		defer t.Stop()
		killC = t.C
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-runCtx.Done():
			if ctx.Err() != nil {
				d.con.sayf("\ninterrupted: stopping after %d transactions streamed", d.stream.stats().txs)
				return nil
			}
			return d.finish(ctx)
		case <-killC:
			d.killOwner()
		case ev := <-d.deaths:
			d.handleDeath(runCtx, ev)
		case <-d.streamDone:
			return fmt.Errorf("the stream stopped: %v; the consumer's log is %s", d.streamErr, d.consumerLog.Name())
		case <-tick.C:
			if owner, epoch, ok := d.currentOwner(runCtx); ok && owner != d.owner {
				d.con.sayf("*** shop moved from %s to %s (epoch %d → %d)", d.owner, owner, d.epoch, epoch)
				d.owner, d.epoch = owner, epoch
			}
		}
	}
}

// fail records a failure of the streaming part: the demo goes on, tells
// it, and exits 1.
func (d *demo) fail(err error) {
	d.con.sayf("!!! %v", err)
	if d.failure == nil {
		d.failure = err
	}
}

// killOwner is --kill-after: SIGKILL to the node that runs shop.
func (d *demo) killOwner() {
	d.killDone = true
	n := d.node(d.owner)
	if n == nil || !n.Running() {
		d.con.sayf("*** --kill-after: %s, which ran shop, is not running; nothing to kill", d.owner)
		return
	}
	d.con.sayf("*** --kill-after %v: killing %s, which runs shop: kill -9 %d", d.opts.KillAfter, n.Name, n.PID())
	d.killed = n
	d.stream.mark()
	_ = n.Signal(syscall.SIGKILL)
}

// handleDeath tells what a node's death does: if it ran shop, another node
// takes it over and the stream goes on from there; then the dead node is
// started again on its data directory.
func (d *demo) handleDeath(ctx context.Context, ev nodeExit) {
	n := ev.node
	if ctx.Err() != nil {
		return // the demo is stopping
	}
	if d.killed != n && n.Name == d.owner {
		d.stream.mark() // killed by someone else: the demo learns it at once
	}
	d.killed = nil
	d.con.sayf("*** node %s (pid %d) is gone (%v)", n.Name, n.PID(), ev.err)
	if n.Name != d.owner {
		d.con.sayf("*** %s did not run shop (%s does): the stream goes on", n.Name, d.owner)
	} else {
		d.con.sayf("*** waiting for another node to take shop over: gossip notices the loss within about a second, then the new owner waits out the old one's 1s lease")
		old, oldEpoch := d.owner, d.epoch
		if err := d.waitOwner(ctx, old); err != nil {
			if ctx.Err() == nil {
				d.fail(fmt.Errorf("no node took shop over after %s died: %v", old, err))
			}
			return
		}
		d.con.sayf("*** takeover: shop moved from %s to %s (epoch %d → %d); the stream goes on from %s", old, d.owner, oldEpoch, d.epoch, d.owner)
		if err := d.stream.waitResumed(ctx); err != nil {
			if ctx.Err() == nil {
				d.fail(fmt.Errorf("after %s took shop over from %s: %v", d.owner, old, err))
			}
			return
		}
	}
	d.con.sayf("*** restarting %s on its data directory, so that the cluster has three nodes again", n.Name)
	if err := d.startNode(n); err != nil {
		d.fail(err)
		return
	}
	err := d.poll(ctx, n.Name+" back in the cluster", func() (bool, error) {
		st, err := d.status(ctx)
		if err != nil || st.Leader == "" {
			return false, nil
		}
		for _, s := range st.Nodes {
			if s.Name == n.Name && s.State == "alive" {
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case ctx.Err() != nil:
	case err != nil:
		d.fail(err)
	default:
		d.con.sayf("*** %s is back (pid %d)", n.Name, n.PID())
		d.instructions()
	}
}

// instructions prints the box that tells how to kill the owner and what
// to run meanwhile.
func (d *demo) instructions() {
	owner := d.node(d.owner)
	other := d.cluster.Nodes[0] // a node that stays up when the owner is killed
	for _, n := range d.cluster.Nodes {
		if n != owner && n.Running() {
			other = n
			break
		}
	}
	lines := []string{
		fmt.Sprintf("shop runs on node %s, pid %d. To watch another node take it over,", owner.Name, owner.PID()),
		"kill it from another terminal:",
		"",
		fmt.Sprintf("    kill -9 %d", owner.PID()),
		"",
		"The stream here pauses a few seconds and goes on from the new owner,",
		"nothing lost or repeated; the demo then restarts the killed node.",
	}
	if d.opts.KillAfter > 0 && !d.killDone {
		lines = append(lines, fmt.Sprintf("(With --kill-after, the demo does it itself at %s.)",
			time.Now().Add(d.opts.KillAfter).Format("15:04:05")))
	}
	lines = append(lines, "",
		"Meanwhile, in another terminal:",
		fmt.Sprintf("    %s cluster status --server %s --token-file %s", d.braid, other.URL(), d.cluster.Security.AdminTokenFile()),
		fmt.Sprintf("    %s tail shop --server %s --client-id you --token-file %s", d.braid, other.URL(), d.cluster.Security.AdminTokenFile()),
		fmt.Sprintf("canal clients: any node's canal port, e.g. 127.0.0.1:%d, destination shop, as user:password in %s/app.token",
			other.CanalPort, d.cluster.Security.Dir),
		fmt.Sprintf("certificates, gossip key, users: %s (the nodes' mutual TLS and logins)", d.cluster.Security.Dir),
		fmt.Sprintf("logs: %s/{n1,n2,n3,consumer}.log", d.dir))
	if d.opts.Duration == 0 {
		lines = append(lines, "Ctrl-C stops the demo.")
	}
	d.con.box(lines)
}

// finish ends a run at --duration: the workload stops, the stream gets
// what it committed, and the numbers are checked.
func (d *demo) finish(ctx context.Context) error {
	d.con.sayf("\n--duration %v reached: stopping the workload; waiting for the stream to deliver what it committed", d.opts.Duration)
	d.stopWork()
	<-d.workDone
	txs, rows := d.work.done()
	deadline := time.Now().Add(15 * time.Second)
	for d.stream.stats().txs < txs && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	st := d.stream.stats()
	d.con.sayf("the workload committed %d transactions (%d row changes) to six schemas on three servers;", txs, rows)
	d.con.sayf("the stream delivered %d transactions (%d row changes) as one sequence, seq %d to %d: %s",
		st.txs, st.rows, st.firstSeq, st.lastSeq, d.stream.verdict())
	switch {
	case d.failure != nil:
		return d.failure
	case st.txs != txs || st.rows != rows:
		return fmt.Errorf("the stream delivered %d transactions (%d rows) of the %d (%d rows) committed", st.txs, st.rows, txs, rows)
	case len(st.problems) > 0:
		return fmt.Errorf("the stream's seqs: %s", strings.Join(st.problems, "; "))
	}
	return nil
}

// console writes the narration and the stream lines, one at a time.
type console struct {
	mu     sync.Mutex
	say    io.Writer // narration
	stream io.Writer // the stream's lines
}

func (c *console) sayf(format string, a ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.say, format+"\n", a...)
}

func (c *console) line(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.stream, s+"\n")
}

// box prints lines in a frame.
func (c *console) box(lines []string) {
	width := 0
	for _, l := range lines {
		width = max(width, len([]rune(l)))
	}
	var b strings.Builder
	b.WriteString("\n┌" + strings.Repeat("─", width+2) + "┐\n")
	for _, l := range lines {
		b.WriteString("│ " + l + strings.Repeat(" ", width-len([]rune(l))) + " │\n")
	}
	b.WriteString("└" + strings.Repeat("─", width+2) + "┘\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.say, b.String())
}
