package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CaptureSpec is the destination spec file a user of `braid capture`
// writes for the configurations' servers: the destination MergeBraid
// reads (mergeSpec), named name, as YAML: sources s0, s1, … from
// `earliest`, the first configuration's table filter, strict order and
// heartbeat MergeHeartbeat; no route, like mergeSpec.
func CaptureSpec(name string, cfgs []DecodeConfig) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nordering: strict\nheartbeat: %v\n", name, MergeHeartbeat)
	if len(cfgs) > 0 && len(cfgs[0].Tables) > 0 {
		b.WriteString("tables:\n")
		for _, t := range cfgs[0].Tables {
			fmt.Fprintf(&b, "  - %s\n", strconv.Quote(t))
		}
	}
	b.WriteString("sources:\n")
	for i, cfg := range cfgs {
		fmt.Fprintf(&b, "  - name: s%d\n    address: %s\n    user: %s\n    start: earliest\n", i, cfg.Addr, cfg.User)
	}
	return []byte(b.String())
}

// CaptureCount is what CountCapture read.
type CaptureCount struct {
	// Messages is how many lines capture printed up to and including the
	// one that brought the row changes to the number wanted; DDLs how
	// many of them are DDL messages.
	Messages, DDLs int
	// Rows counts the row changes in those lines (the entries of their
	// "data" arrays: an UPDATE counts once), Sources per source name.
	Rows    int
	Sources map[string]int
	// LastSeq is the seq of the last of those lines.
	LastSeq uint64
}

// CountCapture runs `bin capture -f specPath` (no --max) with its standard
// output read by this process, which counts each line's row changes until
// want have come, then stops capture (SIGTERM) and returns what it counted:
// the exact number of messages that hold the first want row changes, the
// --max a timed run (RunCapture) is given. On the way it checks that the
// seqs are dense and never decrease, and it fails if a line takes the count
// past want. It is not timed: parsing every line costs this process more
// than the reader of a timed run.
func CountCapture(ctx context.Context, bin, specPath string, want int) (CaptureCount, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "capture", "-f", specPath)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return CaptureCount{}, err
	}
	if err := cmd.Start(); err != nil {
		return CaptureCount{}, fmt.Errorf("bench: capture: %w", err)
	}
	c := CaptureCount{Sources: map[string]int{}}
	scan := bufio.NewScanner(out)
	scan.Buffer(make([]byte, 1<<20), 256<<20)
	var countErr error
	for c.Rows < want && scan.Scan() {
		if countErr = c.add(scan.Bytes()); countErr != nil {
			break
		}
	}
	if countErr == nil && c.Rows > want {
		countErr = fmt.Errorf("bench: capture: message %d took the row changes to %d, past the %d wanted", c.Messages, c.Rows, want)
	}
	if countErr == nil && c.Rows < want {
		countErr = fmt.Errorf("bench: capture: output ended after %d messages with %d of %d row changes (%v)", c.Messages, c.Rows, want, scan.Err())
	}
	// Stop capture as Ctrl-C would, and read what it still prints so that
	// it never blocks on a full pipe.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if countErr != nil {
		return c, fmt.Errorf("%w; capture: %v: %s", countErr, werr, stderr.String())
	}
	return c, nil
}

// add counts one line of capture's output.
func (c *CaptureCount) add(line []byte) error {
	c.Messages++
	seq, src, rows, ddl, err := flatLineCounts(line)
	if err != nil {
		return fmt.Errorf("bench: capture: message %d: %w: %.200s", c.Messages, err, line)
	}
	if seq != c.LastSeq && seq != c.LastSeq+1 {
		return fmt.Errorf("bench: capture: message %d has seq %d after %d: not dense", c.Messages, seq, c.LastSeq)
	}
	c.LastSeq = seq
	if ddl {
		c.DDLs++
	}
	c.Rows += rows
	c.Sources[src] += rows
	return nil
}

// flatLineCounts reads one flat message (flat.Writer's JSON line): its
// seq, its source, how many rows its "data" array holds and whether it is
// a DDL. It walks the object's top-level keys and skips every other value
// without decoding it: the lines are 1.5 GB a run.
func flatLineCounts(line []byte) (seq uint64, source string, rows int, ddl bool, err error) {
	s := jsonScan{b: line}
	if !s.byte('{') {
		return 0, "", 0, false, errors.New("not a JSON object")
	}
	seen := 0
	for first := true; ; first = false {
		if s.byte('}') {
			break
		}
		if !first && !s.byte(',') {
			return 0, "", 0, false, fmt.Errorf("offset %d: want , or }", s.i)
		}
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return 0, "", 0, false, fmt.Errorf("offset %d: want a key", s.i)
		}
		v0 := s.i
		if key == "data" && s.peek() == '[' {
			rows, ok = s.arrayLen()
		} else {
			ok = s.skip()
		}
		if !ok {
			return 0, "", 0, false, fmt.Errorf("offset %d: bad value of %q", v0, key)
		}
		v := line[v0:s.i]
		switch key {
		case "seq":
			seen++
			if seq, err = strconv.ParseUint(string(v), 10, 64); err != nil {
				return 0, "", 0, false, fmt.Errorf("seq: %w", err)
			}
		case "source":
			seen++
			if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
				return 0, "", 0, false, fmt.Errorf("source %s", v)
			}
			source = string(v[1 : len(v)-1])
		case "isDdl":
			ddl = string(v) == "true"
		case "data":
			seen++
		}
	}
	if seen != 3 {
		return 0, "", 0, false, errors.New(`want "seq", "source" and "data"`)
	}
	return seq, source, rows, ddl, nil
}

// jsonScan walks JSON text without decoding it.
type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// byte consumes c if it comes next.
func (s *jsonScan) byte(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// str consumes a string and returns its raw contents (escapes kept).
func (s *jsonScan) str() (string, bool) {
	i0 := s.i
	if !s.skipString() {
		return "", false
	}
	return string(s.b[i0+1 : s.i-1]), true
}

func (s *jsonScan) skipString() bool {
	if !s.byte('"') {
		return false
	}
	for ; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return true
		}
	}
	return false
}

// skip consumes one value of any kind (braid writes no whitespace).
func (s *jsonScan) skip() bool {
	switch s.peek() {
	case '"':
		return s.skipString()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if !s.skipString() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return true
			}
		}
		return false
	}
	i0 := s.i
	for s.i < len(s.b) && !strings.ContainsRune(",}]", rune(s.b[s.i])) {
		s.i++
	}
	return s.i > i0
}

// arrayLen consumes an array and returns how many elements it holds.
func (s *jsonScan) arrayLen() (int, bool) {
	s.byte('[')
	if s.byte(']') {
		return 0, true
	}
	n := 0
	for {
		if !s.skip() {
			return 0, false
		}
		n++
		if s.byte(']') {
			return n, true
		}
		if !s.byte(',') {
			return 0, false
		}
	}
}

// CaptureResult is what one RunCapture measured.
type CaptureResult struct {
	// Result: Rows are the row changes the n messages hold (given),
	// Elapsed the wall time from starting capture to the reader's exit
	// after its last line; PeakHeap is not measured (see PeakRSS).
	Result
	// Lines is how many lines the reader counted.
	Lines int
	// Exited is the wall time from starting capture to its exit.
	Exited time.Duration
	// CPU is the capture process's user and system time, from its rusage
	// (process start-up included); ReaderCPU the reader's.
	CPU, ReaderCPU time.Duration
	// PeakRSS is the capture process's peak resident set size, in bytes.
	PeakRSS uint64
}

// RunCapture runs `bin capture -f specPath --max n | wc -l` as a shell
// would: capture's standard output is a pipe read by a wc process, which
// counts the lines and exits when capture, having printed its n-th
// message, exits and closes the pipe. rows is the number of row changes
// those n messages hold (CountCapture), for the rate. It fails unless
// capture exits 0 and wc counted n lines.
func RunCapture(ctx context.Context, bin, specPath string, n, rows int) (CaptureResult, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return CaptureResult{}, err
	}
	reader := exec.CommandContext(ctx, "wc", "-l")
	reader.Env = append(os.Environ(), "LC_ALL=C")
	var count, readerErr bytes.Buffer
	reader.Stdin, reader.Stdout, reader.Stderr = pr, &count, &readerErr
	capture := exec.CommandContext(ctx, bin, "capture", "-f", specPath, "--max", strconv.Itoa(n))
	var stderr limitedBuffer
	capture.Stdout, capture.Stderr = pw, &stderr
	if err := reader.Start(); err != nil {
		pr.Close()
		pw.Close()
		return CaptureResult{}, fmt.Errorf("bench: wc: %w", err)
	}
	pr.Close()
	began := time.Now()
	err = capture.Start()
	pw.Close() // the pipe's write end is capture's alone now
	if err != nil {
		_ = reader.Wait()
		return CaptureResult{}, fmt.Errorf("bench: capture: %w", err)
	}
	exited := make(chan time.Duration, 1)
	captureErr := make(chan error, 1)
	go func() {
		err := capture.Wait()
		exited <- time.Since(began)
		captureErr <- err
	}()
	rerr := reader.Wait()
	res := CaptureResult{Result: Result{Rows: rows, Elapsed: time.Since(began)}}
	res.Exited = <-exited
	cerr := <-captureErr
	res.CPU = procCPU(capture.ProcessState)
	res.ReaderCPU = procCPU(reader.ProcessState)
	if ru, ok := capture.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.PeakRSS = uint64(ru.Maxrss) << 10 // kilobytes on Linux
	}
	if cerr != nil {
		return res, fmt.Errorf("bench: capture --max %d: %v: %s", n, cerr, stderr.String())
	}
	if rerr != nil {
		return res, fmt.Errorf("bench: wc -l: %v: %s", rerr, readerErr.String())
	}
	if res.Lines, err = strconv.Atoi(strings.TrimSpace(count.String())); err != nil {
		return res, fmt.Errorf("bench: wc -l printed %q", count.String())
	}
	if res.Lines != n {
		return res, fmt.Errorf("bench: capture --max %d printed %d lines", n, res.Lines)
	}
	return res, nil
}

// procCPU is a finished process's user and system time.
func procCPU(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// limitedBuffer keeps the first 64 KiB written to it: a child's standard
// error, for an error message.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
