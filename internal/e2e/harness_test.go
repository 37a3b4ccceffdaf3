package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
)

// cliTimeout bounds one braid command of a test.
const cliTimeout = 2 * time.Minute

// cli runs the braid binary with args, as an operator would, and returns
// its stdout, stderr and exit code (-1 when it could not run).
func cli(args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, braidproc.Built(), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	return out.String(), errb.String() + err.Error(), -1
}

// startCapture runs `braid capture -f spec` with args as a process of
// the test, its stderr in the test's output; it is killed when the test
// ends.
func startCapture(t *testing.T, spec string, args ...string) {
	t.Helper()
	cmd := exec.Command(braidproc.Binary(t), append([]string{"capture", "-f", spec}, args...)...)
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}
