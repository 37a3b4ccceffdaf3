// Package logline lets a test wait for a log line: a slog.Handler that
// passes every record on and closes a channel the first time a record's
// message begins with a given prefix, so a test can tell that a component
// reached a state it only logs (a reader waiting) without timing it.
package logline

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Watch is a slog.Handler over another that watches for one message.
type Watch struct {
	slog.Handler
	prefix string
	once   *sync.Once
	seen   chan struct{}
}

// New returns a handler passing records on to h whose Seen channel is
// closed at the first record whose message begins with prefix.
func New(h slog.Handler, prefix string) *Watch {
	return &Watch{Handler: h, prefix: prefix, once: &sync.Once{}, seen: make(chan struct{})}
}

// Seen is closed once a record with the prefix was handled.
func (w *Watch) Seen() <-chan struct{} { return w.seen }

func (w *Watch) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, w.prefix) {
		w.once.Do(func() { close(w.seen) })
	}
	return w.Handler.Handle(ctx, r)
}

func (w *Watch) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *w
	c.Handler = w.Handler.WithAttrs(attrs)
	return &c
}

func (w *Watch) WithGroup(name string) slog.Handler {
	c := *w
	c.Handler = w.Handler.WithGroup(name)
	return &c
}
