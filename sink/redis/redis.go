// Package redis is the redis sink's target (issue 22). Being written.
package redis

import (
	"context"
	"errors"

	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Open connects to sink s's Redis.
func Open(ctx context.Context, s spec.Sink) (sink.Target, error) {
	return nil, errors.New("sink " + s.Name + ": the redis sink is not built yet")
}
