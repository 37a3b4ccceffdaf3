package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/internal/mysqltest"
	"github.com/braid-cdc/braid/internal/ports"
)

// The cluster tests run real `braid server` processes, built once per test
// run, and kill them.

var braidBinary struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildBraid builds the braid binary into a directory that lives as long
// as the test process.
func buildBraid(t *testing.T) string {
	t.Helper()
	braidBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "braid-bin-")
		if err != nil {
			braidBinary.err = err
			return
		}
		braidBinary.path = filepath.Join(dir, "braid")
		cmd := exec.Command("go", "build", "-o", braidBinary.path, ".")
		braidBinary.out, braidBinary.err = cmd.CombinedOutput()
	})
	if braidBinary.err != nil {
		t.Fatalf("go build: %v\n%s", braidBinary.err, braidBinary.out)
	}
	return braidBinary.path
}

// testNode is one braid server process.
type testNode struct {
	name                          string
	dir                           string
	raft, gossip, http, canalPort int
	args                          []string // extra flags
	log                           *os.File
	cmd                           *exec.Cmd
	exited                        chan struct{}
}

func (n *testNode) url() string { return fmt.Sprintf("http://127.0.0.1:%d", n.http) }

// start runs the node's process, its log going to a file.
func (n *testNode) start(t *testing.T, bin string, join []string) {
	t.Helper()
	args := []string{"server", "--name", n.name, "--data-dir", n.dir,
		"--raft-port", strconv.Itoa(n.raft), "--gossip-port", strconv.Itoa(n.gossip),
		"--http-port", strconv.Itoa(n.http), "--canal-port", strconv.Itoa(n.canalPort),
		"--join", strings.Join(join, ","), "--log-level", "debug"}
	args = append(args, n.args...)
	f, err := os.OpenFile(filepath.Join(filepath.Dir(n.dir), n.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "=== %s start %v\n", time.Now().Format(time.StampMilli), args)
	n.log = f
	n.cmd = exec.Command(bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = f, f
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func() { n.cmd.Wait(); close(n.exited) }()
}

// signal sends sig to the node's process.
func (n *testNode) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, n.name, err)
	}
}

// kill SIGKILLs the node and waits for it to be gone.
func (n *testNode) kill(t *testing.T) {
	t.Helper()
	n.signal(t, syscall.SIGKILL)
	<-n.exited
}

// logTail returns the last lines of the node's log above debug level,
// for failure messages.
func (n *testNode) logTail() string {
	b, _ := os.ReadFile(n.log.Name())
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "level=DEBUG") && !strings.Contains(l, "failed to heartbeat") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-60):], "\n")
}

// testCluster is three braid servers on loopback ports.
type testCluster struct {
	bin   string
	nodes []*testNode
}

// freePorts returns n free loopback ports (ports.FreeLoopback).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	p, err := ports.FreeLoopback(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startCluster starts three nodes that bootstrap a new cluster, and waits
// for it to have a leader and three live nodes.
func startCluster(t *testing.T) *testCluster {
	t.Helper()
	c := &testCluster{bin: buildBraid(t)}
	base := t.TempDir()
	ports := freePorts(t, 12)
	for i := range 3 {
		c.nodes = append(c.nodes, &testNode{name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			raft: ports[4*i], gossip: ports[4*i+1], http: ports[4*i+2], canalPort: ports[4*i+3],
			args: []string{"--bootstrap-expect", "3"}})
	}
	for _, n := range c.nodes {
		n.start(t, c.bin, c.joinFor(n))
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			select {
			case <-n.exited:
			default:
				n.cmd.Process.Signal(syscall.SIGCONT)
				n.cmd.Process.Kill()
				<-n.exited
			}
			n.log.Close()
			if t.Failed() {
				t.Logf("log of %s:\n%s", n.name, n.logTail())
				if dir := os.Getenv("BRAID_TEST_LOGS"); dir != "" {
					os.MkdirAll(dir, 0o755)
					b, _ := os.ReadFile(n.log.Name())
					os.WriteFile(filepath.Join(dir, t.Name()+"-"+n.name+".log"), b, 0o644)
				}
			}
		}
	})
	c.waitFor(t, 30*time.Second, "a leader and three live nodes", func() (bool, string) {
		st, err := c.status(c.nodes[0])
		if err != nil {
			return false, err.Error()
		}
		alive := 0
		for _, n := range st.Nodes {
			if n.State == "alive" && n.Raft != "" {
				alive++
			}
		}
		return st.Leader != "" && alive == 3, fmt.Sprintf("%+v", st)
	})
	return c
}

// joinFor is the gossip addresses of the other nodes.
func (c *testCluster) joinFor(n *testNode) []string {
	var join []string
	for _, o := range c.nodes {
		if o != n {
			join = append(join, fmt.Sprintf("127.0.0.1:%d", o.gossip))
		}
	}
	return join
}

// status asks node n for the cluster's status.
func (c *testCluster) status(n *testNode) (cluster.ClusterStatus, error) {
	var st cluster.ClusterStatus
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(n.url() + "/v1/cluster")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// waitFor polls cond until it holds; on timeout it fails with cond's last
// description.
func (c *testCluster) waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, still no %s: %s", timeout, what, desc)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// live returns the nodes whose process runs.
func (c *testCluster) live() []*testNode {
	var out []*testNode
	for _, n := range c.nodes {
		select {
		case <-n.exited:
		default:
			out = append(out, n)
		}
	}
	return out
}

// owner returns the node that owns dest as a live node sees it, once it
// has one that is running.
func (c *testCluster) owner(t *testing.T, dest string) (*testNode, uint64) {
	t.Helper()
	var owner *testNode
	var epoch uint64
	c.waitFor(t, 30*time.Second, "owner of "+dest, func() (bool, string) {
		st, err := c.status(c.live()[0])
		if err != nil {
			return false, err.Error()
		}
		for _, d := range st.Destinations {
			if d.Name != dest {
				continue
			}
			for _, n := range c.live() {
				if n.name == d.Owner {
					owner, epoch = n, d.Epoch
					return true, ""
				}
			}
			return false, fmt.Sprintf("owner %q, not a live node", d.Owner)
		}
		return false, fmt.Sprintf("no destination %s in %+v", dest, st.Destinations)
	})
	return owner, epoch
}

// cli runs a braid command in-process and returns its stdout, stderr and
// exit code.
func cli(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// shopShards starts three MariaDB servers holding shop_0 … shop_5, two
// schemas each, with an orders table.
func shopShards(t *testing.T) []*mysqltest.Server {
	t.Helper()
	srvs := mysqltest.StartN(t, 3)
	for i, s := range srvs {
		for _, db := range []int{2 * i, 2*i + 1} {
			s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", db),
				fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))", db))
		}
	}
	return srvs
}

func shopSpec(t *testing.T, srvs []*mysqltest.Server) string {
	t.Helper()
	return writeSpec(t, fmt.Sprintf(`
name: shop
sources:
  - {name: a, address: '%s', start: earliest}
  - {name: b, address: '%s', start: earliest}
  - {name: c, address: '%s', start: earliest}
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
heartbeat: 100ms
max_clock_skew: 200ms
`, srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()))
}

// TestClusterFormsAndServes: three nodes form a cluster; a destination
// created through one node is run by one of them and streamed through any
// (the others redirect to the owner); `braid cluster status` and
// `braid destination list/show` show it.
func TestClusterFormsAndServes(t *testing.T) {
	srvs := shopShards(t)
	c := startCluster(t)
	spec := shopSpec(t, srvs)
	if out, errs, code := cli("destination", "create", "-f", spec, "--server", c.nodes[1].url()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	owner, epoch := c.owner(t, "shop")
	if epoch == 0 {
		t.Fatal("assignment without an epoch")
	}
	// One client id reads through each node in turn: each goes on after
	// what the one before acked (the first also gets the six CREATE TABLEs).
	for i, n := range c.nodes {
		a, b := fmt.Sprintf("from a %d", i), fmt.Sprintf("from c %d", i)
		srvs[0].Exec(t, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 0, '%s')", 2*i, a))
		srvs[2].Exec(t, fmt.Sprintf("INSERT INTO shop_5.orders VALUES (%d, 5, '%s')", 2*i+1, b))
		want := 2
		if i == 0 {
			want = 8
		}
		out, errs, code := cli("tail", "shop", "--server", n.url(), "--client-id", "shared", "--max", strconv.Itoa(want), "--timeout", "30s")
		if code != 0 {
			t.Fatalf("tail through %s (owner %s): exit %d: %s", n.name, owner.name, code, errs)
		}
		if got := strings.Count(out, "\n"); got != want || !strings.Contains(out, a) || !strings.Contains(out, b) {
			t.Errorf("tail through %s: %d lines, want %d with %q and %q:\n%s\nstderr: %s", n.name, got, want, a, b, out, errs)
		}
	}
	out, errs, code := cli("cluster", "status", "--server", c.nodes[2].url())
	if code != 0 || !strings.Contains(out, "leader") || !strings.Contains(out, "shop") || strings.Count(out, "alive") != 3 {
		t.Errorf("cluster status: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = cli("destination", "list", "--server", c.nodes[0].url())
	if code != 0 || !strings.Contains(out, "shop") || !strings.Contains(out, owner.name) {
		t.Errorf("destination list: exit %d\n%s", code, out)
	}
	out, _, code = cli("destination", "show", "shop", "--server", c.nodes[0].url())
	if code != 0 || !strings.Contains(out, "shared") || !strings.Contains(out, "shop_\\d+") {
		t.Errorf("destination show: exit %d\n%s", code, out)
	}
}

// TestClusterBadInput: each mistake gets a clear error and disturbs
// nothing else.
func TestClusterBadInput(t *testing.T) {
	srvs := shopShards(t)
	c := startCluster(t)
	url := c.nodes[0].url()

	// A spec with an unreachable shard, and one with a bad regex.
	dead := freePorts(t, 1)[0]
	bad := writeSpec(t, fmt.Sprintf("name: broken\nsources:\n  - {name: a, address: '127.0.0.1:%d'}\n", dead))
	if _, errs, code := cli("destination", "create", "-f", bad, "--server", url); code == 0 || !strings.Contains(errs, "cannot connect") {
		t.Errorf("unreachable shard: exit %d: %s", code, errs)
	}
	badRe := writeSpec(t, fmt.Sprintf("name: broken\nsources:\n  - {name: a, address: '%s'}\ntables: ['shop_(']\n", srvs[0].Addr()))
	if _, errs, code := cli("destination", "create", "-f", badRe, "--server", url); code == 0 || !strings.Contains(errs, "regex") {
		t.Errorf("bad regex: exit %d: %s", code, errs)
	}

	// Deleting a destination that is being consumed needs --force.
	spec := shopSpec(t, srvs)
	if _, errs, code := cli("destination", "create", "-f", spec, "--server", url); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	if _, errs, code := cli("destination", "create", "-f", spec, "--server", url); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("second create: exit %d: %s", code, errs)
	}
	c.owner(t, "shop")
	srvs[1].Exec(t, "INSERT INTO shop_2.orders VALUES (1, 2, 'x')")
	if _, errs, code := cli("tail", "shop", "--server", url, "--client-id", "keeper", "--max", "7", "--timeout", "30s"); code != 0 {
		t.Fatalf("tail: %s", errs)
	}
	c.waitFor(t, 10*time.Second, "the consumer's cursor in raft", func() (bool, string) {
		_, errs, code := cli("destination", "delete", "shop", "--server", url)
		return code != 0 && strings.Contains(errs, "keeper"), errs
	})
	if _, errs, code := cli("destination", "delete", "shop", "--force", "--server", url); code != 0 {
		t.Errorf("delete --force: %s", errs)
	}
	if _, errs, code := cli("destination", "show", "shop", "--server", url); code == 0 || !strings.Contains(errs, "unknown destination") {
		t.Errorf("show after delete: exit %d: %s", code, errs)
	}

	// A node of another cluster, and a node reusing a name, are refused.
	ports := freePorts(t, 4)
	other := &testNode{name: "x1", dir: filepath.Join(t.TempDir(), "x1"), raft: ports[0], gossip: ports[1], http: ports[2], canalPort: ports[3],
		args: []string{"--cluster", "other"}}
	other.start(t, c.bin, []string{fmt.Sprintf("127.0.0.1:%d", c.nodes[0].gossip)})
	select {
	case <-other.exited:
	case <-time.After(20 * time.Second):
		other.cmd.Process.Kill()
		t.Fatal("a node of another cluster kept running after joining this one")
	}
	if log := other.logTail(); !strings.Contains(log, "belongs to cluster") {
		t.Errorf("node of another cluster: log does not say why:\n%s", log)
	}
	ports = freePorts(t, 4)
	twin := &testNode{name: "n1", dir: filepath.Join(t.TempDir(), "n1"), raft: ports[0], gossip: ports[1], http: ports[2], canalPort: ports[3]}
	twin.start(t, c.bin, []string{fmt.Sprintf("127.0.0.1:%d", c.nodes[1].gossip)})
	defer func() { twin.cmd.Process.Kill(); <-twin.exited }()
	c.waitFor(t, 20*time.Second, "a clear error about two nodes named n1", func() (bool, string) {
		logs := twin.logTail() + c.nodes[1].logTail() + c.nodes[0].logTail()
		return strings.Contains(logs, "own --name"), ""
	})
	// The cluster still has its three nodes and a leader.
	st, err := c.status(c.nodes[2])
	if err != nil || st.Leader == "" || len(st.Nodes) != 3 {
		t.Errorf("cluster after the bad joins: %+v %v", st, err)
	}
}
