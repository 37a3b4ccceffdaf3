package stream

import (
	"context"
	"log/slog"
	"sync"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
)

// Pipeline is a destination merging into a bounded store on its own
// goroutine: what `braid capture` prints from and what a node serves to
// consumers.
type Pipeline struct {
	Dest  *group.Destination
	Store *Store

	router   *group.Router
	renameMu sync.Mutex
	stop     context.CancelFunc
	done     chan struct{} // closed when the run ended; err is then set
	err      error
}

// StartPipeline starts spec's destination (after resume, if set) into
// store, whose clients the caller subscribes first (a client subscribed
// later starts at the oldest event still held); the pipeline closes the
// store when its run ends.
func StartPipeline(ctx context.Context, spec *spec.Spec, resume *group.Cursor, store *Store, log *slog.Logger) (*Pipeline, error) {
	router, err := group.NewRouter(spec.Route)
	if err != nil {
		return nil, err
	}
	dest, err := group.New(group.Config{Spec: spec, Resume: resume, Logger: log})
	if err != nil {
		return nil, err
	}
	p := &Pipeline{Dest: dest, Store: store, router: router, done: make(chan struct{})}
	rctx, stop := context.WithCancel(ctx)
	p.stop = stop
	go func() {
		p.err = dest.RunInto(rctx, p.Store)
		p.Store.Close() // readers drain what is left, then stop
		close(p.done)
	}()
	return p, nil
}

// Rename maps origin names to logical ones (Router.Rename), safe for the
// servers' concurrent connections.
func (p *Pipeline) Rename(schema, table string) (string, string) {
	p.renameMu.Lock()
	defer p.renameMu.Unlock()
	return p.router.Rename(schema, table)
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
