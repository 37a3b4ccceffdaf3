package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestCaptureBeforeLossLine: braid capture's printer cursor lies before
// transactions lost in a failover whose loss was accepted and whose
// LOST marker went out. The capture exits with one line naming the loss
// and capture's fix alone (remove its cursor file); the old line also
// told to drop it with braid consumer drop and subscribe it again,
// which does not apply to capture.
func TestCaptureBeforeLossLine(t *testing.T) {
	f := shoptest.StartFailover(t)
	tp, primary, replica, vip := f.Topology, f.Primary, f.Replica, f.VIP
	text := f.SpecYAML("")
	ds, err := spec.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cursors := t.TempDir()
	keep := group.NewFileKeeper(cursors, "shop")
	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Serve: true, Keep: keep,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The printer's client reads the CREATE TABLE, 1 and 2.
	p.Store.Subscribe(printerID)
	retry.Until(t, time.Minute, func() error {
		b, err := p.Store.Get(context.Background(), printerID, 256, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if b.ID >= 0 {
			if err := p.Store.Ack(printerID, b.ID); err != nil {
				t.Fatal(err)
			}
		}
		if m := p.Store.Mark(printerID); m == nil || m.Seq < 3 {
			return errors.New("the printer has not read 2 yet")
		}
		return nil
	})
	tp.StopReplication(t, replica)
	primary.Exec(t, "INSERT INTO shop.orders VALUES (3)")
	end := primary.GTIDBinlogPos(t)
	retry.Until(t, time.Minute, func() error { // 3 went out: the replica lacks it
		if got := p.Dest.Stats().Sources[0].GTIDs; got != end {
			return fmt.Errorf("the merge's source at %s, want %s", got, end)
		}
		return nil
	})
	shoptest.Lose(t, tp, replica, vip, func() bool { return p.Dest.Stats().Sources[0].Lost != "" })
	l, err := p.Dest.AcceptLost(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	var marker uint64
	retry.Until(t, time.Minute, func() error {
		if acc := p.Dest.Stats().Sources[0].Accepted; len(acc) == 1 && acc[0].MarkerSeq != 0 {
			marker = acc[0].MarkerSeq
			return nil
		}
		return errors.New("the LOST marker has not gone out yet")
	})
	if err := keep.SaveCursor(printerID, p.Store.Mark(printerID)); err != nil {
		t.Fatal(err)
	}
	p.Close()

	var out lineSink
	var errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"capture", "-f", nodes.WriteSpec(t, text), "--cursor-dir", cursors, "--timeout", "60s"}, &out, &errb)
	}()
	var exit int
	select {
	case exit = <-code:
	case <-time.After(90 * time.Second):
		t.Fatal("capture did not stop")
	}
	var line string
	for l := range strings.Lines(errb.String()) {
		if strings.HasPrefix(l, "braid capture: ") { // the exit line
			line = l
		}
	}
	if exit != 1 || !strings.Contains(line, l.Lost) || !strings.Contains(line, fmt.Sprintf("marker at seq %d", marker)) ||
		!strings.Contains(line, "remove its cursor file") || strings.Contains(line, "consumer drop") || strings.Count(line, "Fix:") != 1 {
		t.Fatalf("exit %d; want 1 with one line naming %s, the marker at seq %d and capture's fix alone (remove its cursor file); stderr:\n%s",
			exit, l.Lost, marker, errb.String()+"\nstdout:\n"+out.String())
	}
	t.Logf("capture said: %s", line)
}
