package sinkrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/sink/redis"
	"github.com/braid-cdc/braid/sink/verify"
	"github.com/braid-cdc/braid/spec"
)

// ErrUnknownSink: the destination has no sink of that name.
var ErrUnknownSink = errors.New("no such sink")

// errNotRunning: the sink's target is not reached yet.
var errNotRunning = errors.New("the sink has not reached its target yet")

// verifyTimeout bounds a Verify.
const verifyTimeout = 2 * time.Minute

// find returns the running sink named name.
func (s *Set) find(name string) (*running, *sink.Runner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rn := range s.runners {
		if rn.spec.Name == name {
			return rn, rn.runner, nil
		}
	}
	names := make([]string, 0, len(s.runners))
	for _, rn := range s.runners {
		names = append(names, rn.spec.Name)
	}
	return nil, nil, fmt.Errorf("%w %q: destination %s has %v", ErrUnknownSink, name, s.ds.Name, names)
}

// Detail is one sink's spec (its password hidden) and its workers'
// checkpoints as its target holds them; the caller adds its state
// (Stats) and the head seq.
func (s *Set) Detail(ctx context.Context, name string) (wire.SinkDetail, error) {
	rn, r, err := s.find(name)
	if err != nil {
		return wire.SinkDetail{}, err
	}
	var d wire.SinkDetail
	sk := rn.spec
	if sk.Password != "" {
		sk.Password = spec.Hidden
	}
	if d.Spec, err = json.Marshal(sk); err != nil {
		return d, err
	}
	if r == nil {
		d.CheckpointsError = errNotRunning.Error()
		return d, nil
	}
	ckpt, err := r.Sink.Checkpoints(ctx) // none for a publisher: its place is its cursor (and for kafka the topic)
	if err != nil {
		d.CheckpointsError = err.Error()
		return d, nil
	}
	for w, p := range ckpt {
		d.Checkpoints = append(d.Checkpoints, wire.SinkCheckpoint{Worker: w, Seq: p.Seq, Row: p.Idx})
	}
	return d, nil
}

// Verify compares sample random rows of each logical table (tables; nil:
// all) of the sources with sink name's target, and as many of the target
// with the sources (package sink/verify). It ends when ctx does, when
// the sinks stop, or after verifyTimeout.
func (s *Set) Verify(ctx context.Context, name string, sample int, tables []string) (wire.SinkVerify, error) {
	rn, r, err := s.find(name)
	if err != nil {
		return wire.SinkVerify{}, err
	}
	if r == nil {
		return wire.SinkVerify{}, fmt.Errorf("sink %s: %w: %s", name, errNotRunning, rn.err)
	}
	progress := func() (head, applied uint64) {
		applied, _ = r.Applied()
		// A runner that has had nothing to apply since it started here
		// stands where its cursor does.
		if m := s.p.Store.Mark(r.Client); m != nil {
			applied = max(applied, m.Seq)
		}
		return s.p.Dest.Stats().Seq, applied
	}
	if _, ok := r.Sink.(*sink.Ordered); ok {
		// A broker's messages are its consumers' to compare: what verify
		// tells is how far the sink has published, confirmed.
		head, applied := progress()
		return wire.SinkVerify{Destination: s.ds.Name, Sink: name, Published: true, HeadSeq: head, AppliedSeq: applied, Settled: applied >= head}, nil
	}
	vt, ok := VerifyTarget(r.Sink)
	if !ok {
		return wire.SinkVerify{}, fmt.Errorf("sink %s: a %s target cannot be verified yet", name, rn.spec.Type)
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return verify.Run(ctx, verify.Config{Spec: s.ds, Sink: rn.spec, Target: vt, Sample: sample, Tables: tables, Progress: progress, Logger: r.Logger})
}

// VerifyTarget is the target of s that braid sink verify compares with
// the sources, if it can (a Keyed sink's target that implements
// verify.Target; a publisher's messages are its consumers' to compare).
func VerifyTarget(s sink.Sink) (verify.Target, bool) {
	k, ok := s.(*sink.Keyed)
	if !ok {
		return nil, false
	}
	vt, ok := k.Target().(verify.Target)
	return vt, ok
}

// The targets braid sink verify can compare.
var (
	_ verify.Target = (*mysql.Target)(nil)
	_ verify.Target = (*postgres.Target)(nil)
	_ verify.Target = (*redis.Target)(nil)
)
