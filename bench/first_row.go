package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// CaptureFirstRow runs `bin capture -f specPath` and returns the wall time
// from starting the process to the first line on its standard output that
// holds a row change (DDL messages before it do not count): what a user
// waits before rows flow. It then stops capture as Ctrl-C would.
func CaptureFirstRow(ctx context.Context, bin, specPath string) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "capture", "-f", specPath)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("bench: capture: %w", err)
	}
	var first time.Duration
	scan := bufio.NewScanner(out)
	scan.Buffer(make([]byte, 1<<20), 256<<20)
	var lineErr error
	for scan.Scan() {
		_, _, rows, _, err := flatLineCounts(scan.Bytes())
		if err != nil {
			lineErr = fmt.Errorf("bench: capture: %w: %.200s", err, scan.Bytes())
			break
		}
		if rows > 0 {
			first = time.Since(began)
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	switch {
	case lineErr != nil:
		return 0, lineErr
	case first == 0:
		return 0, fmt.Errorf("bench: capture printed no row change (%v): %v: %s", scan.Err(), werr, stderr.String())
	}
	return first, nil
}
