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
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// runner runs a sink over a pipeline until stopped.
type runner struct {
	r    *sink.Runner
	stop func()
}

func startRunner(ctx context.Context, p *stream.Pipeline, pub sink.Publisher, s spec.Sink, cursors group.CursorStore, log *slog.Logger) *runner {
	r := &sink.Runner{Name: s.Name, Dest: "shop", Client: sink.ClientID(s.Name), Store: p.Store, Publisher: pub, Workers: 1,
		Cursors: cursors, Logger: log}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(rctx) }()
	return &runner{r: r, stop: func() { cancel(); <-done }}
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
