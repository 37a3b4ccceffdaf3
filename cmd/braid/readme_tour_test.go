package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// tour runs the README's tour for real: each spec block is written to
// NAME.yaml (its name: key) in a directory of its own, with one real
// MariaDB server per source in place of the addresses it shows, the user
// it names created with the privileges the README says it needs, a
// password in the environment variable its password_env names, and shard
// tables its tables: select holding rows. Then the tour's lines run there
// as written, but for the ports: a --http-port or --canal-port gets a free
// one, and a URL naming that port is rewritten to it.
type tour struct {
	t     *testing.T
	bin   string
	dir   string
	env   []string
	specs map[string]bool // the spec files written, as the README names them
	ports map[string]string
	// failed is the serving line that did not come up, if one did not: the
	// lines after it that read from it are not run, rather than wait.
	failed string
}

// tourGrants are the privileges the README's spec comment says a source's
// user needs: the tour grants these and no more, so that the claim is
// tested.
const tourGrants = "REPLICATION SLAVE, REPLICATION CLIENT, SELECT"

// tourRows is the row count the tour writes into each shard table, each
// in a transaction of its own: more than any --max the README shows.
const tourRows = 20

func newTour(t *testing.T, bin string) *tour {
	return &tour{t: t, bin: bin, dir: t.TempDir(), env: os.Environ(), specs: map[string]bool{}, ports: map[string]string{}}
}

// addSpec starts the servers for a README spec block and writes it.
func (tr *tour) addSpec(f fence) error {
	text := strings.Join(f.body, "\n") + "\n"
	ds, err := spec.Parse([]byte(text))
	if err != nil {
		return err
	}
	filter, err := spec.CompileTableFilter(ds.Tables)
	if err != nil {
		return err
	}
	srvs := mysqltest.StartN(tr.t, len(ds.Sources))
	for i, src := range ds.Sources {
		srv := srvs[i]
		if !strings.Contains(text, src.Address) {
			return fmt.Errorf("source %s: address %s not found as written", src.Name, src.Address)
		}
		text = strings.ReplaceAll(text, src.Address, srv.Addr())
		if src.User != "" && src.User != "root" {
			password := fmt.Sprintf("tour-%s-%d", src.Name, i)
			srv.Exec(tr.t, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", src.User, password),
				fmt.Sprintf("GRANT %s ON *.* TO '%s'@'%%'", tourGrants, src.User))
			if src.PasswordEnv == "" {
				return fmt.Errorf("source %s: the tour sets passwords through password_env only", src.Name)
			}
			tr.env = append(tr.env, src.PasswordEnv+"="+password)
		}
		// A shard table per source that the spec's tables: selects: the
		// README's shop_N.orders on source N.
		schema := fmt.Sprintf("shop_%d", i)
		if !filter.Match(schema, "orders") {
			return fmt.Errorf("the tour writes %s.orders, which the spec's tables do not select", schema)
		}
		stmts := []string{"CREATE DATABASE " + schema, "CREATE TABLE " + schema + ".orders (id INT PRIMARY KEY, note VARCHAR(20))"}
		for r := range tourRows {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.orders VALUES (%d, 'from %s')", schema, r*len(ds.Sources)+i, src.Name))
		}
		srv.Exec(tr.t, stmts...)
	}
	name := ds.Name + ".yaml"
	if err := os.WriteFile(filepath.Join(tr.dir, name), []byte(text), 0o600); err != nil {
		return err
	}
	tr.specs[name] = true
	return nil
}

// runs says whether the tour runs a braid line for real: one that reads a
// spec the tour wrote, or a tail.
func (tr *tour) runs(args []string) bool {
	if len(args) > 0 && args[0] == "tail" {
		return true
	}
	for i, a := range args {
		if (a == "-f" || a == "--f") && i+1 < len(args) && tr.specs[args[i+1]] {
			return true
		}
	}
	return false
}

// rewrite gives a line's --http-port and --canal-port free ports, and URLs
// naming those ports the same ones.
func (tr *tour) rewrite(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if (a == "--http-port" || a == "--canal-port") && i+1 < len(out) {
			p := out[i+1]
			if tr.ports[p] == "" {
				free := nodes.FreePorts(tr.t, 1)
				tr.ports[p] = strconv.Itoa(free[0])
			}
			out[i+1] = tr.ports[p]
		}
	}
	for i := range out {
		for from, to := range tr.ports {
			out[i] = strings.ReplaceAll(out[i], "127.0.0.1:"+from, "127.0.0.1:"+to)
		}
	}
	return out
}

// runToEnd runs a line that ends by itself after want lines, and checks
// that it printed them, each of the logical table the tour's route makes,
// returning their seqs.
func (tr *tour) runToEnd(args []string, want int) ([]uint64, error) {
	ctx, cancel := context.WithTimeout(tr.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tr.bin, args...)
	cmd.Dir, cmd.Env, cmd.WaitDelay = tr.dir, tr.env, 5*time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v:\n%s", err, lastLines(errb.String(), 10))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != want {
		return nil, fmt.Errorf("printed %d lines, want %d", len(lines), want)
	}
	seqs := make([]uint64, len(lines))
	for i, l := range lines {
		var m struct {
			Seq             uint64
			Database, Table string
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			return nil, fmt.Errorf("line %d is not JSON: %v", i+1, err)
		}
		if m.Database != "shop" || m.Table != "orders" {
			return nil, fmt.Errorf("line %d is of %s.%s, not the logical shop.orders the tour routes to: %s", i+1, m.Database, m.Table, l)
		}
		seqs[i] = m.Seq
	}
	return seqs, nil
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if strings.TrimLeft(a, "-") == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// run runs a tour line: one with --max to its end, checking it printed
// that many lines of the logical table; one that serves (a port and no
// --max) in the background until the test ends, once its HTTP port
// answers. A line that would run forever here is an error: the README
// must show how it ends.
func (tr *tour) run(args []string) error {
	args = tr.rewrite(args)
	line := "braid " + strings.Join(args, " ")
	want, _ := strconv.Atoi(flagValue(args, "max"))
	serves := flagValue(args, "http-port") != "" || flagValue(args, "canal-port") != ""
	switch {
	case want > 0 && args[0] == "tail" && tr.failed != "":
		return fmt.Errorf("%s: not run: the serving line before it failed (%s)", line, tr.failed)
	case want > 0:
		seqs, err := tr.runToEnd(args, want)
		if err != nil {
			return fmt.Errorf("%s: %w", line, err)
		}
		tr.t.Logf("ran %s: %d lines of shop.orders", line, want)
		if flagValue(args, "cursor-dir") == "" {
			return nil
		}
		// The README says a run with a cursor goes on after the last: run
		// it again and see.
		again, err := tr.runToEnd(args, want)
		if err != nil {
			return fmt.Errorf("%s, run again: %w", line, err)
		}
		if again[0] <= seqs[len(seqs)-1] {
			return fmt.Errorf("%s, run again, started at seq %d, not after the first run's last, %d", line, again[0], seqs[len(seqs)-1])
		}
		tr.t.Logf("ran it again: seq %d to %d after %d to %d", again[0], again[len(again)-1], seqs[0], seqs[len(seqs)-1])
		return nil
	case serves:
		tr.failed = line
		cmd := exec.Command(tr.bin, args...)
		cmd.Dir, cmd.Env, cmd.WaitDelay = tr.dir, tr.env, 5*time.Second
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &errb, &errb
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %w", line, err)
		}
		// exited closes when the process has ended, with waitErr set; both
		// the wait for its port and the cleanup read it.
		exited := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()
		tr.t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
		addr := "127.0.0.1:" + flagValue(args, "http-port")
		if flagValue(args, "http-port") == "" {
			addr = "127.0.0.1:" + flagValue(args, "canal-port")
		}
		var gone error // set when the process exits before it listens
		if err := retry.Wait(context.Background(), time.Minute, func() error {
			select {
			case <-exited:
				gone = fmt.Errorf("%s exited: %v:\n%s", line, waitErr, lastLines(errb.String(), 10))
				return nil
			default:
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return err
			}
			c.Close()
			return nil
		}); err != nil {
			return fmt.Errorf("%s: nothing listens on %s: %w:\n%s", line, addr, err, lastLines(errb.String(), 10))
		}
		if gone != nil {
			return gone
		}
		tr.t.Logf("ran %s: serving on %s", line, addr)
		tr.failed = ""
		return nil
	}
	return fmt.Errorf("%s would run until stopped: give it --max N, or a port it serves on, so that the doc test can run it", line)
}
