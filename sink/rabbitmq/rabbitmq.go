// Package rabbitmq is the rabbitmq sink's publisher (issue 22). Being
// written.
package rabbitmq

import (
	"context"
	"errors"

	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Open connects to sink s's broker; dest names the destination (message
// ids are "dest:seq:n").
func Open(ctx context.Context, s spec.Sink, dest string) (sink.Publisher, error) {
	return nil, errors.New("sink " + s.Name + ": the rabbitmq sink is not built yet")
}
