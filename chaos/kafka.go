package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/braid-cdc/braid/client"
)

// kafkaTopic is the kafka sink's topic: the default, {database}.{table}
// of the logical table.
const kafkaTopic = "shop.orders"

// ServeKafka runs a kfake broker on 127.0.0.1:port, with the kafka sink's
// topic (three partitions), until SIGTERM or SIGINT: braid-chaos's
// "kfake" subcommand, so that the broker is a process of its own that the
// run can stop (SIGSTOP) as it stops a node.
func ServeKafka(port int) error {
	c, err := kfake.NewCluster(kfake.Ports(port), kfake.NumBrokers(1), kfake.SeedTopics(3, kafkaTopic))
	if err != nil {
		return err
	}
	defer c.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

// kafkaBroker is the run's kfake process.
type kafkaBroker struct {
	addr    string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the broker exited
	exitErr error         // how, once done is closed
}

// startKafka starts this program again as a kfake broker on a free port
// and waits until it listens.
func (d *deployment) startKafka(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	f, err := os.Create(filepath.Join(d.dir, "kfake.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "kfake", "-port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	k := &kafkaBroker{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
	// Pdeathsig fires when the OS thread that started the child exits,
	// not the process, and Go ends idle threads: the goroutine that
	// starts the broker keeps its thread until the broker exits.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err != nil {
			f.Close()
			close(k.done)
			return
		}
		k.exitErr = cmd.Wait()
		f.Close()
		close(k.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting the kfake broker: %w", err)
	}
	d.kafka = k
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", k.addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-k.done:
			return fmt.Errorf("the kfake broker exited at start (its log: %s)", f.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kfake broker does not listen on %s after 30s", k.addr)
		}
	}
}

// stop ends the broker.
func (k *kafkaBroker) stop() {
	if k == nil {
		return
	}
	_ = k.cmd.Process.Signal(syscall.SIGCONT)
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(5 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.done
	}
}

// kafkaRows reads the topic from its start, as a read_committed consumer
// (the sink's transactions aborted, a fenced owner's or a retry's, are
// not the stream), and counts each row change the sink published (DDL
// and snapshot records left out).
func (d *deployment) kafkaRows(ctx context.Context) (map[string]int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka.addr), kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[string]int{}
	for quiet := 0; quiet < 3; {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			var m client.Message
			if json.Unmarshal(r.Value, &m) != nil || m.IsDdl || m.Snapshot {
				return
			}
			k := kindOf(m.Type)
			for _, row := range m.Data {
				out[rowOf(k, deref(row["id"]), deref(row["v"]))]++
			}
		})
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return out, nil
}
