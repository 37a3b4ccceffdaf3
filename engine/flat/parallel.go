package flat

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/braid-cdc/braid/engine/change"
)

// ParallelRows is the fewest rows a WriteEvents call must hold before it
// formats them on several goroutines: below it, starting them costs more
// than it saves.
const ParallelRows = 2048

// flatJob is one message a Writer has decided on but not formatted
// yet: what flush or ddlLine reads of the writer's state when it writes it.
type flatJob struct {
	seq   uint64
	ts    time.Time
	tx    *change.Event       // the transaction's EventBegin
	runEv *change.Event       // the EventRows the run starts in
	run   []*change.RowChange // the message's row changes; nil for a DDL
	ddl   *change.Event       // the DDL, for a DDL message
	empty bool                // the message of a transaction of no rows (tx)
	keys  [][]byte            // the run's column keys (FlatWriter.columnKeys)
}

// flatPart is one piece of a WriteEvents call: its messages'
// bytes one after another, and where each ends.
type flatPart struct {
	data []byte
	ends []int
}

// WriteEvents is Write for several events, with the same messages in the
// same order, formatted on up to workers goroutines when the events hold
// ParallelRows rows or more, so that formatting one stream can use as many
// cores as the merge feeding it, which reads its sources on a goroutine
// each (measured in bench/ on two cores: one consumer 14% faster, for
// about 5% more CPU a row). out is called for each message in order, on
// the calling goroutine.
func (w *Writer) WriteEvents(evs []*change.Event, workers int, out func(line []byte) error) error {
	w.jobs, w.runs, w.planning = w.jobs[:0], w.runs[:0], true
	rows := 0
	for _, ev := range evs {
		rows += len(ev.Rows)
		if err := w.Write(ev, nil); err != nil {
			w.planning = false
			return err
		}
	}
	w.planning = false
	jobs := w.jobs
	defer func() {
		clear(w.jobs) // let go of the events
		clear(w.runs)
		w.jobs, w.runs = w.jobs[:0], w.runs[:0]
	}()
	if workers <= 1 || rows < ParallelRows || len(jobs) < 2 {
		for i := range jobs {
			var err error
			if w.buf, err = w.format(&jobs[i], w.buf, out); err != nil {
				return err
			}
		}
		return nil
	}
	chunks := splitJobs(jobs, min(workers*chunksPerWorker, len(jobs)))
	for len(w.parts) < len(chunks) {
		w.parts = append(w.parts, &flatPart{})
	}
	var (
		wg   sync.WaitGroup
		next atomic.Int32 // the next chunk to take
	)
	rowBytes := w.rowBytes
	if rowBytes == 0 {
		rowBytes = maxRowBytes
	}
	for range min(workers, len(chunks)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(chunks) {
					return
				}
				p := w.parts[k]
				p.data, p.ends = p.data[:0], p.ends[:0]
				for i := range chunks[k] {
					p.format(w, &chunks[k][i], rowBytes)
				}
			}
		})
	}
	wg.Wait()
	formatted := 0
	for _, p := range w.parts[:len(chunks)] {
		formatted += len(p.data)
	}
	// The next call reserves what a row took in this one, and a quarter
	// more: a guess too high made the buffers grow past what is kept
	// (maxKeptPart) and allocated, cleared and copied them again on each
	// call (6% of a stream's CPU with 512 bytes a row, against about 180).
	// Rows bigger than maxRowBytes are copied in when formatted, as
	// before: reserving for them could take a batch's rows times its
	// biggest value.
	per := formatted / rows
	w.rowBytes = min(max(per+per/4, 64), maxRowBytes)
	for _, p := range w.parts[:len(chunks)] {
		start := 0
		for _, end := range p.ends {
			if err := out(p.data[start:end]); err != nil {
				return err
			}
			start = end
		}
		if cap(p.data) > maxKeptPart/chunksPerWorker {
			p.data = nil // an idle stream does not hold its biggest batch
		}
	}
	return nil
}

// chunksPerWorker is how many pieces WriteEvents cuts a batch into per
// goroutine, which take the next piece as they finish one: rows of some
// tables cost several times those of others, and with one piece each, one
// goroutine often ran three times as long as the other while the other
// waited (one Go client on two cores, alternating A/B over 18 runs each:
// median 1.74 → 1.96M rows/s, server CPU a row unchanged).
const chunksPerWorker = 8

// maxKeptPart is about the most of its buffers per goroutine WriteEvents
// keeps for the next call (a piece keeps at most its share).
const maxKeptPart = 8 << 20

// maxRowBytes is the most WriteEvents reserves for a row, and what it
// reserves before it knows what a stream's rows take.
const maxRowBytes = 512

// plan records the pending run as a job instead of writing it (flush in
// WriteEvents). The job's rows are copied to the end of w.runs, which the
// jobs of one call share and the next call reuses: a slice of its own per
// run was an allocation per message. When w.runs grows, the jobs before
// keep the array they point into.
func (w *Writer) plan() {
	start := len(w.runs)
	w.runs = append(w.runs, w.run...)
	j := flatJob{seq: w.Seq, ts: w.now(), tx: w.tx, runEv: w.runEv, run: w.runs[start:len(w.runs):len(w.runs)]}
	if !w.Binary {
		j.keys = w.columnKeys(w.run[0].Table)
	}
	w.jobs = append(w.jobs, j)
	w.endRun()
}

// format writes one job's message with buf as its scratch buffer, as the
// writer would have when it decided on it, and returns the buffer.
func (w *Writer) format(j *flatJob, buf []byte, out func([]byte) error) ([]byte, error) {
	f := Writer{Seq: j.seq, MaxRows: w.MaxRows, Binary: w.Binary,
		Now: func() time.Time { return j.ts }, tx: j.tx, runEv: j.runEv, run: j.run, runKeys: j.keys, buf: buf}
	var err error
	switch {
	case j.empty && f.Binary:
		err = out(f.emptyBinary())
	case j.empty:
		err = out(f.emptyLine())
	case j.ddl != nil && f.Binary:
		err = out(f.ddlBinary(j.ddl))
	case j.ddl != nil:
		err = out(f.ddlLine(j.ddl))
	default:
		err = f.flush(out)
	}
	return f.buf, err
}

// format formats a job at the end of p.data: in place, in the spare
// capacity it makes room for (rowBytes a row), or copied there when it
// took more.
func (p *flatPart) format(w *Writer, j *flatJob, rowBytes int) {
	p.data = slices.Grow(p.data, rowBytes*len(j.run)+4096)
	end := len(p.data)
	_, _ = w.format(j, p.data[end:], func(line []byte) error { // never fails
		if len(line) > 0 && cap(p.data) > end && unsafe.SliceData(line) == &p.data[:end+1][end] {
			p.data = p.data[:end+len(line)] // formatted in place
		} else {
			p.data = append(p.data, line...)
		}
		return nil
	})
	p.ends = append(p.ends, len(p.data))
}

// splitJobs cuts jobs into at most n runs of consecutive jobs holding about
// as many rows each.
func splitJobs(jobs []flatJob, n int) [][]flatJob {
	total := 0
	for i := range jobs {
		total += len(jobs[i].run) + 1
	}
	chunks := make([][]flatJob, 0, n)
	start, acc := 0, 0
	for i := range jobs {
		acc += len(jobs[i].run) + 1
		if acc*n >= total*(len(chunks)+1) && len(chunks) < n-1 {
			chunks = append(chunks, jobs[start:i+1])
			start = i + 1
		}
	}
	if start < len(jobs) {
		chunks = append(chunks, jobs[start:])
	}
	return chunks
}
