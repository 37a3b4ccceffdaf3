package rabbitmq_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/braid-cdc/braid/group"
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
