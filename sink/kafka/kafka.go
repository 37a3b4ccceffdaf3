// Package kafka is the kafka sink's publisher (issue 22). Being written.
package kafka

import (
	"context"
	"errors"

	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Open connects to sink s's brokers.
func Open(ctx context.Context, s spec.Sink) (sink.Publisher, error) {
	return nil, errors.New("sink " + s.Name + ": the kafka sink is not built yet")
}
