package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/braid-cdc/braid/client"
)

// kafkaTopic is the kafka sink's topic: the default, {database}.{table}
// of the logical table.
const kafkaTopic = "shop.orders"

// KafkaBroker is how braid-chaos's "kfake" subcommand serves the run's
// broker.
type KafkaBroker struct {
	Listen    int    // the port it listens on, 127.0.0.1
	Advertise int    // the port it tells clients to use (the run's proxy in front of Listen)
	DataDir   string // where it keeps its topics, and reads them from again when it starts
}

// ServeKafka runs a kfake broker with the kafka sink's topic (three
// partitions) until SIGTERM or SIGINT: braid-chaos's "kfake" subcommand,
// so that the broker is a process of its own that the run can stop
// (SIGSTOP) and start again. It keeps its topics, transactions and
// producer ids in b.DataDir (kfake's persistence), so a broker started
// again after a SIGTERM (it saves its state, open transactions too)
// serves the same log. After a SIGKILL it recovers what it wrote, but a
// transaction open then is aborted with no abort marker written, and a
// read_committed consumer skips every later record of that producer in
// the partition: the run does not SIGKILL it. It listens on b.Listen and advertises b.Advertise, where the run's
// proxy forwards to it: every connection a client makes, after the
// metadata too, passes the proxy, which can cut them.
func ServeKafka(b KafkaBroker) error {
	listen := func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Listen)))
		if err != nil {
			return nil, err
		}
		return advertised{ln, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: b.Advertise}}, nil
	}
	c, err := kfake.NewCluster(kfake.Ports(b.Advertise), kfake.ListenFn(listen), kfake.NumBrokers(1),
		kfake.DataDir(b.DataDir), kfake.SeedTopics(3, kafkaTopic))
	if err != nil {
		return err
	}
	defer c.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

// KafkaCommand is braid-chaos's "kfake" subcommand, `kfake -port N
// -advertise M -data DIR` (ServeKafka), which the run starts as
// os.Executable: the chaos tests' TestMain serves it too. It returns the
// process's exit code.
func KafkaCommand(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("braid-chaos kfake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b KafkaBroker
	fs.IntVar(&b.Listen, "port", 0, "the port the broker listens on, on 127.0.0.1")
	fs.IntVar(&b.Advertise, "advertise", 0, "the port it tells clients to use (a proxy in front of -port); default: -port")
	fs.StringVar(&b.DataDir, "data", "", "where it keeps its topics and reads them from again (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if b.Advertise == 0 {
		b.Advertise = b.Listen
	}
	if b.Listen <= 0 || b.DataDir == "" {
		fmt.Fprintln(stderr, "braid-chaos kfake: want -port N and -data DIR")
		return 2
	}
	if err := ServeKafka(b); err != nil {
		fmt.Fprintf(stderr, "braid-chaos kfake: %v\n", err)
		return 1
	}
	return 0
}

// advertised is a listener that gives another address as its own: kfake
// tells clients its listener's address.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

// kafkaBroker is the run's kfake process, which faults stop, kill and
// start again on the same port and data directory.
type kafkaBroker struct {
	exe     string
	listen  string // 127.0.0.1:N, where it listens
	addr    string // the proxy in front of it: what it advertises and the sink dials
	dataDir string
	logPath string

	mu    sync.Mutex
	proc  *kafkaProc // the process now
	exits []string   // how processes exited that no fault ended
}

// kafkaProc is one process of the broker.
type kafkaProc struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed when it exited
	exitErr error         // how, once done is closed
	killed  bool          // a fault ended it: its exit is expected
}

// startKafka starts this program again as a kfake broker on a free port,
// behind the run's proxy "kafka", and waits until it listens.
func (d *deployment) startKafka(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	listen := l.Addr().String()
	l.Close()
	p, err := newProxy("kafka", listen)
	if err != nil {
		return err
	}
	d.proxies["kafka"] = p
	k := &kafkaBroker{exe: exe, listen: listen, addr: p.Addr(), dataDir: filepath.Join(d.dir, "kafka"),
		logPath: filepath.Join(d.dir, "kfake.log")}
	d.kafka = k
	return k.start(ctx)
}

// start starts the broker's process and waits until it listens.
func (k *kafkaBroker) start(ctx context.Context) error {
	f, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, lport, _ := net.SplitHostPort(k.listen)
	_, aport, _ := net.SplitHostPort(k.addr)
	cmd := exec.Command(k.exe, "kfake", "-port", lport, "-advertise", aport, "-data", k.dataDir)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &kafkaProc{cmd: cmd, done: make(chan struct{})}
	// Pdeathsig fires when the OS thread that started the child exits,
	// not the process, and Go ends idle threads: the goroutine that
	// starts the broker keeps its thread until the broker exits.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			p.exitErr = cmd.Wait()
		}
		f.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting the kfake broker: %w", err)
	}
	k.mu.Lock()
	k.proc = p
	k.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", k.listen, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("the kfake broker exited at start: %v (its log: %s)", p.exitErr, k.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kfake broker does not listen on %s after 30s (its log: %s)", k.listen, k.logPath)
		}
	}
}

func (k *kafkaBroker) current() *kafkaProc {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proc
}

// signal sends the broker's process sig.
func (k *kafkaBroker) signal(sig syscall.Signal) error {
	if p := k.current(); p != nil {
		return p.cmd.Process.Signal(sig)
	}
	return nil
}

// end ends the broker's process with sig (SIGTERM: kfake saves its state
// and exits; SIGKILL: a crash), SIGKILL after 20 s, and waits for it.
// It says whether it had to kill.
func (k *kafkaBroker) end(sig syscall.Signal) (killed bool) {
	p := k.current()
	if p == nil {
		return false
	}
	k.mu.Lock()
	select {
	case <-p.done:
		if !p.killed {
			k.exits = append(k.exits, fmt.Sprint(p.exitErr))
		}
	default:
	}
	p.killed = true
	k.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return false
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return true
	}
}

// exited is how the broker's processes exited that no fault ended.
func (k *kafkaBroker) exited() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := append([]string(nil), k.exits...)
	if p := k.proc; p != nil && !p.killed {
		select {
		case <-p.done:
			out = append(out, fmt.Sprint(p.exitErr))
		default:
		}
	}
	return out
}

// stop ends the broker.
func (k *kafkaBroker) stop() {
	if k == nil {
		return
	}
	k.end(syscall.SIGTERM)
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
