package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Login checks an HTTP login: name and the password itself. It returns
// ErrBadCredentials for an unknown name or a wrong password, after the same
// work. A login that succeeded before in this process is answered from the
// cache without a PBKDF2; failed ones are bounded as LoginFrom says (by
// name only: Login does not know the client's address).
func (us *Users) Login(name, password string) (*User, error) {
	return us.LoginFrom("", name, password)
}

// derive checks password against name's PBKDF2 key, or a dummy's for an
// unknown name (which no password matches), at the same cost.
func (us *Users) derive(name, password string) (*User, error) {
	u, known := us.byName[name]
	h := us.dummy
	if known {
		h = u.hash
	}
	us.derivations.Add(1)
	// The dummy's key matches no password, so an unknown name fails here
	// after one full derivation, as a wrong password does.
	if !h.checkPassword(password) || !known {
		return nil, ErrBadCredentials
	}
	return u, nil
}

// cacheKey is SHA-256(len(name) ‖ name ‖ password ‖ pepper). The length
// keeps ("ab", "c") and ("a", "bc") apart whatever bytes a request's name
// holds; the pepper keeps the keys from being a fast, unsalted hash of the
// password that a memory dump could be searched against.
func (us *Users) cacheKey(name, password string) [32]byte {
	m := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	m.Write(n[:])
	m.Write([]byte(name))
	m.Write([]byte(password))
	m.Write(us.pepper[:])
	var k [32]byte
	m.Sum(k[:0])
	return k
}

// remember is rememberLocked for a caller that does not hold mu.
func (us *Users) remember(key [32]byte, u *User) {
	us.mu.Lock()
	defer us.mu.Unlock()
	us.rememberLocked(key, u)
}

// rememberLocked caches a successful login, evicting an arbitrary entry
// when the cache is full: map iteration starts at a random entry, and any
// eviction costs its user one PBKDF2 at their next request, nothing more.
// The caller holds mu.
func (us *Users) rememberLocked(key [32]byte, u *User) {
	if len(us.cache) >= cacheSize {
		for k := range us.cache {
			delete(us.cache, k)
			break
		}
	}
	us.cache[key] = u
}

// CanalLogin checks a canal client's login: name and hexScramble, the hex
// scramble of the password over seed that canal clients send in
// ClientAuth.password. It returns ErrBadCredentials for an unknown name, a
// malformed scramble or a wrong password.
func (us *Users) CanalLogin(name string, hexScramble, seed []byte) (*User, error) {
	return us.CanalLoginFrom("", name, hexScramble, seed)
}

// CanalLoginFrom is CanalLogin for a client at remote (its address
// without the port; "" if unknown), with failed logins bounded: once
// remote has failed FailBurst times in a row, its further logins are
// refused with an error wrapping ErrTooManyLogins until the allowance
// refills (FailBurst per FailWindow). A scramble is cheap to check, but
// each try is a guess at a password: without the bound a client could
// guess as fast as the connection cap lets it.
//
// Unlike LoginFrom, the bound is the address's alone when it is known:
// a scramble is good for one seed only, so no good login can be cached,
// and a bound on the name would let anyone lock an application out of
// its canal account with ten wrong passwords a minute.
func (us *Users) CanalLoginFrom(remote, name string, hexScramble, seed []byte) (*User, error) {
	keys := []string{"remote:" + remote}
	if remote == "" {
		keys = []string{"user:" + name}
	}
	now := us.now()
	us.mu.Lock()
	k, wait := us.fails.limited(now, keys...)
	us.mu.Unlock()
	if k != "" {
		return nil, tooMany(k, wait)
	}
	u, err := us.canalCheck(name, hexScramble, seed)
	if err != nil {
		us.mu.Lock()
		us.fails.failedKeys(now, keys...)
		us.mu.Unlock()
	}
	return u, err
}

// canalCheck checks a canal scramble, with no bound.
func (us *Users) canalCheck(name string, hexScramble, seed []byte) (*User, error) {
	u, known := us.byName[name]
	h := us.dummy
	if known {
		h = u.hash
	}
	scramble := make([]byte, hex.DecodedLen(len(hexScramble)))
	_, err := hex.Decode(scramble, hexScramble)
	// The check runs for an unknown name too (it is cheap, but its timing
	// should still not set unknown names apart).
	ok := h.checkScramble(scramble, seed)
	if err != nil || !ok || !known {
		return nil, ErrBadCredentials
	}
	return u, nil
}
