package raftstore

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogger routes hashicorp/raft's hclog output to a *slog.Logger. hclog's
// levels map to slog's (Trace is Debug-4); the slog handler decides what is
// kept.
type hclogger struct {
	l       *slog.Logger
	name    string
	implied []any
	// quiet reports that the store is shutting down: raft's complaints
	// about connections closing under it are then logged at Debug.
	quiet func() bool
}

var _ hclog.Logger = (*hclogger)(nil)

func newHCLogger(l *slog.Logger, name string, quiet func() bool) *hclogger {
	return &hclogger{l: l, name: name, quiet: quiet}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *hclogger) Log(level hclog.Level, msg string, args ...any) {
	lv := slogLevel(level)
	if lv > slog.LevelDebug && h.quiet != nil && h.quiet() {
		lv = slog.LevelDebug
	}
	ctx := context.Background()
	if !h.l.Enabled(ctx, lv) {
		return
	}
	all := make([]any, 0, 2+len(h.implied)+len(args))
	if h.name != "" {
		all = append(all, "module", h.name)
	}
	all = append(all, h.implied...)
	for i, a := range args {
		// raft's own "node" (a description of itself) would repeat the
		// key of the store's logger, which names the node.
		if i%2 == 0 && a == "node" {
			a = "raft_node"
		}
		// hclog.Fmt values are a format and its arguments, which hclog
		// formats itself; slog would print them as a list.
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				a = fmt.Sprintf(format, f[1:]...)
			}
		}
		all = append(all, a)
	}
	h.l.Log(ctx, lv, msg, all...)
}

func (h *hclogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogger) enabled(l hclog.Level) bool {
	return h.l.Enabled(context.Background(), slogLevel(l))
}

func (h *hclogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogger) ImpliedArgs() []any { return h.implied }

func (h *hclogger) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogger) Name() string { return h.name }

func (h *hclogger) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (h *hclogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

// SetLevel does nothing: the slog handler filters.
func (h *hclogger) SetLevel(hclog.Level) {}

func (h *hclogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (h *hclogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return stdWriter{h}
}

// stdWriter logs each write as one Info line, stripping a "[LEVEL]" prefix
// into the level as hclog's own adapter does.
type stdWriter struct{ h *hclogger }

func (w stdWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := hclog.Info
	for prefix, l := range map[string]hclog.Level{"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info, "[WARN]": hclog.Warn, "[ERR]": hclog.Error, "[ERROR]": hclog.Error} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			msg, level = strings.TrimSpace(rest), l
			break
		}
	}
	w.h.Log(level, msg)
	return len(p), nil
}
