package auth

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

const (
	// hashScheme is a password_hash's first field; a future format gets a
	// new one.
	hashScheme = "braid1"
	// kdfName names the slow hash of a password_hash.
	kdfName = "pbkdf2-sha256"
	// defaultIterations is the PBKDF2 iteration count HashPassword uses:
	// OWASP's 2023 figure for PBKDF2-HMAC-SHA256.
	defaultIterations = 210000
	// minIterations and maxIterations bound the counts a users file may
	// give: fewer makes guessing cheap, more makes every login (and every
	// unknown name) a denial of service.
	minIterations = 1000
	maxIterations = 100_000_000
	saltLen       = 16
	keyLen        = sha256.Size
)

// hashIterations is what HashPassword uses; tests lower it for speed.
var hashIterations = defaultIterations

// passwordHash is a parsed password_hash.
type passwordHash struct {
	// stage2 is SHA1(SHA1(pw)), what canal's login checks against.
	stage2 [sha1.Size]byte
	iter   int
	salt   []byte
	// key is PBKDF2-HMAC-SHA256(pw, salt, iter), what HTTP logins check.
	key []byte
}

// HashPassword returns the password_hash of password for a users file,
// with a fresh random salt and 210000 PBKDF2 iterations.
func HashPassword(password string) (string, error) {
	if password == "" {
		return "", errors.New("auth: the password is empty: choose a non-empty one")
	}
	salt := make([]byte, saltLen)
	rand.Read(salt) // never fails (crypto/rand)
	key, err := pbkdf2.Key(sha256.New, password, salt, hashIterations, keyLen)
	if err != nil {
		return "", fmt.Errorf("auth: deriving the password's key: %w", err)
	}
	h := passwordHash{stage2: stage2(password), iter: hashIterations, salt: salt, key: key}
	return h.String(), nil
}

// String is h in the users file's format.
func (h *passwordHash) String() string {
	b64 := base64.RawStdEncoding
	return strings.Join([]string{
		hashScheme,
		hex.EncodeToString(h.stage2[:]),
		kdfName,
		strconv.Itoa(h.iter),
		b64.EncodeToString(h.salt),
		b64.EncodeToString(h.key),
	}, "$")
}

// parseHash parses a password_hash. Its error says which part is wrong,
// never what the part holds.
func parseHash(s string) (*passwordHash, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 {
		return nil, fmt.Errorf("has %d $-separated parts, want 6", len(parts))
	}
	if parts[0] != hashScheme {
		return nil, fmt.Errorf("does not start with %s$", hashScheme)
	}
	var h passwordHash
	if n, err := hex.Decode(h.stage2[:], []byte(parts[1])); err != nil || n != sha1.Size || len(parts[1]) != 2*sha1.Size {
		return nil, fmt.Errorf("part 2 is not %d hex digits", 2*sha1.Size)
	}
	if parts[2] != kdfName {
		return nil, fmt.Errorf("part 3 is not %s", kdfName)
	}
	iter, err := strconv.Atoi(parts[3])
	if err != nil || iter < minIterations || iter > maxIterations {
		return nil, fmt.Errorf("part 4 is not an iteration count from %d to %d", minIterations, maxIterations)
	}
	h.iter = iter
	b64 := base64.RawStdEncoding
	if h.salt, err = b64.DecodeString(parts[4]); err != nil || len(h.salt) != saltLen {
		return nil, fmt.Errorf("part 5 is not a %d-byte salt in unpadded base64", saltLen)
	}
	if h.key, err = b64.DecodeString(parts[5]); err != nil || len(h.key) != keyLen {
		return nil, fmt.Errorf("part 6 is not a %d-byte key in unpadded base64", keyLen)
	}
	return &h, nil
}

// stage2 is SHA1(SHA1(password)), MySQL 4.1's stored form.
func stage2(password string) [sha1.Size]byte {
	stage1 := sha1.Sum([]byte(password))
	return sha1.Sum(stage1[:])
}

// checkPassword reports whether password derives h's key. It costs one
// PBKDF2 whatever the answer.
func (h *passwordHash) checkPassword(password string) bool {
	key, err := pbkdf2.Key(sha256.New, password, h.salt, h.iter, keyLen)
	if err != nil {
		// Only FIPS-only mode refuses a derivation braid asks for; a login
		// that cannot be checked fails.
		return false
	}
	return subtle.ConstantTimeCompare(key, h.key) == 1
}

// checkScramble reports whether scramble is canal's (MySQL 4.1's) proof of
// the password for seed: canal's client sends SHA1(pw) XOR SHA1(seed ‖
// SHA1(SHA1(pw))), so XOR with SHA1(seed ‖ stage2) gives back SHA1(pw),
// whose SHA1 must be stage2.
func (h *passwordHash) checkScramble(scramble, seed []byte) bool {
	if len(scramble) != sha1.Size {
		return false
	}
	m := sha1.New()
	m.Write(seed)
	m.Write(h.stage2[:])
	stage1 := m.Sum(nil)
	for i := range stage1 {
		stage1[i] ^= scramble[i]
	}
	got := sha1.Sum(stage1)
	return subtle.ConstantTimeCompare(got[:], h.stage2[:]) == 1
}
