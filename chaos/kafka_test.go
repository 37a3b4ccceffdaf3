package chaos

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMain serves the "kfake" subcommand as braid-chaos does: the run
// starts the broker as os.Executable, the test binary here.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "kfake" {
		os.Exit(KafkaCommand(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// TestKafkaBrokerRestartKeepsItsLog: the run's broker, stopped (SIGTERM)
// and started again as the restart-target fault does, serves the records
// committed before, aborts the transaction open across the restart when
// its transactional id comes back (as the Kafka sink's does), and takes
// new transactions; one SIGKILLed with no transaction open keeps what
// was committed too; every connection passes the run's proxy (the broker
// advertises it), which cut-target kafka cuts.
func TestKafkaBrokerRestartKeepsItsLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := &deployment{dir: t.TempDir(), proxies: map[string]*proxy{}}
	if err := d.startKafka(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.kafka.stop()
	pctx, stopProxy := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.proxies["kafka"].run(pctx) }()
	defer func() { stopProxy(); <-done }()

	// publish produces values in one transaction, committed or left open.
	publish := func(values []string, commit bool) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka.addr), kgo.TransactionalID("chaos-test"),
			kgo.DefaultProduceTopic(kafkaTopic), kgo.RecordRetries(3))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("producing %s: %v", v, err)
			}
		}
		if commit {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func() []string {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka.addr), kgo.ConsumeTopics(kafkaTopic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var out []string
		for quiet := 0; quiet < 2; {
			fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cl.PollFetches(fctx)
			cancel()
			n := 0
			fs.EachRecord(func(r *kgo.Record) { n++; out = append(out, string(r.Value)) })
			if n == 0 {
				quiet++
			}
		}
		slices.Sort(out)
		return out
	}

	publish([]string{"a", "b", "c", "d"}, true)
	publish([]string{"open1", "open2", "open3"}, false) // open across the restart
	d.kafka.end(syscall.SIGTERM)
	if err := d.kafka.start(ctx); err != nil {
		t.Fatal(err)
	}
	publish([]string{"e", "f", "g"}, true)
	if got, want := read(), []string{"a", "b", "c", "d", "e", "f", "g"}; !slices.Equal(got, want) {
		t.Fatalf("after a SIGTERM and a start: read %v, want %v", got, want)
	}
	d.kafka.end(syscall.SIGKILL)
	if err := d.kafka.start(ctx); err != nil {
		t.Fatal(err)
	}
	publish([]string{"h"}, true)
	if got, want := read(), []string{"a", "b", "c", "d", "e", "f", "g", "h"}; !slices.Equal(got, want) {
		t.Fatalf("after a SIGKILL and a start: read %v, want %v", got, want)
	}
	if ex := d.kafka.exited(); len(ex) > 0 {
		t.Errorf("the faults' exits counted as unexpected: %v", ex)
	}

	// Cut: the broker's address is the proxy's, so no client reaches it.
	d.proxies["kafka"].setCut(true)
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka.addr), kgo.DefaultProduceTopic(kafkaTopic))
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	err = cl.ProduceSync(cctx, &kgo.Record{Value: []byte("cut")}).FirstErr()
	ccancel()
	cl.Close()
	if err == nil {
		t.Fatal("a record produced through the cut proxy")
	}
	d.proxies["kafka"].setCut(false)
}
