package auth

import (
	"crypto/rand"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-cdc/braid/internal/throttle"
)

// Role is what a user may do.
type Role string

const (
	// Admin may do everything: manage destinations, see and change the
	// cluster, read and ack every destination's stream.
	Admin Role = "admin"
	// Consumer may only stream and ack the destinations it lists.
	Consumer Role = "consumer"
)

// AllDestinations, listed in a consumer's destinations, lets it read every
// destination.
const AllDestinations = "*"

// ErrBadCredentials is every failed login's error, whether the name is
// unknown or the password (or scramble) wrong, so that it does not tell
// which names exist.
var ErrBadCredentials = errors.New("auth: unknown user or wrong password")

// User is one user of a users file. Values handed out by Users are shared:
// read them, never modify them.
type User struct {
	Name string
	Role Role
	// Destinations are the destinations a consumer may read; "*" is all of
	// them. Empty for an admin, who may read all.
	Destinations []string

	hash *passwordHash
}

// IsAdmin reports whether u may do everything.
func (u *User) IsAdmin() bool { return u.Role == Admin }

// MayRead reports whether u may stream and ack dest: an admin may read
// every destination, a consumer those it lists (all of them if it lists
// "*").
func (u *User) MayRead(dest string) bool {
	if u.IsAdmin() {
		return true
	}
	return slices.Contains(u.Destinations, dest) || slices.Contains(u.Destinations, AllDestinations)
}

// cacheSize bounds the login cache: enough for every client of a node, small
// enough that a flood of distinct good logins costs little memory.
const cacheSize = 1024

// Users are the users of one users file, and the cache of their recent
// successful HTTP logins.
type Users struct {
	list   []*User // in file order
	byName map[string]*User
	// dummy is checked for an unknown name so that it costs what a known
	// one does.
	dummy *passwordHash
	// pepper makes the cache's keys useless outside this process.
	pepper [32]byte

	mu    sync.Mutex
	cache map[[32]byte]*User
	// fails and logs bound failed logins and their log lines (limit.go).
	fails failures
	logs  *throttle.Log
	// now is the clock of the failure windows; tests move it.
	now func() time.Time

	// derivations counts PBKDF2 checks, for tests of the cache.
	derivations atomic.Int64
}

// newUsers indexes list, which the caller has checked.
func newUsers(list []*User) *Users {
	us := &Users{list: list, byName: make(map[string]*User, len(list)), cache: make(map[[32]byte]*User),
		fails: failures{pairs: map[[32]byte]time.Time{}, buckets: map[string]*bucket{}},
		logs:  throttle.New(FailWindow, FailBurst), now: time.Now}
	for _, u := range list {
		us.byName[u.Name] = u
	}
	rand.Read(us.pepper[:]) // never fails (crypto/rand)
	// The dummy costs what the first user's hash costs: a file's hashes
	// normally share one iteration count.
	iter := defaultIterations
	if len(list) > 0 {
		iter = list[0].hash.iter
	}
	us.dummy = &passwordHash{iter: iter, salt: make([]byte, saltLen), key: make([]byte, keyLen)}
	rand.Read(us.dummy.salt)
	rand.Read(us.dummy.stage2[:])
	return us
}

// Lookup returns the user called name, for a request a peer node has
// already authenticated.
func (us *Users) Lookup(name string) (*User, bool) {
	u, ok := us.byName[name]
	return u, ok
}

// List returns the users in the file's order, for display.
func (us *Users) List() []*User {
	return slices.Clone(us.list)
}
