package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/nodes"
)

// tailProc is a `braid tail` process, recording the messages it prints.
type tailProc struct {
	arrivals
	cmd  *exec.Cmd
	done chan struct{} // its stdout ended
}

// startTail runs `braid tail` with args as the cluster's consumer user.
func startTail(t *testing.T, c *nodes.Cluster, args ...string) *tailProc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "tail.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.Bin, append([]string{"tail"}, args...)...)
	cmd.Env = append(os.Environ(), "BRAID_TOKEN"+"="+c.Security.Consumer.Token())
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tp := &tailProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(tp.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var m struct {
				Seq            uint64              `json:"seq"`
				Source         string              `json:"source"`
				OriginDatabase string              `json:"originDatabase"`
				Es             int64               `json:"es"`
				Type           string              `json:"type"`
				Data           []map[string]string `json:"data"`
			}
			r := received{arrived: time.Now()}
			if err := json.Unmarshal(sc.Bytes(), &m); err == nil {
				r.seq, r.source, r.db, r.es = m.Seq, m.Source, m.OriginDatabase, m.Es
				if m.Type == "INSERT" {
					for _, row := range m.Data {
						id, _ := strconv.ParseInt(row["id"], 10, 64)
						r.ids = append(r.ids, id)
					}
				}
			}
			tp.add(r)
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-tp.done
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("braid tail's log:\n%s", b)
		}
	})
	return tp
}

// TestTailOneURLSurvivesItsNode: `braid tail --server` given one node's
// URL, the destination's owner's, learns the other nodes from it; when
// that node is SIGKILLed under a steady write load, tail resumes from
// another node (the new owner has no cursor of the ephemeral tail: it asks
// for the seq after the last one it printed whole) and misses nothing:
// every row committed once, seqs dense. The gap is logged.
func TestTailOneURLSurvivesItsNode(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	owner, epoch := c.OwnerOf(t, "shop")
	tp := startTail(t, c, "shop", "--server", owner.URL(), "--log-level", "debug")
	c.WaitFor(t, 30*time.Second, "the ephemeral tail streaming from "+owner.Name, func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		st, err := c.State(ctx, owner.Node, "shop")
		if err != nil {
			return false, err.Error()
		}
		for _, cl := range st.Clients {
			if strings.HasPrefix(cl.ID, "tail-") && cl.Streaming {
				return true, ""
			}
		}
		return false, fmt.Sprintf("clients %+v", st.Clients)
	})
	var writers []*writer
	for i, s := range srvs {
		writers = append(writers, startWriter(t, s, i, 20*time.Millisecond))
	}
	c.WaitFor(t, 30*time.Second, "rows at tail", func() (bool, string) {
		return time.Since(tp.lastArrival()) < time.Second, ""
	})
	time.Sleep(time.Second)

	killedAt := time.Now()
	owner.Kill()
	c.WaitFor(t, 30*time.Second, "rows at tail after its node "+owner.Name+" was killed", func() (bool, string) {
		return tp.lastArrival().After(killedAt), ""
	})
	time.Sleep(time.Second)
	// The gap is the longest silence between two lines around the kill
	// (lines printed before it may still be read after it).
	var gap time.Duration
	var prev time.Time
	for _, m := range tp.snapshot() {
		if !prev.IsZero() && m.arrived.After(killedAt.Add(-time.Second)) {
			gap = max(gap, m.arrived.Sub(prev))
		}
		prev = m.arrived
	}
	next, nextEpoch := c.OwnerOf(t, "shop")
	t.Logf("owner %s (epoch %d) killed; %s took over (epoch %d); gap at tail %v",
		owner.Name, epoch, next.Name, nextEpoch, gap.Round(time.Millisecond))

	var committed []int64
	for _, w := range writers {
		committed = append(committed, w.halt(t)...)
	}
	c.WaitFor(t, 60*time.Second, "every committed row at tail", func() (bool, string) {
		var ids []int64
		for _, m := range tp.snapshot() {
			ids = append(ids, m.ids...)
		}
		return allArrived(ids, committed)
	})
	checkStream(t, tp.snapshot(), committed)
	select {
	case <-tp.done:
		t.Error("tail exited")
	default:
	}
}
