package raftstore

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestHCLogFormatsFmtArgs: raft's hclog.Fmt arguments come out formatted,
// not as "[%+v ...]".
func TestHCLogFormatsFmtArgs(t *testing.T) {
	var b bytes.Buffer
	l := newHCLogger(slog.New(slog.NewTextHandler(&b, nil)), "raft", nil)
	l.Info("initial configuration", "index", 1, "servers", hclog.Fmt("%+v", []struct{ ID string }{{"n1"}}))
	if out := b.String(); strings.Contains(out, "%+v") || !strings.Contains(out, "{ID:n1}") {
		t.Errorf("logged %s", out)
	}
}
