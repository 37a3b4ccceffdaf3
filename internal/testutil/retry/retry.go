package retry

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The polling interval: the first, and the largest it doubles to.
const (
	firstInterval = 5 * time.Millisecond
	maxInterval   = 50 * time.Millisecond
)

// Until calls f until it returns nil and fails t, naming the timeout and
// f's last error, if it has not by the time timeout has passed. f runs
// on the goroutine that called Until, so it may call t.Fatal.
func Until(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	// Not t.Context(): Until may be called from a Cleanup, after the
	// test's context is cancelled.
	if err := Wait(context.Background(), timeout, f); err != nil {
		t.Fatal(err)
	}
}

// Wait calls f until it returns nil, and returns nil then. Once timeout
// has passed it returns an error holding f's last error (errors.Is and
// errors.As see it); if ctx ends first, an error holding ctx's.
func Wait(ctx context.Context, timeout time.Duration, f func() error) error {
	start := time.Now()
	deadline := start.Add(timeout)
	interval := firstInterval
	var timer *time.Timer
	for {
		began := time.Now()
		err := f()
		if err == nil {
			return nil
		}
		now := time.Now()
		if !began.Before(deadline) {
			return &timeoutError{after: now.Sub(start), timeout: timeout, last: err}
		}
		next := began.Add(interval)
		if next.After(deadline) {
			next = deadline // one last call at the timeout
		}
		interval = min(2*interval, maxInterval)
		if timer == nil {
			timer = time.NewTimer(next.Sub(now))
			defer timer.Stop()
		} else {
			timer.Reset(next.Sub(now))
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("retry: %w, after %v; last: %w", ctx.Err(), now.Sub(start).Round(time.Millisecond), err)
		}
	}
}

// timeoutError is Wait's error at the timeout.
type timeoutError struct {
	after, timeout time.Duration
	last           error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("not within %v (gave up after %v): %v", e.timeout, e.after.Round(time.Millisecond), e.last)
}

func (e *timeoutError) Unwrap() error { return e.last }

// WhileProgress calls f every interval until it returns nil. It fails t,
// naming f's last error, once the progress f reports has not changed for
// stall: a loaded machine gets the time its slower progress needs, while
// a wait that is stuck fails as soon as on a quiet one. f runs on the
// goroutine that called WhileProgress, so it may call t.Fatal.
func WhileProgress(t testing.TB, stall, interval time.Duration, f func() (progress int, err error)) {
	t.Helper()
	start := time.Now()
	last, moved := 0, start
	for first := true; ; first = false {
		progress, err := f()
		if err == nil {
			return
		}
		now := time.Now()
		if first || progress != last {
			last, moved = progress, now
		} else if now.Sub(moved) >= stall {
			t.Fatalf("no progress for %v (gave up after %v, progress %d): %v", stall, now.Sub(start).Round(time.Millisecond), progress, err)
		}
		time.Sleep(interval)
	}
}
