package retry

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A condition that holds after a few calls ends the wait with no error.
func TestWaitUntilNil(t *testing.T) {
	var calls int
	err := Wait(context.Background(), time.Minute, func() error {
		calls++
		if calls < 4 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("Wait: %v after %d calls, want nil after 4", err, calls)
	}
}

// At the timeout the error says so and holds the last error of f, which
// errors.Is finds; f was called at the timeout once more.
func TestWaitTimeout(t *testing.T) {
	errNotYet := errors.New("not yet")
	var calls int
	var last time.Time
	start := time.Now()
	err := Wait(context.Background(), 100*time.Millisecond, func() error {
		calls++
		last = time.Now()
		return fmt.Errorf("call %d: %w", calls, errNotYet)
	})
	if !errors.Is(err, errNotYet) {
		t.Fatalf("Wait: %v, want an error wrapping %v", err, errNotYet)
	}
	if want := fmt.Sprintf("call %d: not yet", calls); !strings.HasPrefix(err.Error(), "not within 100ms") || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Wait: %q, want the timeout and %q", err, want)
	}
	if last.Sub(start) < 100*time.Millisecond {
		t.Errorf("last call %v after the start, want one at the timeout (100ms)", last.Sub(start))
	}
	if calls < 2 {
		t.Errorf("%d calls, want one at the start and one at the timeout", calls)
	}
}

// A zero timeout calls f once.
func TestWaitZeroTimeout(t *testing.T) {
	var calls int
	err := Wait(context.Background(), 0, func() error { calls++; return errors.New("no") })
	if err == nil || calls != 1 {
		t.Fatalf("Wait: %v after %d calls, want an error after 1", err, calls)
	}
}

// A cancelled context ends the wait between calls, with ctx's error and
// f's last.
func TestWaitCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	err := Wait(ctx, time.Hour, func() error {
		if calls.Add(1) == 2 {
			cancel()
		}
		return errors.New("still no")
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "still no") || calls.Load() != 2 {
		t.Fatalf("Wait: %v after %d calls, want context.Canceled and the last error after 2", err, calls.Load())
	}
}

// Until fails the test with Wait's error; a test that a wait failed is
// recorded as failed, and what follows Until does not run.
func TestUntilFails(t *testing.T) {
	ft := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Until(ft, 20*time.Millisecond, func() error { return errors.New("row 3 missing") })
		ft.after = true
	}()
	<-done
	if !ft.failed || ft.after || !strings.Contains(ft.msg, "row 3 missing") || !strings.Contains(ft.msg, "not within 20ms") {
		t.Fatalf("Until: failed %v, went on %v, message %q", ft.failed, ft.after, ft.msg)
	}
}

// fakeT records a Fatal as testing.T would, ending its goroutine.
type fakeT struct {
	testing.TB
	failed, after bool
	msg           string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatal(args ...any) {
	f.failed, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fakeT) Fatalf(format string, args ...any) { f.Fatal(fmt.Sprintf(format, args...)) }

func TestWhileProgressWaitsWhileMoving(t *testing.T) {
	n := 0
	WhileProgress(t, 30*time.Millisecond, 10*time.Millisecond, func() (int, error) {
		n++ // moves at every call: no stall, however long it takes
		if n < 20 {
			return n, errors.New("not yet")
		}
		return n, nil
	})
	if n != 20 {
		t.Fatalf("f called %d times, want 20", n)
	}
}

func TestWhileProgressFailsWhenStuck(t *testing.T) {
	ft := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WhileProgress(ft, 30*time.Millisecond, 5*time.Millisecond, func() (int, error) { return 7, errors.New("stuck at 7") })
	}()
	<-done
	if !strings.Contains(ft.msg, "no progress for 30ms") || !strings.Contains(ft.msg, "stuck at 7") {
		t.Fatalf("failure %q: want the stall and the last error named", ft.msg)
	}
}
