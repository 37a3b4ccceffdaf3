package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrTooManyLogins: a user name or a remote address failed too many
// logins lately; the login was refused without checking the password.
var ErrTooManyLogins = errors.New("auth: too many failed logins")

// The bounds on failed logins: each one costs a PBKDF2 (tens of
// milliseconds of CPU), so a client guessing passwords, or stuck with a
// wrong one, must not turn the node's CPU into its retry loop.
const (
	// FailWindow is how long a failed name and password are remembered
	// (another try of the same pair fails without a PBKDF2), and the
	// period over which FailBurst failures refill.
	FailWindow = time.Minute
	// FailBurst is how many failed logins a user name, and a remote
	// address, may have in a row before further logins that need a
	// PBKDF2 are refused (ErrTooManyLogins); they come back at
	// FailBurst per FailWindow.
	FailBurst = 10
	// limitEntries bounds each of the maps below: names and addresses
	// come from the network.
	limitEntries = 4096
)

// bucket is a token bucket of failed logins: tokens left at at.
type bucket struct {
	tokens float64
	at     time.Time
}

// refill brings b up to now.
func (b *bucket) refill(now time.Time) {
	b.tokens = min(FailBurst, b.tokens+now.Sub(b.at).Seconds()*FailBurst/FailWindow.Seconds())
	b.at = now
}

// failures are the failed-login state of a Users: the recent failed
// pairs and the buckets of names and remotes. The caller holds Users.mu.
type failures struct {
	pairs   map[[32]byte]time.Time // cacheKey → when it failed
	buckets map[string]*bucket     // "user:"+name, "remote:"+addr
}

// limited reports, for a login that would need a PBKDF2, which of its
// keys has no failure left, and when the next comes back.
func (f *failures) limited(now time.Time, keys ...string) (string, time.Duration) {
	for _, k := range keys {
		if b := f.buckets[k]; b != nil {
			b.refill(now)
			if b.tokens < 1 {
				return k, time.Duration((1 - b.tokens) * float64(FailWindow) / FailBurst)
			}
		}
	}
	return "", 0
}

// failed records a failed login of the pair key under keys.
func (f *failures) failed(now time.Time, pair [32]byte, keys ...string) {
	if len(f.pairs) >= limitEntries {
		f.prunePairs(now)
	}
	f.pairs[pair] = now
	f.failedKeys(now, keys...)
}

// failedKeys takes one failure from the bucket of each of keys.
func (f *failures) failedKeys(now time.Time, keys ...string) {
	for _, k := range keys {
		b := f.buckets[k]
		if b == nil {
			if len(f.buckets) >= limitEntries {
				f.pruneBuckets(now)
			}
			b = &bucket{tokens: FailBurst, at: now}
			f.buckets[k] = b
		}
		b.refill(now)
		b.tokens = max(0, b.tokens-1)
	}
}

// knownFailure reports whether pair failed within FailWindow.
func (f *failures) knownFailure(now time.Time, pair [32]byte) bool {
	at, ok := f.pairs[pair]
	if ok && now.Sub(at) >= FailWindow {
		delete(f.pairs, pair)
		return false
	}
	return ok
}

// prunePairs drops the expired pairs, then arbitrary ones down to three
// quarters of limitEntries, so that pruning is rare.
func (f *failures) prunePairs(now time.Time) {
	for k, at := range f.pairs {
		if now.Sub(at) >= FailWindow {
			delete(f.pairs, k)
		}
	}
	for k := range f.pairs {
		if len(f.pairs) < limitEntries*3/4 {
			break
		}
		delete(f.pairs, k)
	}
}

// pruneBuckets drops the buckets that are full again (they say nothing
// a new one would not), then arbitrary ones down to three quarters of
// limitEntries.
func (f *failures) pruneBuckets(now time.Time) {
	for k, b := range f.buckets {
		if b.refill(now); b.tokens >= FailBurst {
			delete(f.buckets, k)
		}
	}
	for k := range f.buckets {
		if len(f.buckets) < limitEntries*3/4 {
			break
		}
		delete(f.buckets, k)
	}
}

// Derivations counts the PBKDF2 checks HTTP logins made so far: what
// failed logins cost, and what the caches and limits saved.
func (us *Users) Derivations() int64 { return us.derivations.Load() }

// LoginFrom is Login for a client at remote (its address without the
// port; "" if unknown), with failed logins bounded: a name and password
// that failed within FailWindow fail again without a PBKDF2, and once
// the name or the remote has failed FailBurst times in a row, logins
// that would need a PBKDF2 are refused with an error wrapping
// ErrTooManyLogins that says when to retry. A login cached as good
// passes whatever the limits say.
func (us *Users) LoginFrom(remote, name, password string) (*User, error) {
	key := us.cacheKey(name, password)
	keys := limitKeys(remote, name)
	now := us.now()
	us.mu.Lock()
	if u, ok := us.cache[key]; ok {
		us.mu.Unlock()
		return u, nil
	}
	if us.fails.knownFailure(now, key) {
		us.mu.Unlock()
		return nil, ErrBadCredentials
	}
	if k, wait := us.fails.limited(now, keys...); k != "" {
		us.mu.Unlock()
		return nil, tooMany(k, wait)
	}
	us.mu.Unlock()

	u, err := us.derive(name, password)
	us.mu.Lock()
	defer us.mu.Unlock()
	if err != nil {
		us.fails.failed(now, key, keys...)
		return nil, err
	}
	us.rememberLocked(key, u)
	return u, nil
}

// limitKeys are the buckets a login of name from remote draws on.
func limitKeys(remote, name string) []string {
	if remote == "" {
		return []string{"user:" + name}
	}
	return []string{"user:" + name, "remote:" + remote}
}

// tooMany is the error of a login refused because the bucket k is empty
// for wait more.
func tooMany(k string, wait time.Duration) error {
	what, who, _ := strings.Cut(k, ":")
	if what == "remote" {
		what = "address"
	}
	return fmt.Errorf("%w: %s %s failed %d logins lately: retry in %v", ErrTooManyLogins, what, who, FailBurst, wait.Round(time.Second)+time.Second)
}

// FailureLog says whether a failed login of name should be logged now:
// a name's first failure in a FailWindow, and at most FailBurst lines in
// all per window, so that a flood of bad logins (under names an attacker
// chooses) cannot flood the log. suppressed is how many failures went
// unlogged since the last line that was logged.
func (us *Users) FailureLog(name string) (log bool, suppressed int) {
	return us.logs.Allow(name, us.now())
}
