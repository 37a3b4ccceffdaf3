package group

import (
	"context"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
)

// TestSourceQueueBytes checks a source queue's byte bound: an empty queue
// takes any event, a full one makes the reader wait until the merge takes
// an event, and the bytes held are given back as events leave.
func TestSourceQueueBytes(t *testing.T) {
	ctx := t.Context()
	ev := func() *change.Event { return &change.Event{Type: change.EventBegin} }
	size := ev().Size()
	q := newSourceQueue(100, 2*size, make(chan struct{}, 1))

	big := &change.Event{Type: change.EventDDL, DDL: &change.DDL{SQL: string(make([]byte, 10*size))}}
	if err := q.put(ctx, big); err != nil {
		t.Fatalf("an empty queue must take an event larger than its bound: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := q.put(short, ev()); err == nil {
		t.Fatal("a queue over its bound took another event")
	}
	q.took(<-q.ch)
	if got := q.bytes.Load(); got != 0 {
		t.Fatalf("queue holds %d bytes after the merge took its only event, want 0", got)
	}

	for range 2 {
		if err := q.put(ctx, ev()); err != nil {
			t.Fatal(err)
		}
	}
	put := make(chan error, 1)
	go func() { put <- q.put(ctx, ev()) }()
	select {
	case err := <-put:
		t.Fatalf("a full queue took a third event at once (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	q.took(<-q.ch)
	select {
	case err := <-put:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader still waits after the merge took an event")
	}
	if got, want := q.bytes.Load(), 2*size; got != want {
		t.Fatalf("queue holds %d bytes, want %d", got, want)
	}
}

// TestSourceQueueStartBound: until the merge has emitted its first
// transaction a source's queue holds startEvents events, whatever its
// bound, so the sources that answer first do not read far ahead of the
// others; openUp lifts that and wakes a reader waiting on it.
func TestSourceQueueStartBound(t *testing.T) {
	ctx := t.Context()
	ev := func() *change.Event { return &change.Event{Type: change.EventBegin} }
	q := newSourceQueue(256, 1<<30, make(chan struct{}, 1))
	for range startEvents {
		if err := q.put(ctx, ev()); err != nil {
			t.Fatal(err)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := q.put(done, ev()); err == nil {
		t.Fatalf("a queue not yet open took event %d: its start bound is %d", startEvents+1, startEvents)
	}
	put := make(chan error, 1)
	go func() { put <- q.put(ctx, ev()) }()
	q.openUp()
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := q.put(ctx, ev()); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(q.ch); got != startEvents+101 {
		t.Fatalf("an open queue holds %d events, want %d", got, startEvents+101)
	}
}
