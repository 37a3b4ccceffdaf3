package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/mariadb"
)

// Options are a run's settings (braid-chaos's flags).
type Options struct {
	Seed     uint64        // the schedule's seed
	Duration time.Duration // how long faults are drawn for
	Binary   string        // the braid binary the nodes run
	Dir      string        // where the run keeps its files ("": a new one under /tmp)
	Rate     float64       // the writer's transactions a second, per source. Default: 5.
	Keep     bool          // keep the files of a run that passed too (to compare with one that failed)

	// beforeStep, if set, is called before each setup step with its name;
	// an error fails the step: the tests' way to stop a setup half-way.
	beforeStep func(step string, d *deployment) error
}

// ErrFailed is a run whose invariants did not hold (the report names
// them).
var ErrFailed = errors.New("chaos: invariants broken")

// runState is one run: its deployment, workload and consumers.
type runState struct {
	opts  Options
	out   io.Writer
	dep   *deployment
	start time.Time // the clock's zero: when the faults begin

	logMu   sync.Mutex
	logFile *os.File
	rngMu   sync.Mutex
	rnd     *rand.Rand

	writers  []*writer
	ledger   *ledger
	native   *nativeConsumer
	recs     []*recorder // native, canal
	exec     *executor
	closing  atomic.Bool
	exitMu   sync.Mutex
	exits    []Exit
	setupErr atomic.Pointer[error]
	peakMu   sync.Mutex
	peaks    map[string]*peak // per node
}

func (r *runState) clock() time.Duration { return time.Since(r.start) }

// logf prints a line of the run's log, with the run's clock, here and in
// the run directory's run.log.
func (r *runState) logf(format string, args ...any) {
	line := fmt.Sprintf("[%8s] ", r.clock().Round(100*time.Millisecond)) + fmt.Sprintf(format, args...)
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintln(r.out, line)
	if r.logFile != nil {
		fmt.Fprintln(r.logFile, line)
	}
}

func (r *runState) rng(n int) int {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return r.rnd.IntN(n)
}

func (r *runState) failSetup(err error) { r.setupErr.CompareAndSwap(nil, &err) }

// setupError is a deployment that could not be set up: the step that
// failed, and why. Run has stopped every process it had started.
type setupError struct {
	step string
	err  error
}

func (e *setupError) Error() string {
	return "setting up the deployment: " + e.step + ": " + e.err.Error()
}
func (e *setupError) Unwrap() error { return e.err }

// setup runs one step of the deployment's setup, logged by its name,
// which its error names.
func (r *runState) setup(step string, fn func() error) error {
	r.logf("%s", step)
	if r.opts.beforeStep != nil {
		if err := r.opts.beforeStep(step, r.dep); err != nil {
			return &setupError{step, err}
		}
	}
	if err := fn(); err != nil {
		return &setupError{step, err}
	}
	return nil
}

// Run runs a chaos run: the schedule first (printed), the deployment, the
// workload and the faults, then the checks, and prints the report to out.
// A run whose invariants broke returns ErrFailed and keeps its directory;
// a passed one removes it and the targets' databases. The error of a run
// that could not be set up names the step.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Rate <= 0 {
		o.Rate = 5
	}
	sched := Plan(o.Seed, o.Duration)
	fmt.Fprintf(out, "braid chaos: replay with `make chaos SEED=%d DURATION=%v`\n%s", o.Seed, o.Duration, sched)
	r := &runState{opts: o, out: out, start: time.Now(), rnd: rand.New(rand.NewPCG(o.Seed, 1)), ledger: &ledger{}, peaks: map[string]*peak{}}
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("/tmp", "braid-chaos-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.dep = &deployment{dir: dir, tag: fmt.Sprintf("chaos_%d_%d", os.Getpid(), time.Now().Unix()%100000)}
	var err error
	if r.logFile, err = os.Create(filepath.Join(dir, "run.log")); err != nil {
		return err
	}
	defer r.logFile.Close()
	_ = os.WriteFile(filepath.Join(dir, "schedule.txt"), []byte(sched.String()), 0o644)
	r.logf("files: %s", dir)
	violations, err := r.run(ctx, sched)
	r.closing.Store(true)
	r.teardown()
	if se := (*setupError)(nil); errors.As(err, &se) {
		// Nothing to check: the targets' databases go, the files stay.
		r.dep.dropTargets()
		r.logf("FAILED to set up: %v; every process the run started is stopped, the targets' databases dropped; its files are kept in %s", err, dir)
		return err
	}
	if err != nil {
		r.logf("FAILED to run: %v; everything is kept in %s", err, dir)
		return err
	}
	report := r.report(sched, violations)
	fmt.Fprint(out, report)
	_ = os.WriteFile(filepath.Join(dir, "report.txt"), []byte(report), 0o644)
	if len(violations) > 0 {
		fmt.Fprintf(out, "FAILED: %d invariants broken; every log is kept in %s (nodes/*.log, sources/*/error log, run.log, consumers.log, stream-*.txt, ledger.txt)\n", len(violations), dir)
		return ErrFailed
	}
	r.dep.dropTargets()
	if o.Keep {
		fmt.Fprintf(out, "PASSED (seed %d, %v); its files are kept in %s\n", o.Seed, o.Duration, dir)
		return nil
	}
	_ = os.RemoveAll(dir)
	fmt.Fprintf(out, "PASSED (seed %d, %v); removed %s\n", o.Seed, o.Duration, dir)
	return nil
}

// run sets up, runs the workload and the schedule, and checks.
func (r *runState) run(ctx context.Context, sched Schedule) ([]Violation, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := r.dep
	if err := r.setup("preparing MariaDB's data directory template", func() error { return mariadb.Prepare(ctx) }); err != nil {
		return nil, err
	}
	// The driver logs a broken connection on its own; the writer counts them.
	_ = mysql.SetLogger(stdlog.New(io.Discard, "", 0))
	if err := r.setup("starting three MariaDB sources, each a primary and a GTID replica", func() error { return d.startSources(ctx) }); err != nil {
		return nil, err
	}
	var version atomic.Int64
	next := func() int64 { return version.Add(1) }
	var preloaded []int64
	if err := r.setup(fmt.Sprintf("preloading %d rows into each shard table", preloadRows), func() (err error) {
		preloaded, err = d.preload(next)
		return err
	}); err != nil {
		return nil, err
	}
	if err := r.setup("making the targets' databases, the kfake broker and the proxies", func() error { return d.startTargets(ctx) }); err != nil {
		return nil, err
	}
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	for _, p := range d.proxies {
		bg.Go(func() { p.run(ctx) })
	}
	for _, p := range d.vips {
		bg.Go(func() { p.run(ctx) })
	}
	r.exec = newExecutor(r)
	if err := r.setup("starting three braid nodes (TLS, gossip key, users) and creating destination "+dest, func() error {
		return d.startCluster(ctx, r.opts.Binary, r.nodeExited)
	}); err != nil {
		return nil, err
	}
	clog, err := os.Create(filepath.Join(d.dir, "consumers.log"))
	if err != nil {
		return nil, err
	}
	defer clog.Close()
	log := slog.New(slog.NewTextHandler(clog, nil))
	app := d.cluster.Security.Consumer
	native := newRecorder("native", r.clock)
	canal := newRecorder("canal", r.clock)
	if err := r.setup("starting the native and canal consumers", func() (err error) {
		r.native, err = newNativeConsumer(d.cluster.URLs(), app.User, app.Password, "chaos-native", native, log.With("consumer", "native"))
		return err
	}); err != nil {
		return nil, err
	}
	var canalPorts []int
	for _, n := range d.cluster.Nodes {
		canalPorts = append(canalPorts, n.CanalPort)
	}
	cc := &canalConsumer{rec: canal, ports: canalPorts, user: app.User, password: app.Password, clientID: 4242, log: log.With("consumer", "canal")}
	r.recs = []*recorder{native, canal}
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	bg.Go(func() { r.native.run(consumeCtx) })
	bg.Go(func() { cc.run(consumeCtx) })
	bg.Go(func() { r.sampleMemory(ctx) }) // to the end: the late replay too

	if err := r.setup(fmt.Sprintf("waiting for the initial snapshot (%d rows)", len(preloaded)), func() error { return d.waitSnapshot(ctx) }); err != nil {
		return nil, err
	}
	var txIDs atomic.Int64
	for i := range d.sources {
		w, err := newWriter(i, d.vips[i].Addr(), r.opts.Seed, r.ledger, r.clock, next, &txIDs)
		if err != nil {
			return nil, &setupError{"connecting the writer to source " + sourceNames[i], err}
		}
		defer w.db.Close()
		r.writers = append(r.writers, w)
	}
	r.start = time.Now()
	r.logf("writing about %g transactions a second per source; faults begin", r.opts.Rate)
	writeCtx, stopWriting := context.WithCancel(ctx)
	var writers sync.WaitGroup
	for _, w := range r.writers {
		writers.Go(func() { w.run(writeCtx, r.opts.Rate) })
	}
	r.exec.execute(ctx, sched)
	if rest := sched.Duration - r.clock(); rest > 0 {
		select {
		case <-time.After(rest):
		case <-ctx.Done():
		}
	}
	stopWriting()
	writers.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if p := r.setupErr.Load(); p != nil {
		return nil, *p
	}
	r.logf("faults over; the writer stopped after %d transactions", len(r.ledger.snapshot()))
	return r.finish(ctx, preloaded, stopConsumers, log)
}

// finish makes the deployment whole, waits for the consumers and sinks to
// catch up, reads the sources and targets, and checks.
func (r *runState) finish(ctx context.Context, preloaded []int64, stopConsumers func(), log *slog.Logger) ([]Violation, error) {
	d := r.dep
	for _, n := range d.cluster.Nodes {
		_ = n.Signal(syscall.SIGCONT)
		if !n.Running() {
			r.logf("node %s is down at the end: starting it", n.Name)
			r.exec.startNode(n)
		}
	}
	for _, p := range d.proxies {
		p.setCut(false)
	}
	for _, p := range d.vips {
		p.setCut(false)
	}
	d.links.mendAll()
	_ = d.kafka.signal(syscall.SIGCONT)
	txs := r.ledger.snapshot()
	for _, w := range r.writers {
		if err := w.resolve(ctx, txs); err != nil {
			return nil, err
		}
	}
	// The writer's last transactions may not be merged yet: wait until
	// the reference consumer has every committed change (or a minute has
	// passed: what is missing then is lost), and take the head after.
	want := map[string]bool{}
	for _, tx := range txs {
		if !tx.Uncertain || tx.Committed {
			for _, ch := range tx.Changes {
				want[ch] = true
			}
		}
	}
	if err := localcluster.Poll(ctx, time.Minute, "every committed change at the native consumer", func() (bool, string) {
		got := r.recs[0].received()
		seen := map[string]bool{}
		for ch := range want {
			if got[ch] {
				seen[ch] = true
			}
		}
		return len(seen) == len(want), fmt.Sprintf("%d of %d changes not received", len(want)-len(seen), len(want))
	}); err != nil {
		r.logf("%v", err)
	}
	var head uint64
	err := pollProgress(ctx, 4*time.Minute, "consumers and sinks at the destination's head", func() (bool, string) {
		h, err := d.head(ctx)
		if err != nil {
			return false, err.Error()
		}
		head = h
		for _, rec := range r.recs {
			head = max(head, rec.complete(0)) // no node may report less than a consumer received
		}
		sinks, err := d.admin().Sinks(ctx, dest)
		if err != nil {
			return false, err.Error()
		}
		var behind []string
		for _, s := range sinks {
			if s.AppliedSeq < head {
				behind = append(behind, fmt.Sprintf("sink %s at %d (%s)", s.Name, s.AppliedSeq, s.LastError))
			}
		}
		for _, rec := range r.recs {
			if c := rec.complete(head); c < head {
				behind = append(behind, fmt.Sprintf("consumer %s at %d", rec.c.Name, c))
			}
		}
		return len(behind) == 0, fmt.Sprintf("head %d; behind: %s", head, strings.Join(behind, ", "))
	})
	if err != nil {
		r.logf("not caught up: %v", err)
	}
	stopConsumers()
	r.logf("head seq %d; a late consumer replays the stream from the start", head)
	replay := newRecorder("replay", r.clock)
	app := d.cluster.Security.Consumer
	rc, err := newNativeConsumer(d.cluster.URLs(), app.User, app.Password, "chaos-replay", replay,
		log.With("consumer", "replay"), client.WithEphemeral(), client.WithFrom("earliest"))
	if err != nil {
		return nil, err
	}
	rctx, stopReplay := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rc.run(rctx) }()
	_ = pollProgress(ctx, 3*time.Minute, "the replay at the head", func() (bool, string) {
		c := replay.complete(head)
		return c >= head, fmt.Sprintf("at %d of %d", c, head)
	})
	stopReplay()
	<-done

	o := Observation{Head: head, Preloaded: preloaded, Ledger: txs}
	for _, rec := range append(r.recs, replay) {
		o.Consumers = append(o.Consumers, rec.consumed())
	}
	if o.Sources, err = d.sourceRows(ctx); err != nil {
		return nil, err
	}
	for _, t := range []struct {
		name string
		read func(context.Context) ([]TargetRow, error)
		once bool
	}{{"mysql", d.mysqlRows, true}, {"postgres", d.postgresRows, true}, {"redis", d.redisRows, false}} {
		rows, err := t.read(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading sink %s's target: %w", t.name, err)
		}
		o.Targets = append(o.Targets, Target{Sink: t.name, ExactlyOnce: t.once, Rows: rows})
	}
	published, err := d.kafkaRows(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading sink kafka's topic: %w", err)
	}
	o.Published = append(o.Published, Published{Sink: "kafka", Changes: published})
	delivered, err := d.rabbitRows(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading sink rabbitmq's queue: %w", err)
	}
	o.Delivered = append(o.Delivered, delivered)
	for _, how := range d.kafka.exited() {
		o.Exits = append(o.Exits, Exit{Process: "the kfake broker", At: -1, How: how})
	}
	r.exitMu.Lock()
	o.Exits = append(o.Exits, r.exits...)
	r.exitMu.Unlock()
	r.exec.mu.Lock()
	o.Takeovers = append(o.Takeovers, r.exec.takeovers...)
	o.Follows = append(o.Follows, r.exec.follows...)
	r.exec.mu.Unlock()
	o.Memory = r.memory()
	vs := Check(o)
	vs = append(vs, r.verifySinks(ctx)...)
	r.summary(o)
	if len(vs) > 0 {
		r.dump(o)
	}
	return vs, nil
}

// stall is how long a wait at the end goes on with nothing moving.
const stall = time.Minute

// pollProgress is localcluster.Poll that also gives up once cond's
// description has not changed for a minute: nothing moves any more.
func pollProgress(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	last, since, stalled := "", time.Now(), false
	err := localcluster.Poll(ctx, timeout, what, func() (bool, string) {
		ok, desc := cond()
		if desc != last {
			last, since = desc, time.Now()
		} else if !ok && time.Since(since) > stall {
			stalled = true
			return true, ""
		}
		return ok, desc
	})
	if stalled {
		return fmt.Errorf("no %s: nothing moved for %v: %s", what, stall, last)
	}
	return err
}

// verifySinks runs braid's own `sink verify` on each sink. Rows Redis
// holds that the sources do not are no difference there: a TRUNCATE
// leaves them (the sink ignores DDL), as sink-current allows.
func (r *runState) verifySinks(ctx context.Context) []Violation {
	var out []Violation
	for _, s := range []string{"mysql", "postgres", "redis"} {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		v, err := r.dep.admin().VerifySink(cctx, dest, s, 500)
		cancel()
		if err != nil {
			out = append(out, Violation{"sink-verify", fmt.Sprintf("braid sink verify %s: %v", s, err), -1})
			continue
		}
		var diffs []string
		for _, d := range v.Differences {
			if s == "redis" && d.Kind == "extra" {
				continue
			}
			var key []string
			for _, k := range d.Key {
				key = append(key, k.Column+"="+deref(k.Value))
			}
			diffs = append(diffs, fmt.Sprintf("%s %s %s (%s)", d.Kind, d.Table, strings.Join(key, ","), d.Origin))
		}
		if len(diffs) > 0 {
			out = append(out, Violation{"sink-verify", fmt.Sprintf("braid sink verify %s: %d differences: %s", s, len(diffs), list(diffs)), -1})
		}
	}
	return out
}

// summary logs what the run did and saw.
func (r *runState) summary(o Observation) {
	changes, uncertain := 0, 0
	for _, tx := range o.Ledger {
		changes += len(tx.Changes)
		if tx.Uncertain {
			uncertain++
		}
	}
	r.logf("ledger: %d transactions, %d row changes, %d with a COMMIT whose outcome was asked of the source", len(o.Ledger), changes, uncertain)
	for _, c := range o.Consumers {
		r.logf("consumer %s: %d transactions, %d conflicts", c.Name, len(c.Txns), len(c.Conflicts))
	}
	for _, t := range o.Targets {
		r.logf("sink %s: %d rows (sources: %d)", t.Sink, len(t.Rows), len(o.Sources))
	}
	for _, d := range o.Delivered {
		r.logf("sink %s: %d messages, %d row changes after de-duplication by message id", d.Sink, d.Messages, len(d.Changes))
	}
}

// dump writes what each consumer received, a transaction a line ("seq
// at fingerprint"), and the ledger, into the run directory, to read a
// failure's seqs and rows after the run.
func (r *runState) dump(o Observation) {
	for _, c := range o.Consumers {
		var b strings.Builder
		for _, seq := range sortedSeqs(c.Txns) {
			t := c.Txns[seq]
			fmt.Fprintf(&b, "%d %v %s\n", seq, t.At.Round(time.Millisecond), t.Fingerprint())
		}
		_ = os.WriteFile(filepath.Join(r.dep.dir, "stream-"+c.Name+".txt"), []byte(b.String()), 0o644)
	}
	var b strings.Builder
	for _, tx := range o.Ledger {
		fmt.Fprintf(&b, "%s %d %v uncertain=%v committed=%v %s\n", tx.Source, tx.ID, tx.At.Round(time.Millisecond),
			tx.Uncertain, tx.Committed, strings.Join(tx.Changes, ", "))
	}
	_ = os.WriteFile(filepath.Join(r.dep.dir, "ledger.txt"), []byte(b.String()), 0o644)
}

// nodeExited records a node's exit that no fault caused.
func (r *runState) nodeExited(n *localcluster.Node, err error) {
	if r.closing.Load() || r.exec.isExpected(n.Name) {
		return
	}
	how := "exit status 0"
	if err != nil {
		how = err.Error()
	}
	r.logf("node %s exited on its own: %s", n.Name, how)
	r.exitMu.Lock()
	r.exits = append(r.exits, Exit{Process: "node " + n.Name, At: r.clock(), How: how})
	r.exitMu.Unlock()
}

// report is the run's end: faults by kind, each violation with the faults
// around it, and the nodes' peak memory.
func (r *runState) report(s Schedule, vs []Violation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== braid chaos report: seed %d, duration %v\n", s.Seed, s.Duration)
	r.exec.mu.Lock()
	var kinds []string
	for k, n := range r.exec.fired {
		kinds = append(kinds, fmt.Sprintf("%s ×%d", k, n))
	}
	r.exec.mu.Unlock()
	slices.Sort(kinds)
	fmt.Fprintf(&b, "faults fired: %s\n", strings.Join(kinds, ", "))
	r.peakMu.Lock()
	for _, n := range slices.Sorted(maps.Keys(r.peaks)) {
		p := r.peaks[n]
		fmt.Fprintf(&b, "node %s peak memory: %.0f MiB resident, %.0f MiB anonymous at %v (bound %.0f MiB)\n",
			n, mib(p.rss), mib(p.anon), p.anonAt.Round(100*time.Millisecond), mib(memoryBound))
	}
	r.peakMu.Unlock()
	fmt.Fprintf(&b, "invariants checked: %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, sink-verify\n",
		InvDense, InvConsistent, InvLedger, InvSnapshot, InvSinkEqual, InvSinkHolds, InvPublished, InvDelivered, InvTakeover, InvFollow, InvMemory, InvNoExit)
	r.exec.mu.Lock()
	for _, f := range r.exec.follows {
		if f.After >= 0 {
			fmt.Fprintf(&b, "failover %s at %v: braid read the promoted server after %v (bound %v)\n", f.Source, f.At.Round(100*time.Millisecond),
				f.After.Round(100*time.Millisecond), f.Bound)
		} else {
			fmt.Fprintf(&b, "failover %s at %v: braid did not read the promoted server within %v\n", f.Source, f.At.Round(100*time.Millisecond), followWait)
		}
	}
	for _, t := range r.exec.takeovers {
		if t.By != "" {
			fmt.Fprintf(&b, "owner %s cut off at %v: %s took over after %v\n", t.Node, t.At.Round(100*time.Millisecond), t.By, t.After.Round(100*time.Millisecond))
		} else {
			fmt.Fprintf(&b, "owner %s cut off at %v for %v: no takeover\n", t.Node, t.At.Round(100*time.Millisecond), t.For.Round(100*time.Millisecond))
		}
	}
	r.exec.mu.Unlock()
	if len(vs) == 0 {
		b.WriteString("every invariant held\n")
		return b.String()
	}
	for _, v := range vs {
		fmt.Fprintf(&b, "BROKEN %s\n", v)
		if v.At >= 0 {
			fmt.Fprintf(&b, "  at %v; faults around it:\n", v.At.Round(100*time.Millisecond))
			for _, f := range s.Around(v.At, 30*time.Second) {
				fmt.Fprintf(&b, "    %s\n", f)
			}
		}
	}
	if notes := r.notableLines(filepath.Join(r.dep.dir, "nodes")); len(notes) > 0 {
		// What the stream's order depends on beyond the binlogs: a CI
		// run's report may be all that is left of it.
		b.WriteString("braid's lines on the stream's order (late transactions, takeovers, resumes, source switches, replays):\n")
		for _, l := range notes {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

// notableMessages are the node log lines a failed run's report quotes:
// what decided the stream's order beyond the binlogs.
var notableMessages = []string{"(late)", "taking the destination over", "resuming from", "source switched servers",
	"replay reader started", "a replay diverged", "every source is past the furthest cursor", "lost in a failover"}

// maxNotable bounds the lines notableLines quotes.
const maxNotable = 40

// notableLines returns the lines of the nodes' logs under dir that carry
// one of notableMessages, as "time node: msg key=value…" (time from the
// run's start), the first maxNotable by time.
func (r *runState) notableLines(dir string) []string {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	type line struct {
		at   time.Duration
		text string
	}
	var out []line
	for _, name := range logs {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for l := range strings.Lines(string(data)) {
			if !slices.ContainsFunc(notableMessages, func(m string) bool { return strings.Contains(l, m) }) {
				continue
			}
			at := time.Duration(-1)
			if f := strings.Fields(l); len(f) > 0 {
				if ts, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time=")); err == nil {
					at = ts.Sub(r.start)
				}
			}
			text := strings.TrimSpace(l)
			if i := strings.Index(text, "msg="); i >= 0 {
				text = text[i:]
			}
			if len(text) > 300 {
				text = text[:300] + "…"
			}
			out = append(out, line{at, fmt.Sprintf("%9v %s: %s", at.Round(100*time.Millisecond), strings.TrimSuffix(filepath.Base(name), ".log"), text)})
		}
	}
	slices.SortStableFunc(out, func(a, b line) int { return cmp.Compare(a.at, b.at) })
	var texts []string
	for i, l := range out {
		if i == maxNotable {
			texts = append(texts, fmt.Sprintf("… and %d more in %s", len(out)-maxNotable, dir))
			break
		}
		texts = append(texts, l.text)
	}
	return texts
}

// teardown stops every process the run started (the nodes, the sources,
// the kfake broker) and closes its proxies, however far the setup went;
// their files stay until Run removes the directory of a run that passed.
func (r *runState) teardown() {
	d := r.dep
	if d.cluster != nil {
		for _, n := range d.cluster.Nodes {
			_ = n.Signal(syscall.SIGCONT)
		}
		d.cluster.Stop(10 * time.Second)
	}
	if d.links != nil {
		d.links.stop()
	}
	for _, s := range append(d.sources, d.replicas...) {
		if s != nil {
			_ = s.Stop()
		}
	}
	d.kafka.stop()
	// The proxies' goroutines end with the run's context; a setup that
	// failed before it started them leaves ports open that only this
	// closes.
	for _, p := range d.proxies {
		p.close()
	}
	for _, p := range d.vips {
		p.close()
	}
	_ = mariadb.RemoveTemplate()
}
