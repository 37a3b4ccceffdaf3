// Package retry is the one way a test waits for a condition: it calls a
// function until it returns nil, and fails the test with the function's
// last error once a timeout has passed.
//
//	retry.Until(t, 10*time.Second, func() error {
//		st := s.Stats()
//		if st.Applied < 100 {
//			return fmt.Errorf("applied %d of 100", st.Applied)
//		}
//		return nil
//	})
//
// Until is for the goroutine running the test (it calls t.Fatalf, and f
// may call t.Fatal for an error that no retry mends); Wait is the same
// loop returning the error, for other goroutines and for helpers that
// want to add to the message. A value a wait reads is kept by the
// closure: assign it to a variable of the caller before returning nil.
//
// In the spirit of consul's sdk/testutil/retry, with one difference: a
// condition is a func() error, not a func(*retry.R), so a helper that
// already says why a state is wrong returns that as the error, and no
// failure inside f is mistaken for a retry.
//
// # Timing
//
// f is called at once, then again each time the previous call returned
// an error, starting no sooner than an interval after the previous call
// started. The interval starts at 5ms and doubles up to 50ms, so a
// condition that holds soon is seen soon, and one that takes seconds is
// polled 20 times a second; an f that blocks (a read with its own
// timeout) is called again as soon as it returns. f is always called at
// least once, and once more at the timeout if the last call was earlier,
// so a short timeout on a loaded machine does not fail a condition that
// holds by then.
//
// Sleeps that are part of a test's scenario (letting a timestamp move
// on, holding a lock for a while) are not waits for a condition and do
// not belong here.
//
// # Concurrency
//
// Wait may be called from any goroutine; Until follows the rules of
// testing.TB and must be called from the goroutine running the test.
package retry
