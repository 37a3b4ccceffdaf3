package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	myclient "github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/internal/mariadb"
)

// braid demo: three MariaDB shard servers, a three-node braid cluster, a
// live order workload and its merged stream, all on this machine. A demo
// value owns every process and goroutine it starts; run sets them up and
// watches, close stops them all.

// demoBinary, when set, is the braid binary the demo runs its nodes from
// instead of its own executable: in a test, that is the test binary.
var demoBinary string

// demoInstall is the one line a user without MariaDB reads.
const demoInstall = "braid demo needs MariaDB (mariadbd and mariadb-install-db): install it with " +
	"`sudo apt-get install mariadb-server` (Debian/Ubuntu) or `brew install mariadb` (macOS); " +
	"the demo starts servers of its own, the system service need not run"

const (
	demoDest      = "shop"
	demoClientID  = "demo"
	demoNodeGrace = 5 * time.Second  // SIGTERM to SIGKILL for a node at exit
	demoWait      = 60 * time.Second // the most any one step of the demo waits
)

// demoOptions are braid demo's flags.
type demoOptions struct {
	duration  time.Duration // stream this long, then stop (0: until Ctrl-C)
	rate      float64       // workload transactions a second, all shards together
	killAfter time.Duration // kill the owner this long into the stream (0: never)
	dir       string        // keep the files here ("": a temp dir, removed at exit)
	json      bool          // print the stream's flat-message JSON lines
	logLevel  string        // the nodes' and the consumer's log level
}

// validate reports every problem at once.
func (o demoOptions) validate() error {
	var errs []error
	if o.duration < 0 {
		errs = append(errs, fmt.Errorf("--duration %v: want 0 (until Ctrl-C) or more", o.duration))
	}
	if !(o.rate > 0 && o.rate <= 1000) {
		errs = append(errs, fmt.Errorf("--rate %v: want more than 0 and at most 1000 transactions a second", o.rate))
	}
	if o.killAfter < 0 {
		errs = append(errs, fmt.Errorf("--kill-after %v: want 0 (never) or more", o.killAfter))
	}
	if o.duration > 0 && o.killAfter > 0 && o.killAfter >= o.duration {
		errs = append(errs, fmt.Errorf("--kill-after %v: want less than --duration %v, to see the takeover", o.killAfter, o.duration))
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(o.logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.logLevel))
	}
	if o.dir != "" {
		if entries, err := os.ReadDir(o.dir); err == nil && len(entries) > 0 {
			errs = append(errs, fmt.Errorf("--dir %s is not empty: give a new or empty directory (the demo starts from scratch)", o.dir))
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("--dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o demoOptions
	fs.DurationVar(&o.duration, "duration", 0, "stop after streaming this long, e.g. 1m (0: until Ctrl-C)")
	fs.Float64Var(&o.rate, "rate", 10, "transactions a second the order workload writes, over all six schemas")
	fs.DurationVar(&o.killAfter, "kill-after", 0, "this long into the stream, kill the node that runs shop (SIGKILL) and report the takeover (0: leave it to you)")
	fs.StringVar(&o.dir, "dir", "", "keep the demo's files (node logs and data, shard servers, the spec) in this new or empty directory (default: a temp dir, removed at exit)")
	fs.BoolVar(&o.json, "json", false, "print the stream as canal flat-message JSON lines on stdout (the narration goes to stderr)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level of the nodes' log files and the consumer's: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: braid demo [--duration D] [--rate N] [--kill-after D] [--dir DIR] [--json] [--log-level L]")
		fmt.Fprintln(stderr, "\nBraid on one machine, from nothing: starts three MariaDB shard servers (a, b, c)")
		fmt.Fprintln(stderr, "holding shop_0 … shop_5 (two schemas each, an orders table in each), three braid")
		fmt.Fprintln(stderr, "nodes (n1, n2, n3) that form a cluster, and registers the destination shop, which")
		fmt.Fprintln(stderr, "merges the six orders tables into shop.orders. It then writes orders into the")
		fmt.Fprintln(stderr, "shards and prints the merged stream, one line per row change, and tells you how")
		fmt.Fprintln(stderr, "to kill the node that runs shop (kill -9 PID) and watch another take it over; the")
		fmt.Fprintln(stderr, "demo restarts a killed node so you can do it again. Ctrl-C stops everything and")
		fmt.Fprintln(stderr, "removes what it made (unless --dir). With --duration it stops by itself, after")
		fmt.Fprintln(stderr, "checking that every transaction the workload committed arrived, once, in seq order.")
		fmt.Fprintln(stderr, "\nNeeds mariadbd (on PATH or in /usr/sbin); the system service need not run.")
		fmt.Fprintln(stderr, "Exits 1 when a step fails (the message says which, and where the logs are).")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "braid demo: unexpected argument %q; see braid demo --help\n", fs.Arg(0))
		return 2
	}
	if err := o.validate(); err != nil {
		for _, line := range strings.Split(oneLine(err), "\n") {
			fmt.Fprintln(stderr, "braid demo:", line)
		}
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	d, err := newDemo(o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "braid demo:", oneLine(err))
		return 1
	}
	err = d.run(ctx)
	failed := err != nil && ctx.Err() == nil && !errors.Is(err, mariadb.ErrNoServer)
	if failed && len(d.nodes) > 0 {
		d.keep = true // for the logs
	}
	d.close()
	switch {
	case errors.Is(err, mariadb.ErrNoServer):
		fmt.Fprintln(stderr, demoInstall)
		return 1
	case failed:
		fmt.Fprintln(stderr, "braid demo:", oneLine(err))
		if d.keep {
			fmt.Fprintf(stderr, "braid demo: the logs are in %s\n", d.dir)
		}
		return 1
	}
	return 0
}

// demo is one run of braid demo. Its methods run on the goroutine of
// runDemo, but for the stream's and the workload's own goroutines, which
// run() starts and close() stops.
type demo struct {
	opts   demoOptions
	con    *console
	bin    string // the braid binary the nodes run
	braid  string // how the user runs braid, for the commands the demo suggests
	dir    string // everything the demo writes
	keep   bool   // dir is kept at exit: it is the user's (--dir), or a failed run's logs
	hc     *http.Client
	shards []*mariadb.Server
	nodes  []*demoNode
	deaths chan nodeExit // node processes that exited

	consumerLog *os.File
	stream      *demoStream
	stopStream  context.CancelFunc
	streamDone  chan struct{} // closed when the consumer's Stream returned
	streamErr   error         // what it returned, once streamDone is closed
	work        *workload
	stopWork    context.CancelFunc
	workDone    chan struct{}

	owner    string // the node that runs shop, as last seen
	epoch    uint64
	killed   *demoNode // the node --kill-after killed, until its takeover is told
	killDone bool      // --kill-after has fired
	failure  error     // what went wrong while streaming; the demo goes on and exits 1
}

// nodeExit is a node process that exited.
type nodeExit struct {
	node *demoNode
	err  error // how it exited
}

func newDemo(o demoOptions, stdout, stderr io.Writer) (*demo, error) {
	d := &demo{opts: o, con: &console{say: stdout, stream: stdout}, hc: &http.Client{Timeout: 3 * time.Second},
		deaths: make(chan nodeExit, 16)}
	if o.json {
		d.con.say = stderr
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding braid's own binary to run the nodes: %w", err)
	}
	d.bin, d.braid = exe, exe
	if demoBinary != "" {
		d.bin, d.braid = demoBinary, demoBinary
	}
	if p, err := exec.LookPath("braid"); err == nil && sameFile(p, d.bin) {
		d.braid = "braid"
	} else if strings.Contains(d.bin, "go-build") {
		d.braid = "go run ./cmd/braid" // a binary of go run, gone when it exits
	}
	if o.dir != "" {
		d.keep = true
		if d.dir, err = filepath.Abs(o.dir); err == nil {
			err = os.MkdirAll(d.dir, 0o755)
		}
	} else {
		// Short: the shards' unix sockets live in it, and their paths
		// may not pass 107 bytes.
		base := os.TempDir()
		if len(base) > 40 {
			base = "/tmp"
		}
		d.dir, err = os.MkdirTemp(base, "braid-demo-")
	}
	if err != nil {
		return nil, fmt.Errorf("demo directory: %w", err)
	}
	return d, nil
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// run sets everything up and streams until ctx ends or --duration passes;
// close then stops whatever it started, whether run succeeded or not.
func (d *demo) run(ctx context.Context) error {
	// Without MariaDB, the one line that says how to install it is all
	// the user should read.
	if err := mariadb.Prepare(ctx); err != nil {
		return err
	}
	c := d.con
	c.sayf("braid demo: three MariaDB shards, a three-node braid cluster, a live order workload and its merged stream, all on this machine.")
	if d.keep {
		c.sayf("files: %s (kept at exit)", d.dir)
	} else {
		c.sayf("files: %s (removed at exit; keep them with --dir DIR)", d.dir)
	}
	if err := d.startShards(ctx); err != nil {
		return err
	}
	if err := d.startNodes(ctx); err != nil {
		return err
	}
	if err := d.waitCluster(ctx); err != nil {
		return err
	}
	if err := d.createDestination(ctx); err != nil {
		return err
	}
	if err := d.waitOwner(ctx, ""); err != nil {
		return err
	}
	if err := d.startStreaming(ctx); err != nil {
		return err
	}
	c.sayf("shop runs on %s. Writing about %g transactions a second into shop_0 … shop_5; the merged stream, as client id %q:", d.owner, d.opts.rate, demoClientID)
	c.sayf("")
	if err := d.waitFirstRow(ctx); err != nil {
		return err
	}
	d.instructions()
	return d.watch(ctx)
}

// startShards launches the three shard servers, each with two schemas.
func (d *demo) startShards(ctx context.Context) error {
	d.con.sayf("starting three MariaDB shard servers")
	dir := filepath.Join(d.dir, "shards")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d.shards = make([]*mariadb.Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range d.shards {
		wg.Go(func() {
			d.shards[i], errs[i] = mariadb.Launch(ctx, mariadb.Options{Dir: dir, ServerID: uint32(i + 1)})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("starting the shard servers: %w", err)
	}
	for i, s := range d.shards {
		a, b := 2*i, 2*i+1
		if err := s.Exec(
			fmt.Sprintf("CREATE DATABASE shop_%d", a), fmt.Sprintf("CREATE DATABASE shop_%d", b),
			fmt.Sprintf(`CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, customer INT NOT NULL,
				amount DECIMAL(10,2) NOT NULL, status VARCHAR(16) NOT NULL, created_at DATETIME(3) NOT NULL)`, a),
			fmt.Sprintf("CREATE TABLE shop_%d.orders LIKE shop_%d.orders", b, a),
		); err != nil {
			return fmt.Errorf("creating the shop schemas: %w", err)
		}
		d.con.sayf("  shard %s  %s  holds shop_%d and shop_%d   (log: %s)", sourceName(i), s.Addr(), a, b, d.rel(s.ErrorLog))
	}
	return nil
}

// sourceName is shard i's name in the spec: a, b, c.
func sourceName(i int) string { return string(rune('a' + i)) }

// rel shortens a path inside the demo directory for display.
func (d *demo) rel(path string) string {
	if r, err := filepath.Rel(d.dir, path); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.Join(filepath.Base(d.dir), r)
	}
	return path
}

// startNodes starts n1, n2, n3 on free ports, each joining the others.
func (d *demo) startNodes(ctx context.Context) error {
	ports, err := demoFreePorts(12)
	if err != nil {
		return err
	}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		d.nodes = append(d.nodes, &demoNode{name: name, dir: filepath.Join(d.dir, name), logPath: filepath.Join(d.dir, name+".log"),
			raft: ports[4*i], gossip: ports[4*i+1], http: ports[4*i+2], canal: ports[4*i+3]})
	}
	for _, n := range d.nodes {
		var join []string
		for _, o := range d.nodes {
			if o != n {
				join = append(join, net.JoinHostPort("127.0.0.1", strconv.Itoa(o.gossip)))
			}
		}
		n.args = []string{"server", "--name", n.name, "--data-dir", n.dir, "--addr", "127.0.0.1",
			"--raft-port", strconv.Itoa(n.raft), "--gossip-port", strconv.Itoa(n.gossip),
			"--http-port", strconv.Itoa(n.http), "--canal-port", strconv.Itoa(n.canal),
			"--join", strings.Join(join, ","), "--bootstrap-expect", "3", "--log-level", d.opts.logLevel}
	}
	d.con.sayf("starting three braid nodes (%s server ...; their logs go to files, not here)", d.braid)
	for _, n := range d.nodes {
		if err := n.start(d.bin, d.deaths); err != nil {
			return err
		}
		d.con.sayf("  node %s  %s  pid %d   (log: %s)", n.name, n.url(), n.pid(), d.rel(n.logPath))
	}
	return ctx.Err()
}

// demoFreePorts returns n loopback ports that were free a moment ago.
func demoFreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding free ports: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// status asks the running nodes, in turn, for the cluster's status.
func (d *demo) status(ctx context.Context) (cluster.ClusterStatus, error) {
	var st cluster.ClusterStatus
	err := errors.New("no node is running")
	for _, n := range d.nodes {
		if !n.running() {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url()+"/v1/cluster", nil)
		resp, rerr := d.hc.Do(req)
		if rerr != nil {
			err = rerr
			continue
		}
		st = cluster.ClusterStatus{}
		rerr = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if rerr == nil && resp.StatusCode == http.StatusOK {
			return st, nil
		}
		err = fmt.Errorf("%s: GET /v1/cluster: %s", n.name, resp.Status)
	}
	return st, err
}

// poll calls check every 200ms until it reports done or an error, ctx
// ends, or demoWait passes.
func (d *demo) poll(ctx context.Context, what string, check func() (done bool, err error)) error {
	deadline := time.Now().Add(demoWait)
	for {
		done, err := check()
		if done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v; the nodes' logs are %s/n*.log", what, demoWait, d.dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deadDuringSetup fails set-up when a node process exited.
func (d *demo) deadDuringSetup() error {
	for _, n := range d.nodes {
		if !n.running() {
			return fmt.Errorf("node %s exited: %v; the end of its log (%s):\n%s", n.name, n.exitErr(), n.logPath, n.logTail(15))
		}
	}
	return nil
}

// waitCluster waits for a Raft leader and three live nodes, saying what it
// waits for as that changes.
func (d *demo) waitCluster(ctx context.Context) error {
	began := time.Now()
	last := ""
	return d.poll(ctx, "cluster of three nodes with a leader", func() (bool, error) {
		if err := d.deadDuringSetup(); err != nil {
			return false, err
		}
		st, err := d.status(ctx)
		alive := 0
		for _, n := range st.Nodes {
			if n.State == "alive" && n.Raft != "" {
				alive++
			}
		}
		var now string
		switch {
		case err != nil:
			now = "waiting for the nodes to answer"
		case st.Leader == "":
			now = fmt.Sprintf("waiting for the cluster to form: %d of 3 nodes in it, no Raft leader yet", alive)
		case alive < 3:
			now = fmt.Sprintf("waiting for the cluster: Raft leader %s, %d of 3 nodes in it", st.Leader, alive)
		default:
			d.con.sayf("cluster up after %v: Raft leader %s, three nodes alive", time.Since(began).Round(100*time.Millisecond), st.Leader)
			return true, nil
		}
		if now != last {
			d.con.sayf("  %s", now)
			last = now
		}
		return false, nil
	})
}

// demoSpec is the destination the demo registers.
const demoSpec = `# The destination braid demo registered: three shard servers, six schemas,
# one logical table.
name: shop
sources:
  - {name: a, address: '%s', start: earliest}
  - {name: b, address: '%s', start: earliest}
  - {name: c, address: '%s', start: earliest}
tables: ['shop_\d+\.orders']
route:
  - {match: 'shop_\d+\.(\w+)', to: 'shop.$1'}
heartbeat: 200ms
max_clock_skew: 200ms
`

// createDestination registers shop through POST /v1/destinations, retrying
// while the cluster settles.
func (d *demo) createDestination(ctx context.Context) error {
	spec := fmt.Sprintf(demoSpec, d.shards[0].Addr(), d.shards[1].Addr(), d.shards[2].Addr())
	path := filepath.Join(d.dir, "shop.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		return err
	}
	i := 0
	err := d.poll(ctx, "destination created", func() (bool, error) {
		n := d.nodes[i%len(d.nodes)]
		i++
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.url()+"/v1/destinations", strings.NewReader(spec))
		hc := http.Client{Timeout: 20 * time.Second} // the node checks every source first
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == http.StatusCreated:
			return true, nil
		case resp.StatusCode == http.StatusServiceUnavailable:
			return false, nil
		}
		var e struct{ Error string }
		_ = json.Unmarshal(body, &e)
		return false, fmt.Errorf("creating destination shop through %s: %s: %s", n.name, resp.Status, e.Error)
	})
	if err != nil {
		return err
	}
	d.con.sayf("registered destination shop (POST /v1/destinations; the spec: %s): sources a, b, c; tables shop_N.orders → shop.orders", d.rel(path))
	return nil
}

// waitOwner waits until shop has a running owner other than not, and
// records it.
func (d *demo) waitOwner(ctx context.Context, not string) error {
	return d.poll(ctx, "owner of shop", func() (bool, error) {
		if not == "" {
			if err := d.deadDuringSetup(); err != nil {
				return false, err
			}
		}
		owner, epoch, ok := d.currentOwner(ctx)
		if ok && owner != not {
			d.owner, d.epoch = owner, epoch
			return true, nil
		}
		return false, nil
	})
}

// currentOwner is shop's owner and epoch when a running node owns it.
func (d *demo) currentOwner(ctx context.Context) (string, uint64, bool) {
	st, err := d.status(ctx)
	if err != nil {
		return "", 0, false
	}
	for _, dest := range st.Destinations {
		if dest.Name == demoDest {
			if n := d.node(dest.Owner); n != nil && n.running() {
				return dest.Owner, dest.Epoch, true
			}
		}
	}
	return "", 0, false
}

func (d *demo) node(name string) *demoNode {
	for _, n := range d.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// startStreaming starts the workload and the consumer.
func (d *demo) startStreaming(ctx context.Context) error {
	var err error
	if d.consumerLog, err = os.Create(filepath.Join(d.dir, "consumer.log")); err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(d.opts.logLevel))
	var urls []string
	for _, n := range d.nodes {
		urls = append(urls, n.url())
	}
	cl, err := client.New(strings.Join(urls, ","), client.WithBackoff(100*time.Millisecond, time.Second),
		client.WithLogger(slog.New(slog.NewTextHandler(d.consumerLog, &slog.HandlerOptions{Level: level}))))
	if err != nil {
		return err
	}
	d.work = newWorkload(d.shards, d.opts.rate, d.con)
	wctx, stopWork := context.WithCancel(ctx)
	d.stopWork, d.workDone = stopWork, make(chan struct{})
	go func() {
		defer close(d.workDone)
		d.work.run(wctx)
	}()
	d.stream = newDemoStream(d.con, d.opts.json)
	sctx, stopStream := context.WithCancel(ctx)
	d.stopStream, d.streamDone = stopStream, make(chan struct{})
	go func() {
		defer close(d.streamDone)
		d.streamErr = cl.Stream(sctx, demoDest, demoClientID, d.stream.handle)
	}()
	return nil
}

// waitFirstRow waits for the stream's first row change.
func (d *demo) waitFirstRow(ctx context.Context) error {
	select {
	case <-d.stream.first:
		return nil
	case <-d.streamDone:
		return fmt.Errorf("the stream stopped: %v", d.streamErr)
	case <-time.After(demoWait):
		return fmt.Errorf("no row streamed within %v; the logs are in %s", demoWait, d.dir)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops what run started: the workload, the stream, the nodes
// (SIGTERM, SIGKILL after demoNodeGrace), the shard servers; and removes
// the demo directory unless it is the user's.
func (d *demo) close() {
	if d.stopWork != nil {
		d.stopWork()
		<-d.workDone
		d.stopStream()
		<-d.streamDone
		d.stopWork, d.stopStream = nil, nil
		d.work.close()
	}
	var wg sync.WaitGroup
	for _, n := range d.nodes {
		wg.Go(func() {
			if n.stop(demoNodeGrace) {
				d.con.sayf("node %s did not stop within %v of SIGTERM: killed", n.name, demoNodeGrace)
			}
		})
	}
	wg.Wait()
	for _, s := range d.shards {
		if s == nil {
			continue
		}
		var err error
		if d.keep {
			err = s.Stop()
		} else {
			err = s.Remove()
		}
		if err != nil {
			d.con.sayf("shard %s: %v", s.Addr(), err)
		}
	}
	_ = mariadb.RemoveTemplate()
	d.hc.CloseIdleConnections()
	if d.consumerLog != nil {
		d.consumerLog.Close()
	}
	if d.shards == nil { // nothing was started
		if !d.keep {
			_ = os.RemoveAll(d.dir)
		}
		return
	}
	if d.keep {
		d.con.sayf("stopped; the nodes' and shards' logs and data are in %s", d.dir)
		return
	}
	if err := os.RemoveAll(d.dir); err != nil {
		d.con.sayf("removing %s: %v", d.dir, err)
		return
	}
	d.con.sayf("stopped; removed %s", d.dir)
}

// demoNode is one braid server process of the demo, and its restarts.
type demoNode struct {
	name, dir, logPath        string
	raft, gossip, http, canal int
	args                      []string // the command line but the binary
	cmd                       *exec.Cmd
	exited                    chan struct{} // closed when the process exits
	waitErr                   error         // how it exited, once exited is closed
}

func (n *demoNode) url() string { return "http://127.0.0.1:" + strconv.Itoa(n.http) }

func (n *demoNode) pid() int { return n.cmd.Process.Pid }

// start runs the node; when its process exits, the exit is sent on deaths
// (which has room: a node has at most one exit not yet read).
func (n *demoNode) start(bin string, deaths chan<- nodeExit) error {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s braid demo starts %s %s\n", time.Now().Format(time.StampMilli), bin, strings.Join(n.args, " "))
	cmd := exec.Command(bin, n.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting node %s: %w", n.name, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.waitErr = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		f.Close()
		n.waitErr = err
		close(exited)
		select {
		case deaths <- nodeExit{node: n, err: err}:
		default:
		}
	}()
	return nil
}

// running reports whether the node's process runs.
func (n *demoNode) running() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// exitErr is how the process exited; call after running reports false.
func (n *demoNode) exitErr() error {
	if n.exited == nil {
		return errors.New("never started")
	}
	<-n.exited
	if n.waitErr == nil {
		return errors.New("exit status 0")
	}
	return n.waitErr
}

// stop sends SIGTERM and, after grace, SIGKILL; it reports whether it had
// to kill.
func (n *demoNode) stop(grace time.Duration) bool {
	if !n.running() {
		return false
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-n.exited:
		return false
	case <-t.C:
		_ = n.cmd.Process.Kill()
		<-n.exited
		return true
	}
}

// logTail returns the last n lines of the node's log.
func (n *demoNode) logTail(lines int) string {
	b, _ := os.ReadFile(n.logPath)
	l := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return string(bytes.Join(l[max(0, len(l)-lines):], []byte("\n")))
}

// watch streams until ctx ends or --duration passes: it kills the owner
// at --kill-after, tells each takeover and restarts the node that died,
// and at --duration drains the stream and sums up.
func (d *demo) watch(ctx context.Context) error {
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if d.opts.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, d.opts.duration)
	}
	defer cancel()
	var killC <-chan time.Time
	if d.opts.killAfter > 0 {
		t := time.NewTimer(d.opts.killAfter)
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
	if n == nil || !n.running() {
		d.con.sayf("*** --kill-after: %s, which ran shop, is not running; nothing to kill", d.owner)
		return
	}
	d.con.sayf("*** --kill-after %v: killing %s, which runs shop: kill -9 %d", d.opts.killAfter, n.name, n.pid())
	d.killed = n
	d.stream.mark()
	_ = n.cmd.Process.Kill()
}

// handleDeath tells what a node's death does: if it ran shop, another node
// takes it over and the stream goes on from there; then the dead node is
// started again on its data directory.
func (d *demo) handleDeath(ctx context.Context, ev nodeExit) {
	n := ev.node
	if ctx.Err() != nil {
		return // the demo is stopping
	}
	if d.killed != n && n.name == d.owner {
		d.stream.mark() // killed by someone else: the demo learns it at once
	}
	d.killed = nil
	d.con.sayf("*** node %s (pid %d) is gone (%v)", n.name, n.pid(), ev.err)
	if n.name != d.owner {
		d.con.sayf("*** %s did not run shop (%s does): the stream goes on", n.name, d.owner)
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
	d.con.sayf("*** restarting %s on its data directory, so that the cluster has three nodes again", n.name)
	if err := n.start(d.bin, d.deaths); err != nil {
		d.fail(err)
		return
	}
	err := d.poll(ctx, n.name+" back in the cluster", func() (bool, error) {
		st, err := d.status(ctx)
		if err != nil || st.Leader == "" {
			return false, nil
		}
		for _, s := range st.Nodes {
			if s.Name == n.name && s.State == "alive" {
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
		d.con.sayf("*** %s is back (pid %d)", n.name, n.pid())
		d.instructions()
	}
}

// instructions prints the box that tells how to kill the owner and what
// to run meanwhile.
func (d *demo) instructions() {
	owner := d.node(d.owner)
	other := d.nodes[0] // a node that stays up when the owner is killed
	for _, n := range d.nodes {
		if n != owner && n.running() {
			other = n
			break
		}
	}
	lines := []string{
		fmt.Sprintf("shop runs on node %s, pid %d. To watch another node take it over,", owner.name, owner.pid()),
		"kill it from another terminal:",
		"",
		fmt.Sprintf("    kill -9 %d", owner.pid()),
		"",
		"The stream here pauses a few seconds and goes on from the new owner,",
		"nothing lost or repeated; the demo then restarts the killed node.",
	}
	if d.opts.killAfter > 0 && !d.killDone {
		lines = append(lines, fmt.Sprintf("(With --kill-after, the demo does it itself at %s.)",
			time.Now().Add(d.opts.killAfter).Format("15:04:05")))
	}
	lines = append(lines, "",
		"Meanwhile, in another terminal:",
		fmt.Sprintf("    %s cluster status --server %s", d.braid, other.url()),
		fmt.Sprintf("    %s tail shop --server %s --client-id you", d.braid, other.url()),
		fmt.Sprintf("canal clients: any node's canal port, e.g. 127.0.0.1:%d, destination shop", other.canal),
		fmt.Sprintf("logs: %s/{n1,n2,n3,consumer}.log", d.dir))
	if d.opts.duration == 0 {
		lines = append(lines, "Ctrl-C stops the demo.")
	}
	d.con.box(lines)
}

// finish ends a run at --duration: the workload stops, the stream gets
// what it committed, and the numbers are checked.
func (d *demo) finish(ctx context.Context) error {
	d.con.sayf("\n--duration %v reached: stopping the workload; waiting for the stream to deliver what it committed", d.opts.duration)
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

// demoStream is the consumer's side: it prints each message and keeps
// what the narration needs (counts, the seqs, the pause around a kill).
// handle runs on the Stream goroutine; the other methods on the demo's.
type demoStream struct {
	con       *console
	json      bool
	first     chan struct{} // closed at the first row change
	firstOnce sync.Once

	mu        sync.Mutex
	st        streamStats
	lastAt    time.Time // when the last message came
	marked    bool      // a node died, and no message came since
	gap       streamGap
	gapClosed bool
}

// streamStats counts what the stream delivered.
type streamStats struct {
	txs, rows         int64 // transactions with row changes, and the row changes
	firstSeq, lastSeq uint64
	problems          []string // seqs out of step
}

// streamGap is the stream's pause around a node's death.
type streamGap struct {
	pause               time.Duration // from the last message before to the first after
	beforeSeq, afterSeq uint64
}

func newDemoStream(con *console, asJSON bool) *demoStream {
	return &demoStream{con: con, json: asJSON, first: make(chan struct{})}
}

func (s *demoStream) handle(m client.Message) error {
	now := time.Now()
	s.mu.Lock()
	switch st := &s.st; {
	case m.Seq > st.lastSeq:
		if st.lastSeq != 0 && m.Seq != st.lastSeq+1 && len(st.problems) < 10 {
			st.problems = append(st.problems, fmt.Sprintf("seq %d came after %d", m.Seq, st.lastSeq))
		}
		if st.firstSeq == 0 {
			st.firstSeq = m.Seq
		}
		st.lastSeq = m.Seq
		if !m.IsDdl {
			st.txs++
		}
	case m.Seq < st.lastSeq && len(st.problems) < 10:
		st.problems = append(st.problems, fmt.Sprintf("seq %d came again after %d", m.Seq, st.lastSeq))
	}
	if !m.IsDdl {
		s.st.rows += int64(len(m.Data))
	}
	resumed := s.marked
	if resumed {
		s.marked = false
		s.gap.pause, s.gap.afterSeq, s.gapClosed = now.Sub(s.lastAt), m.Seq, true
	}
	gap := s.gap
	s.lastAt = now
	s.mu.Unlock()

	if resumed {
		s.con.sayf("*** the stream resumed after a %v pause: seq %d follows seq %d, %s",
			gap.pause.Round(10*time.Millisecond), gap.afterSeq, gap.beforeSeq, s.verdict())
	}

	if s.json {
		s.con.line(string(m.Raw))
	} else {
		for _, l := range formatMessage(m, now) {
			s.con.line(l)
		}
	}
	if !m.IsDdl {
		s.firstOnce.Do(func() { close(s.first) })
	}
	return nil
}

// mark notes a node's death: the pause of the stream is measured from the
// last message before it to the first after.
func (s *demoStream) mark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked, s.gapClosed = true, false
	s.gap = streamGap{beforeSeq: s.st.lastSeq}
}

// waitResumed waits for the first message after the mark.
func (s *demoStream) waitResumed(ctx context.Context) error {
	deadline := time.Now().Add(demoWait)
	for {
		s.mu.Lock()
		ok := s.gapClosed
		s.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the stream did not resume within %v", demoWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *demoStream) stats() streamStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.problems = append([]string(nil), st.problems...)
	return st
}

// verdict says whether the seqs so far came each once, none skipped.
func (s *demoStream) verdict() string {
	st := s.stats()
	if len(st.problems) == 0 {
		return "every seq once, none skipped"
	}
	return "SEQS OUT OF STEP: " + strings.Join(st.problems, "; ")
}

// demoColumns are the orders columns a stream line shows, in this order.
var demoColumns = []string{"id", "customer", "amount", "status"}

// formatMessage renders a message as one line per row change (or one for
// DDL), e.g.
//
//	12:00:01.234  seq 42    shop.orders  INSERT  id=7 customer=3 amount=12.50 status=new     (from shop_3 on source b)
func formatMessage(m client.Message, at time.Time) []string {
	head := fmt.Sprintf("%s  seq %-5d %s.%s  %-6s  ", at.Format("15:04:05.000"), m.Seq, m.Database, m.Table, m.Type)
	from := fmt.Sprintf("  (from %s on source %s)", m.OriginDatabase, m.Source)
	if m.IsDdl {
		return []string{head + fmt.Sprintf("%-44s", abbrevSQL(m.SQL, 44)) + from}
	}
	lines := make([]string, 0, len(m.Data))
	for i, row := range m.Data {
		var f []string
		for _, col := range demoColumns {
			v, ok := row[col]
			if !ok {
				continue
			}
			switch {
			case col == "id":
				f = append(f, col+"="+demoValue(v))
			case m.Type == "UPDATE":
				if i < len(m.Old) {
					if old, changed := m.Old[i][col]; changed {
						f = append(f, col+"="+demoValue(old)+"→"+demoValue(v))
					}
				}
			case m.Type == "DELETE":
				if col == "status" {
					f = append(f, col+"="+demoValue(v))
				}
			default:
				f = append(f, col+"="+demoValue(v))
			}
		}
		lines = append(lines, head+fmt.Sprintf("%-44s", strings.Join(f, " "))+from)
	}
	return lines
}

func demoValue(v *string) string {
	if v == nil {
		return "NULL"
	}
	return *v
}

// abbrevSQL folds a statement onto one line of at most n characters.
func abbrevSQL(sql string, n int) string {
	s := []rune(strings.Join(strings.Fields(sql), " "))
	if len(s) > n {
		return string(s[:n-1]) + "…"
	}
	return string(s)
}

// workload writes orders into the six schemas: new orders, payments and
// shipments of earlier ones, a cancellation now and then, and now and then
// one transaction with new orders in both schemas of a server (one seq in
// the stream, two lines). Each transaction is stamped with the real time
// (created_at NOW(3); the binlog's own time). run owns it; done and close
// are called after run returned.
type workload struct {
	shards []*mariadb.Server
	every  time.Duration
	con    *console
	rng    *rand.Rand
	conns  []*myclient.Conn
	nextID int64
	open   []openOrder // orders not shipped or cancelled yet, the oldest first
	txs    int64       // transactions committed
	rows   int64       // rows they changed
	warned time.Time   // when a failed write was last told
}

type openOrder struct {
	id     int64
	schema int
	status string
}

// maxOpen bounds the orders the workload remembers.
const maxOpen = 200

func newWorkload(shards []*mariadb.Server, rate float64, con *console) *workload {
	return &workload{shards: shards, every: time.Duration(float64(time.Second) / rate), con: con,
		rng: rand.New(rand.NewPCG(6, 7)), conns: make([]*myclient.Conn, len(shards))}
}

func (w *workload) run(ctx context.Context) {
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := w.step(); err != nil && ctx.Err() == nil && time.Since(w.warned) > 5*time.Second {
			w.warned = time.Now()
			w.con.sayf("!!! workload: %v (it goes on)", err)
		}
	}
}

// step commits one transaction.
func (w *workload) step() error {
	insert := func(schema int) (string, openOrder) {
		w.nextID++
		o := openOrder{id: w.nextID, schema: schema, status: "new"}
		return fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, %d, %d.%02d, 'new', NOW(3))",
			schema, o.id, 1+w.rng.IntN(50), 5+w.rng.IntN(300), w.rng.IntN(100)), o
	}
	r := w.rng.IntN(100)
	switch {
	case r < 10: // one customer's orders in both schemas of a server
		server := w.rng.IntN(len(w.shards))
		q1, o1 := insert(2 * server)
		q2, o2 := insert(2*server + 1)
		if err := w.exec(server, q1, q2); err != nil {
			return err
		}
		w.remember(o1, o2)
		w.rows += 2
	case r < 45 && len(w.open) > 0: // pay, ship or cancel an earlier order
		k := w.rng.IntN(len(w.open))
		o := w.open[k]
		next, q := "paid", ""
		switch {
		case o.status == "new" && r < 16:
			next, q = "", fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id = %d", o.schema, o.id)
		case o.status == "paid":
			next = "shipped"
		}
		if q == "" {
			q = fmt.Sprintf("UPDATE shop_%d.orders SET status = '%s' WHERE id = %d", o.schema, next, o.id)
		}
		if err := w.exec(o.schema/2, q); err != nil {
			return err
		}
		if next == "paid" {
			w.open[k].status = next
		} else {
			w.open = append(w.open[:k], w.open[k+1:]...)
		}
		w.rows++
	default:
		q, o := insert(w.rng.IntN(2 * len(w.shards)))
		if err := w.exec(o.schema/2, q); err != nil {
			return err
		}
		w.remember(o)
		w.rows++
	}
	w.txs++
	return nil
}

func (w *workload) remember(orders ...openOrder) {
	w.open = append(w.open, orders...)
	if len(w.open) > maxOpen {
		w.open = w.open[len(w.open)-maxOpen:]
	}
}

// exec runs the statements as one transaction on server i, connecting
// first if need be.
func (w *workload) exec(i int, stmts ...string) error {
	c := w.conns[i]
	if c == nil {
		var err error
		if c, err = myclient.Connect(w.shards[i].Addr(), "root", "", ""); err != nil {
			return fmt.Errorf("connecting to shard %s: %w", sourceName(i), err)
		}
		w.conns[i] = c
	}
	for _, q := range append(append([]string{"BEGIN"}, stmts...), "COMMIT") {
		r, err := c.Execute(q)
		if err != nil {
			_ = c.Close()
			w.conns[i] = nil
			return fmt.Errorf("shard %s: %s: %w", sourceName(i), abbrevSQL(q, 60), err)
		}
		r.Close()
	}
	return nil
}

// done is what run committed; call after run returned.
func (w *workload) done() (txs, rows int64) { return w.txs, w.rows }

// close ends the workload's sessions; call after run returned.
func (w *workload) close() {
	for _, c := range w.conns {
		if c != nil {
			if c.Quit() != nil {
				_ = c.Close()
			}
		}
	}
}
