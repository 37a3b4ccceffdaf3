package main

import (
	"errors"
	"io"
	"sync/atomic"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// output writes capture's lines on a goroutine of its own, so that writing
// one batch overlaps formatting the next: on two cores, capture's blocked
// pipe writes held its formatting back (1.7 s of a 6 s catch-up in an
// execution trace). Lines gather in chunks of about outChunkBytes; at most
// outChunks exist, so memory stays bounded and a slow reader holds capture
// back.
type output struct {
	w     io.Writer
	cur   []byte      // the chunk being filled
	free  chan []byte // chunks the writer has emptied
	queue chan outChunk
	done  chan struct{} // closed when the writer ends
	// failed is closed on the first write error, err set before it.
	failed chan struct{}
	err    error
	// written is the mark of the last chunk written whole: the cursor
	// after the last transaction printed whole.
	written atomic.Pointer[group.Cursor]
}

type outChunk struct {
	data []byte
	mark *group.Cursor
}

const (
	outChunkBytes = 1 << 20
	outChunks     = 4
)

func newOutput(w io.Writer) *output {
	o := &output{w: w, free: make(chan []byte, outChunks), queue: make(chan outChunk, outChunks),
		done: make(chan struct{}), failed: make(chan struct{})}
	for range outChunks - 1 {
		o.free <- nil
	}
	o.cur = <-o.free
	go o.run()
	return o
}

func (o *output) run() {
	defer close(o.done)
	for c := range o.queue {
		if o.err == nil {
			if _, err := o.w.Write(c.data); err != nil {
				o.err = err
				close(o.failed)
			} else if c.mark != nil {
				o.written.Store(c.mark)
			}
		}
		o.free <- c.data[:0]
	}
}

// line appends one line, handing the chunk to the writer once it is full.
func (o *output) line(b []byte) error {
	o.cur = append(append(o.cur, b...), '\n')
	if len(o.cur) >= outChunkBytes {
		return o.send(nil)
	}
	return nil
}

// send hands the lines gathered so far to the writer, with mark (nil: none)
// the cursor after them.
func (o *output) send(mark *group.Cursor) error {
	if len(o.cur) == 0 && mark == nil {
		return nil
	}
	select {
	case o.queue <- outChunk{o.cur, mark}:
	case <-o.failed:
		return o.err
	}
	select {
	case o.cur = <-o.free:
	case <-o.failed:
		return o.err
	}
	return nil
}

// close writes what is left and waits for the writer; it returns the first
// write error.
func (o *output) close(mark *group.Cursor) error {
	err := o.send(mark)
	close(o.queue)
	<-o.done
	if err != nil {
		return err
	}
	return o.err
}

// failure returns the write error, if a write failed.
func (o *output) failure() error {
	select {
	case <-o.failed:
		return o.err
	default:
		return nil
	}
}

// abort drops the lines not yet handed to the writer and waits for the
// writer to write what it was handed; written is then final.
func (o *output) abort() {
	o.cur = o.cur[:0]
	close(o.queue)
	<-o.done
}

// printBatch writes a batch's messages through line, formatting as many of
// its events at a time as it may on up to workers goroutines
// (flat.Writer.WriteEvents): all of them unless left, the messages still
// wanted (0: no limit), could run out within them, and then the events
// whose messages surely number fewer, one call after another, so that it
// knows which transaction the last wanted line ends. It returns the mark
// of the last transaction written whole (nil: none ended) and whether line
// asked to stop (errEnough).
func printBatch(fw *flat.Writer, b stream.Batch, workers int, left func() int, line func([]byte) error) (mark *group.Cursor, enough bool, err error) {
	evs, marks := b.Events, b.Marks
	for len(evs) > 0 {
		n := len(evs)
		if l := left(); l > 0 {
			n = eventsBelow(evs, l)
		}
		if n == 0 {
			n = 1
			err = fw.Write(evs[0], line)
		} else {
			err = fw.WriteEvents(evs[:n], workers, line)
		}
		if err != nil && !errors.Is(err, errEnough) {
			return mark, false, err
		}
		// A transaction is printed whole once its last event is written
		// (errEnough there: its last line was the last wanted).
		for _, m := range marks[:n] {
			if m != nil {
				mark = m
			}
		}
		if err != nil {
			return mark, true, nil
		}
		evs, marks = evs[n:], marks[n:]
	}
	return mark, false, nil
}

// eventsBelow is how many of evs, from the first, make fewer than left
// flat messages for certain: a DDL makes one, a rows event at most one per
// DefaultMaxRows rows plus the run it ends.
func eventsBelow(evs []*change.Event, left int) int {
	n := 0
	for i, ev := range evs {
		if n += len(ev.Rows)/flat.DefaultMaxRows + 2; n >= left {
			return i
		}
	}
	return len(evs)
}
