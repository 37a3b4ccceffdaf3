package stream

import (
	"context"
	"errors"
	"log/slog"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
)

// PipelineConfig is what StartPipeline assembles. Zero fields take the
// defaults given.
type PipelineConfig struct {
	// Spec is the destination's spec, defaults applied. Required.
	Spec *spec.Spec
	// Clients are the client ids subscribed before the first event, each
	// after its cursor (nil: from the first event the store holds).
	// Default: none.
	Clients map[string]*group.Cursor
	// Resume is the cursor the destination starts after. Default: the
	// slowest of Clients' cursors, or the spec's start positions when
	// none has one (a client without a cursor then sees the whole stream).
	Resume *group.Cursor
	// Store bounds the store. Default: stream.Config's defaults.
	Store Config
	// Logger receives the destination's logs. Default: discarded.
	Logger *slog.Logger
}

// Pipeline is a destination merging into a bounded store on its own
// goroutine: what `braid capture` prints from, what its servers and a
// cluster node serve to consumers.
type Pipeline struct {
	Dest  *group.Destination
	Store *Store

	name string
	stop context.CancelFunc
	done chan struct{} // closed when the run ended; err is then set
	err  error
}

// StartPipeline builds cfg's destination and its store, subscribes
// cfg.Clients and starts the merge into the store; the pipeline closes the
// store when its run ends.
func StartPipeline(ctx context.Context, cfg PipelineConfig) (*Pipeline, error) {
	if cfg.Spec == nil {
		return nil, errors.New("stream: pipeline without a spec")
	}
	resume := cfg.Resume
	if resume == nil {
		for _, c := range cfg.Clients {
			if c != nil && (resume == nil || c.Seq < resume.Seq) {
				resume = c
			}
		}
		if resume != nil && cfg.Logger != nil {
			cfg.Logger.Info("resuming from the slowest consumer's cursor", "dest", cfg.Spec.Name, "seq", resume.Seq, "consumers", len(cfg.Clients))
		}
	}
	dest, err := group.New(group.Config{Spec: cfg.Spec, Resume: resume, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	store := NewStore(cfg.Store)
	for client, c := range cfg.Clients {
		if c != nil {
			store.SubscribeAfter(client, c.Seq, c)
		} else {
			store.Subscribe(client)
		}
	}
	p := &Pipeline{Dest: dest, Store: store, name: cfg.Spec.Name, done: make(chan struct{})}
	rctx, stop := context.WithCancel(ctx)
	p.stop = stop
	go func() {
		p.err = dest.RunInto(rctx, store)
		store.Close() // readers drain what is left, then stop
		close(p.done)
	}()
	return p, nil
}

// Served is the pipeline as the servers see it, with live (nil: always)
// deciding whether this node may hand its events out now.
func (p *Pipeline) Served(live func() error) *Served {
	return &Served{Name: p.name, Store: p.Store, Stats: p.Dest.Stats, Live: live}
}

// Done is closed when the run ends: its context ended, or a source failed
// for good (Err).
func (p *Pipeline) Done() <-chan struct{} { return p.done }

// Err is the run's error once Done is closed; nil when its context ended.
func (p *Pipeline) Err() error {
	<-p.done
	return p.err
}

// Close stops the run and waits for it.
func (p *Pipeline) Close() {
	p.stop()
	<-p.done
}
