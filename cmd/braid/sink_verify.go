package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/sink/verify"
	"github.com/braid-cdc/braid/spec"
)

// errNotHere: a sink whose target braid sink verify -f cannot compare.
var errNotHere = errors.New("cannot be compared here")

// verifyHere is braid sink verify -f: sink sinkName of ds (whose name
// must be dest) compared with ds's sources where both stand, with no
// server: it opens the sources and the sink's target itself, as the node
// that runs the sink would, and compares sample rows each way once.
func verifyHere(ctx context.Context, ds *spec.Spec, dest, sinkName string, sample int, tables []string, log *slog.Logger) (wire.SinkVerify, error) {
	if ds.Name != dest {
		return wire.SinkVerify{}, fmt.Errorf("the spec is destination %s's, not %s's", ds.Name, dest)
	}
	var sk *spec.Sink
	var names []string
	for i := range ds.Sinks {
		names = append(names, ds.Sinks[i].Name)
		if ds.Sinks[i].Name == sinkName {
			sk = &ds.Sinks[i]
		}
	}
	if sk == nil {
		return wire.SinkVerify{}, fmt.Errorf("destination %s has no sink %s: its spec has %v", ds.Name, sinkName, names)
	}
	o, err := sinkrun.Open(ctx, *sk, ds.Name, log)
	if err != nil {
		return wire.SinkVerify{}, err
	}
	defer o.Close()
	vt, ok := sinkrun.VerifyTarget(o)
	if !ok {
		return wire.SinkVerify{}, fmt.Errorf("sink %s: a %s sink %w: its consumers compare the messages it published", sk.Name, sk.Type, errNotHere)
	}
	return verify.Run(ctx, verify.Config{Spec: ds, Sink: *sk, Target: vt, Sample: sample, Tables: tables, Logger: log})
}
