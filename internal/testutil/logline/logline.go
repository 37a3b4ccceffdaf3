// Package logline lets a test wait for a log line: a slog.Handler that
// passes every record on and closes a channel the first time a record's
// message begins with a given prefix, so a test can tell that a component
// reached a state it only logs (a reader waiting) without timing it; and
// a Buffer to read a log, or a process's output, while it is written.
package logline

import (
	"bytes"
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

// Buffer is a bytes.Buffer that goroutines may write to at once (a
// logger's handler, a process's output) while a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Hold stalls every writer until release is called: a test's way to
// block a process's output. String must not be called meanwhile.
func (b *Buffer) Hold() (release func()) {
	b.mu.Lock()
	return b.mu.Unlock
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
