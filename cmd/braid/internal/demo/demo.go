package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/mariadb"
)

// Install is the one line a user without MariaDB reads.
const Install = "braid demo needs MariaDB (mariadbd and mariadb-install-db): install it with " +
	"`sudo apt-get install mariadb-server` (Debian/Ubuntu) or `brew install mariadb` (macOS); " +
	"the demo starts servers of its own, the system service need not run"

const (
	demoDest      = "shop"
	demoClientID  = "demo"
	demoNodeGrace = 5 * time.Second  // SIGTERM to SIGKILL for a node at exit
	demoWait      = 60 * time.Second // the most any one step of the demo waits
)

// Options are braid demo's flags.
type Options struct {
	Duration  time.Duration // stream this long, then stop (0: until Ctrl-C)
	Rate      float64       // workload transactions a second, all shards together
	KillAfter time.Duration // kill the owner this long into the stream (0: never)
	Dir       string        // keep the files here ("": a temp dir, removed at exit)
	JSON      bool          // print the stream's flat-message JSON lines
	LogLevel  string        // the nodes' and the consumer's log level
	// Binary is the braid binary the nodes run ("": this process's own
	// executable; a test gives one braidproc built).
	Binary string
}

// Validate reports every problem at once, each naming its flag.
func (o Options) Validate() error {
	var errs []error
	if o.Duration < 0 {
		errs = append(errs, fmt.Errorf("--duration %v: want 0 (until Ctrl-C) or more", o.Duration))
	}
	if !(o.Rate > 0 && o.Rate <= 1000) {
		errs = append(errs, fmt.Errorf("--rate %v: want more than 0 and at most 1000 transactions a second", o.Rate))
	}
	if o.KillAfter < 0 {
		errs = append(errs, fmt.Errorf("--kill-after %v: want 0 (never) or more", o.KillAfter))
	}
	if o.Duration > 0 && o.KillAfter > 0 && o.KillAfter >= o.Duration {
		errs = append(errs, fmt.Errorf("--kill-after %v: want less than --duration %v, to see the takeover", o.KillAfter, o.Duration))
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(o.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.LogLevel))
	}
	if o.Dir != "" {
		if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 {
			errs = append(errs, fmt.Errorf("--dir %s is not empty: give a new or empty directory (the demo starts from scratch)", o.Dir))
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("--dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ErrNoServer: no MariaDB server binaries on this machine (Install says
// how to get them).
var ErrNoServer = mariadb.ErrNoServer

// Run runs the demo until ctx ends, or o.Duration passes, then stops
// whatever it started. The error is a step that failed (ErrNoServer
// without MariaDB); logs is then the directory where the nodes' and the
// shards' logs were kept for it ("" when nothing was started). A demo
// stopped by ctx is no error.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (logs string, err error) {
	d, err := newDemo(o, stdout, stderr)
	if err != nil {
		return "", err
	}
	err = d.run(ctx)
	failed := err != nil && ctx.Err() == nil && !errors.Is(err, mariadb.ErrNoServer)
	if failed && d.cluster != nil {
		d.keep = true // for the logs
	}
	d.close()
	switch {
	case errors.Is(err, mariadb.ErrNoServer):
		return "", err
	case !failed:
		return "", nil
	case d.keep:
		return d.dir, err
	}
	return "", err
}

// demo is one run of braid demo. Its methods run on the goroutine of
// runDemo, but for the stream's and the workload's own goroutines, which
// run() starts and close() stops.
type demo struct {
	opts    Options
	con     *console
	bin     string // the braid binary the nodes run
	braid   string // how the user runs braid, for the commands the demo suggests
	dir     string // everything the demo writes
	keep    bool   // dir is kept at exit: it is the user's (--dir), or a failed run's logs
	shards  []*mariadb.Server
	cluster *localcluster.Cluster // the braid nodes, once startNodes made them
	deaths  chan nodeExit         // node processes that exited

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
	killed   *localcluster.Node // the node --kill-after killed, until its takeover is told
	killDone bool               // --kill-after has fired
	failure  error              // what went wrong while streaming; the demo goes on and exits 1
}

// nodeExit is a node process that exited.
type nodeExit struct {
	node *localcluster.Node
	err  error // how it exited
}

func newDemo(o Options, stdout, stderr io.Writer) (*demo, error) {
	d := &demo{opts: o, con: &console{say: stdout, stream: stdout}, deaths: make(chan nodeExit, 16)}
	if o.JSON {
		d.con.say = stderr
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding braid's own binary to run the nodes: %w", err)
	}
	d.bin, d.braid = exe, exe
	if o.Binary != "" {
		d.bin, d.braid = o.Binary, o.Binary
	}
	if p, err := exec.LookPath("braid"); err == nil && sameFile(p, d.bin) {
		d.braid = "braid"
	} else if strings.Contains(d.bin, "go-build") {
		d.braid = "go run ./cmd/braid" // a binary of go run, gone when it exits
	}
	if o.Dir != "" {
		d.keep = true
		if d.dir, err = filepath.Abs(o.Dir); err == nil {
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
	c.sayf("shop runs on %s. Writing about %g transactions a second into shop_0 … shop_5; the merged stream, as client id %q:", d.owner, d.opts.Rate, demoClientID)
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
		live := d.cluster.Live()
		if len(live) == 0 {
			return false, nil // deadDuringSetup tells
		}
		n := live[i%len(live)]
		i++
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second) // the node checks every source first
		defer cancel()
		_, err := d.cluster.Client(n).CreateDestination(cctx, []byte(spec))
		var se *client.Error
		switch {
		case err == nil:
			return true, nil
		case !errors.As(err, &se), se.Status == http.StatusServiceUnavailable:
			return false, d.deadDuringSetup() // the cluster settles: try again, through the next node
		case se.Status == http.StatusConflict:
			return true, nil // an earlier try that timed out here created it
		}
		return false, fmt.Errorf("creating destination shop through %s: %s", n.Name, se.Message)
	})
	if err != nil {
		return err
	}
	d.con.sayf("registered destination shop (POST /v1/destinations; the spec: %s): sources a, b, c; tables shop_N.orders → shop.orders", d.rel(path))
	return nil
}

// startStreaming starts the workload and the consumer.
func (d *demo) startStreaming(ctx context.Context) error {
	var err error
	if d.consumerLog, err = os.Create(filepath.Join(d.dir, "consumer.log")); err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(d.opts.LogLevel))
	app := d.cluster.Security.Consumer
	cl, err := client.New(d.cluster.URLs(), client.WithToken(app.User, app.Password),
		client.WithBackoff(100*time.Millisecond, time.Second), client.WithJSONLines(),
		client.WithLogger(slog.New(slog.NewTextHandler(d.consumerLog, &slog.HandlerOptions{Level: level}))))
	if err != nil {
		return err
	}
	d.work = newWorkload(d.shards, d.opts.Rate, d.con)
	wctx, stopWork := context.WithCancel(ctx)
	d.stopWork, d.workDone = stopWork, make(chan struct{})
	go func() {
		defer close(d.workDone)
		d.work.run(wctx)
	}()
	d.stream = newDemoStream(d.con, d.opts.JSON)
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
	if d.cluster != nil {
		for _, n := range d.cluster.Stop(demoNodeGrace) {
			d.con.sayf("node %s did not stop within %v of SIGTERM: killed", n.Name, demoNodeGrace)
		}
	}
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
