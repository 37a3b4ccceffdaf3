package rabbitmq_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// runner runs a sink over a pipeline until stopped.
type runner struct {
	r    *sink.Runner
	stop func()
}

// startRunner runs ds's sink, open as s (sinkrun.Open), over p's store
// as braid runs it.
func startRunner(ctx context.Context, p *stream.Pipeline, s sink.Sink, ds *spec.Spec, cursors group.CursorStore, log *slog.Logger) *runner {
	r := sinkrun.NewRunner(ds, ds.Sinks[0], s, p.Store, cursors, log)
	return &runner{r: r, stop: sinkrun.Go(ctx, r)}
}

func testLogger(t *testing.T, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// shopSpec is shard tables shop_N.orders on servers shards[N%len] merged
// to shop.orders, with sink sk.
func shopSpec(t *testing.T, shards []*mysqltest.Server, sk spec.Sink) *spec.Spec {
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond), Sinks: []spec.Sink{sk}}
	for i, s := range shards {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	return &ds
}
