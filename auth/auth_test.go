package auth

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	canalclient "github.com/withlin/canal-go/client"
)

// fastHashes makes HashPassword cheap for the test: the default 210000
// iterations cost tens of milliseconds per hash.
func fastHashes(t *testing.T) {
	t.Helper()
	old := hashIterations
	hashIterations = minIterations
	t.Cleanup(func() { hashIterations = old })
}

func mustHash(t *testing.T, password string) string {
	t.Helper()
	h, err := HashPassword(password)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// testUsers is a file with an admin "ops" (password "opspw"), a consumer
// "app1" of shop (password "app1pw") and a consumer "all" of every
// destination (password "allpw").
func testUsers(t *testing.T) *Users {
	t.Helper()
	fastHashes(t)
	us, err := ParseUsers(fmt.Appendf(nil, `
users:
  - name: ops
    password_hash: %q
    role: admin
  - name: app1
    password_hash: %q
    role: consumer
    destinations: [shop]
  - name: all
    password_hash: %q
    role: consumer
    destinations: ["*"]
`, mustHash(t, "opspw"), mustHash(t, "app1pw"), mustHash(t, "allpw")))
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// TestHashFormat: a hash has the documented six parts, the default 210000
// iterations and a fresh salt each time; an empty password is refused.
func TestHashFormat(t *testing.T) {
	h := mustHash(t, "secret") // the real default, once
	parts := strings.Split(h, "$")
	if len(parts) != 6 || parts[0] != "braid1" || parts[2] != "pbkdf2-sha256" || parts[3] != "210000" {
		t.Fatalf("hash %q is not braid1$sha1sha1$pbkdf2-sha256$210000$salt$key", h)
	}
	want := stage2("secret")
	if parts[1] != hex.EncodeToString(want[:]) {
		t.Errorf("part 2 is not hex SHA1(SHA1(pw))")
	}
	if len(parts[4]) != 22 || len(parts[5]) != 43 {
		t.Errorf("salt %d and key %d base64 characters, want 22 and 43", len(parts[4]), len(parts[5]))
	}
	parsed, err := parseHash(h)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.String() != h {
		t.Errorf("parse then format changed the hash")
	}
	if !parsed.checkPassword("secret") || parsed.checkPassword("Secret") {
		t.Errorf("the PBKDF2 part does not check the password")
	}
	fastHashes(t)
	if a, b := mustHash(t, "secret"), mustHash(t, "secret"); a == b {
		t.Errorf("two hashes of one password are equal: no fresh salt")
	}
	if _, err := HashPassword(""); err == nil {
		t.Errorf("an empty password was hashed")
	}
}

// TestLogin: the round trip HashPassword → Login passes with the password
// and fails, with the one error, for a wrong password or an unknown name,
// which still costs a derivation.
func TestLogin(t *testing.T) {
	us := testUsers(t)
	u, err := us.Login("app1", "app1pw")
	if err != nil || u.Name != "app1" || u.Role != Consumer {
		t.Fatalf("Login(app1, right password) = %v, %v", u, err)
	}
	for _, c := range []struct{ name, pw string }{
		{"app1", "app1PW"}, {"app1", ""}, {"app1", "opspw"}, {"nobody", "app1pw"}, {"", ""},
	} {
		before := us.derivations.Load()
		u, err := us.Login(c.name, c.pw)
		if !errors.Is(err, ErrBadCredentials) || u != nil {
			t.Errorf("Login(%q, %q) = %v, %v; want ErrBadCredentials", c.name, c.pw, u, err)
		}
		if err != nil && c.pw != "" && strings.Contains(err.Error(), c.pw) {
			t.Errorf("the error repeats the password: %v", err)
		}
		if us.derivations.Load() != before+1 {
			t.Errorf("Login(%q, …) derived %d keys, want 1 (an unknown name costs what a wrong password does)", c.name, us.derivations.Load()-before)
		}
	}
}

// TestLoginCache: a second login with the same credentials is answered
// without a PBKDF2, and so is a second failure of the same name and
// password (within FailWindow); the cache stays bounded.
func TestLoginCache(t *testing.T) {
	us := testUsers(t)
	for range 3 {
		if _, err := us.Login("ops", "opspw"); err != nil {
			t.Fatal(err)
		}
	}
	if n := us.derivations.Load(); n != 1 {
		t.Errorf("three logins derived %d keys, want 1", n)
	}
	for range 3 {
		us.Login("ops", "wrong")
		us.Login("ghost", "opspw")
	}
	if n := us.derivations.Load(); n != 3 {
		t.Errorf("six failed logins of two pairs derived %d keys, want 2", n-1)
	}
	// A cached login is only for its own name and password.
	if _, err := us.Login("app1", "opspw"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("app1 logged in with ops's cached password")
	}

	u, _ := us.Lookup("ops")
	for i := range 3 * cacheSize {
		us.remember(us.cacheKey("ops", fmt.Sprint(i)), u)
	}
	if n := len(us.cache); n > cacheSize {
		t.Errorf("the cache holds %d entries, want at most %d", n, cacheSize)
	}
}

// TestLoginConcurrent: logins from many goroutines agree (run with -race).
func TestLoginConcurrent(t *testing.T) {
	us := testUsers(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			pw := "app1pw"
			if i%2 == 1 {
				pw = "nope"
			}
			_, err := us.Login("app1", pw)
			if (err == nil) != (i%2 == 0) {
				t.Errorf("Login %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// canalScramble is a canal client's ClientAuth.password, computed as canal's
// protocol spells it: hex(SHA1(pw) XOR SHA1(seed ‖ SHA1(SHA1(pw)))).
func canalScramble(password string, seed []byte) []byte {
	stage1 := sha1.Sum([]byte(password))
	stage2 := sha1.Sum(stage1[:])
	h := sha1.New()
	h.Write(seed)
	h.Write(stage2[:])
	out := h.Sum(nil)
	for i := range out {
		out[i] ^= stage1[i]
	}
	return []byte(hex.EncodeToString(out))
}

// TestCanalLogin: a scramble as canal's clients compute it passes; one of
// a wrong password, over another seed, for an unknown user or malformed,
// fails with ErrBadCredentials.
func TestCanalLogin(t *testing.T) {
	us := testUsers(t)
	seed := []byte("8bytesd!")
	good := canalScramble("app1pw", seed)

	// canal-go's own client must agree with the spelled-out scramble.
	pw := []byte("app1pw")
	if got := canalclient.ByteSliceToHexString(canalclient.Scramble411(&pw, &seed)); got != string(good) {
		t.Fatalf("canal-go scrambles to %s, the test to %s", got, good)
	}

	u, err := us.CanalLogin("app1", good, seed)
	if err != nil || u.Name != "app1" {
		t.Fatalf("CanalLogin(app1, good scramble) = %v, %v", u, err)
	}
	if _, err := us.CanalLogin("app1", []byte(strings.ToUpper(string(good))), seed); err != nil {
		t.Errorf("upper-case hex refused: %v", err)
	}
	for _, c := range []struct {
		why, name string
		scramble  []byte
	}{
		{"wrong password", "app1", canalScramble("app1PW", seed)},
		{"another seed", "app1", canalScramble("app1pw", []byte("otherseed"))},
		{"another user's password", "app1", canalScramble("opspw", seed)},
		{"unknown user", "ghost", good},
		{"not hex", "app1", []byte("zz" + string(good[2:]))},
		{"odd length", "app1", good[:len(good)-1]},
		{"too short", "app1", good[:20]},
		{"empty", "app1", nil},
	} {
		if u, err := us.CanalLogin(c.name, c.scramble, seed); !errors.Is(err, ErrBadCredentials) || u != nil {
			t.Errorf("%s: CanalLogin = %v, %v; want ErrBadCredentials", c.why, u, err)
		}
	}
}

// TestMayRead: an admin reads everything, a consumer what it lists, and
// "*" is every destination.
func TestMayRead(t *testing.T) {
	us := testUsers(t)
	get := func(name string) *User {
		u, ok := us.Lookup(name)
		if !ok {
			t.Fatalf("Lookup(%q) found no user", name)
		}
		return u
	}
	ops, app1, all := get("ops"), get("app1"), get("all")
	for _, c := range []struct {
		u    *User
		dest string
		want bool
	}{
		{ops, "shop", true}, {ops, "billing", true},
		{app1, "shop", true}, {app1, "billing", false}, {app1, "*", false}, {app1, "", false},
		{all, "shop", true}, {all, "billing", true},
	} {
		if got := c.u.MayRead(c.dest); got != c.want {
			t.Errorf("%s.MayRead(%q) = %v, want %v", c.u.Name, c.dest, got, c.want)
		}
	}
	if !ops.IsAdmin() || app1.IsAdmin() {
		t.Errorf("IsAdmin: ops %v, app1 %v", ops.IsAdmin(), app1.IsAdmin())
	}
	if _, ok := us.Lookup("ghost"); ok {
		t.Errorf("Lookup found a user not in the file")
	}
	if got := us.List(); len(got) != 3 || got[0].Name != "ops" || got[2].Name != "all" {
		t.Errorf("List is not the file's users in order: %v", got)
	}
}

// TestParseUsersErrors: one parse reports every problem of a file, each on
// its own line with the line number, the user and the field, and never the
// hash.
func TestParseUsersErrors(t *testing.T) {
	fastHashes(t)
	good := mustHash(t, "pw")
	tampered := strings.Replace(good, "$1000$", "$ten$", 1)
	_, err := ParseUsers(fmt.Appendf(nil, `users:
  - name: ops
    password_hash: %[1]q
    role: root
  - password_hash: %[1]q
    role: admin
  - name: ops
    password_hash: %[1]q
    role: admin
  - name: app1
    password_hash: %[2]q
    role: consumer
    destinations: [shop]
  - name: app2
    password_hash: %[1]q
    role: consumer
  - name: app3
    pasword_hash: %[1]q
    role: consumer
    destinations: [shop]
  - name: "a:b"
    password_hash: %[1]q
    role: consumer
    destinations: [shop]
  - name: app4
    password_hash: [x]
    role: consumer
    destinations: shop
extra: 1
`, good, tampered))
	if err == nil {
		t.Fatal("ParseUsers accepted the file")
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{
		`line 4: user 1 "ops": role "root" is unknown: use admin or consumer`,
		`line 5: user 2: name is missing`,
		`line 7: user 3 "ops": user 1 (line 2) has that name too`,
		`line 11: user 4 "app1": password_hash is not a braid password hash (part 4 is not an iteration count`,
		"make one with `braid users hash`",
		`line 14: user 5 "app2": a consumer needs destinations`,
		`line 18: user 6 "app3": unknown key "pasword_hash"`,
		`user 6 "app3": password_hash is missing`,
		`line 21: user 7 "a:b": name "a:b" holds a colon`,
		`line 26: user 8 "app4": password_hash must be a string`,
		`line 28: user 8 "app4": destinations must be a list`,
		`line 29: unknown key "extra"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q", want)
		}
	}
	if n := len(strings.Split(msg, "\n")); n != 11 {
		t.Errorf("%d lines of errors, want 11", n)
	}
	parts := strings.Split(good, "$")
	for _, secret := range []string{parts[1], parts[4], parts[5]} {
		if strings.Contains(msg, secret) {
			t.Errorf("the error holds part of a hash")
		}
	}
}

// TestParseUsersEmpty: a file with no users is an error, not a node no one
// can log in to.
func TestParseUsersEmpty(t *testing.T) {
	for _, body := range []string{"", "# nothing\n", "users:\n", "users: []\n", "users: {}\n", "- a\n", "users: [\n"} {
		if _, err := ParseUsers([]byte(body)); err == nil {
			t.Errorf("ParseUsers(%q) accepted it", body)
		} else if strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("ParseUsers(%q): more than one line: %v", body, err)
		}
	}
}

// TestLoadUsers: errors name the file, and a missing file says so.
func TestLoadUsers(t *testing.T) {
	fastHashes(t)
	path := filepath.Join(t.TempDir(), "users.yaml")
	body := fmt.Sprintf("users:\n  - name: ops\n    password_hash: %q\n    role: boss\n", mustHash(t, "pw"))
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadUsers(path); err == nil || !strings.Contains(err.Error(), path+":4: user 1 \"ops\": role") {
		t.Errorf("LoadUsers: %v; want the file, line, user and field", err)
	}
	os.WriteFile(path, []byte(strings.Replace(body, "boss", "admin", 1)), 0o600)
	if us, err := LoadUsers(path); err != nil {
		t.Errorf("LoadUsers: %v", err)
	} else if _, err := us.Login("ops", "pw"); err != nil {
		t.Errorf("Login after LoadUsers: %v", err)
	}
	if _, err := LoadUsers(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadUsers(missing) = %v, want ErrNotExist", err)
	}
}

// TestCredentials: basic auth and a bearer NAME:PASSWORD are read; other
// Authorization headers are not credentials.
func TestCredentials(t *testing.T) {
	for _, c := range []struct {
		header   string
		name, pw string
		ok       bool
	}{
		{"", "", "", false},
		{"Bearer app1:s3:cret", "app1", "s3:cret", true},
		{"bearer app1:pw", "app1", "pw", true},
		{"Bearer app1", "", "", false},
		{"Bearer :pw", "", "", false},
		{"Token app1:pw", "", "", false},
		{"Basic !!!", "", "", false},
	} {
		r := httptest.NewRequest("GET", "/v1/cluster", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		name, pw, ok := Credentials(r)
		if name != c.name || pw != c.pw || ok != c.ok {
			t.Errorf("Credentials(%q) = %q, %q, %v; want %q, %q, %v", c.header, name, pw, ok, c.name, c.pw, c.ok)
		}
	}
	r := httptest.NewRequest("GET", "/v1/cluster", nil)
	r.SetBasicAuth("ops", "pa:ss")
	if name, pw, ok := Credentials(r); name != "ops" || pw != "pa:ss" || !ok {
		t.Errorf("basic auth: %q, %q, %v", name, pw, ok)
	}
}

// TestToken: NAME:PASSWORD with a trailing newline trimmed; anything else
// is one line of error that does not repeat the token.
func TestToken(t *testing.T) {
	for in, want := range map[string][2]string{
		"app1:pw":      {"app1", "pw"},
		"app1:pw\n":    {"app1", "pw"},
		"app1:pw\r\n":  {"app1", "pw"},
		"app1:p:w x\n": {"app1", "p:w x"},
	} {
		name, pw, err := Token(in)
		if err != nil || name != want[0] || pw != want[1] {
			t.Errorf("Token(%q) = %q, %q, %v; want %q, %q", in, name, pw, err, want[0], want[1])
		}
	}
	for _, in := range []string{"", "\n", "hunter2", ":hunter2", "app1:", "app1:hunter2\nmore"} {
		_, _, err := Token(in)
		if err == nil {
			t.Errorf("Token(%q) accepted it", in)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "\n") || !strings.Contains(msg, "NAME:PASSWORD") {
			t.Errorf("Token(%q): %q; want one line naming NAME:PASSWORD, not the token", in, msg)
		}
	}
}

// TestFailedLoginsBounded: the probe's finding, each wrong password a
// PBKDF2 of its own. A pair that failed fails again without one; a name
// or an address that failed FailBurst times is refused (ErrTooManyLogins)
// without one until the window refills; a login cached as good still
// passes; the log is told of one failure per name and window, FailBurst
// in all.
func TestFailedLoginsBounded(t *testing.T) {
	us := testUsers(t)
	now := time.Unix(1_800_000_000, 0)
	us.now = func() time.Time { return now }
	if _, err := us.LoginFrom("10.0.0.1", "ops", "opspw"); err != nil { // cached as good
		t.Fatal(err)
	}
	base := us.derivations.Load()
	for range 100 {
		us.LoginFrom("10.0.0.9", "app1", "guess")
	}
	if n := us.derivations.Load() - base; n != 1 {
		t.Errorf("100 tries of one wrong password derived %d keys, want 1", n)
	}

	base = us.derivations.Load()
	var limited int
	for i := range 1000 {
		_, err := us.LoginFrom("10.0.0.9", "app1", fmt.Sprint("guess-", i))
		switch {
		case errors.Is(err, ErrTooManyLogins):
			limited++
			if limited == 1 && (!strings.Contains(err.Error(), "retry in") || strings.Contains(err.Error(), "guess")) {
				t.Errorf("the refusal %q says no retry time, or repeats the password", err)
			}
		case !errors.Is(err, ErrBadCredentials):
			t.Fatalf("try %d: %v", i, err)
		}
	}
	if n := us.derivations.Load() - base; n != FailBurst-1 || limited != 1000-(FailBurst-1) {
		t.Errorf("1000 guesses derived %d keys, %d refused: want %d derivations", n, limited, FailBurst-1)
	}
	// Another name from the limited address is refused too; the good
	// login cached before still passes; the right password of the
	// limited name waits for the window.
	if _, err := us.LoginFrom("10.0.0.9", "ghost", "x"); !errors.Is(err, ErrTooManyLogins) {
		t.Errorf("another name from the limited address: %v", err)
	}
	if _, err := us.LoginFrom("10.0.0.9", "ops", "opspw"); err != nil {
		t.Errorf("a cached good login from a limited address: %v", err)
	}
	if _, err := us.LoginFrom("10.0.0.2", "app1", "app1pw"); !errors.Is(err, ErrTooManyLogins) {
		t.Errorf("the limited name's right password from elsewhere: %v", err)
	}
	now = now.Add(FailWindow / FailBurst)
	if _, err := us.LoginFrom("10.0.0.2", "app1", "app1pw"); err != nil {
		t.Errorf("after a refill, the right password: %v", err)
	}

	// The log: one line per name and window, FailBurst in all.
	lines, total := 0, 0
	for i := range 500 {
		if ok, _ := us.FailureLog(fmt.Sprint("name-", i%50)); ok {
			lines++
		}
		total++
	}
	if lines != FailBurst {
		t.Errorf("%d failures logged %d lines, want %d", total, lines, FailBurst)
	}
	now = now.Add(FailWindow)
	if ok, suppressed := us.FailureLog("name-0"); !ok || suppressed != total-FailBurst {
		t.Errorf("the next window's first line: %v, suppressed %d, want %d", ok, suppressed, total-FailBurst)
	}

	// The maps stay bounded whatever names and addresses come.
	us.mu.Lock()
	for i := range 3 * limitEntries {
		us.fails.failed(now, us.cacheKey(fmt.Sprint("n", i), "x"), fmt.Sprint("user:n", i), fmt.Sprint("remote:10.1.", i))
	}
	us.mu.Unlock()
	if len(us.fails.pairs) > limitEntries || len(us.fails.buckets) > limitEntries {
		t.Errorf("%d pairs, %d buckets: want at most %d each", len(us.fails.pairs), len(us.fails.buckets), limitEntries)
	}
}

// TestCanalLoginsBounded: canal's scramble costs no PBKDF2, but each
// try is a guess at a password. An address that failed FailBurst times
// is refused (ErrTooManyLogins), even with the right password, until its
// allowance refills; another address logs the same user in meanwhile, so
// wrong guesses cannot lock an application out of its account.
func TestCanalLoginsBounded(t *testing.T) {
	us := testUsers(t)
	now := time.Unix(1_800_000_000, 0)
	us.now = func() time.Time { return now }
	seed := []byte("8bytesd!")
	good := canalScramble("app1pw", seed)

	refused := 0
	for i := range 1000 {
		_, err := us.CanalLoginFrom("10.0.0.9", "app1", canalScramble(fmt.Sprint("guess-", i), seed), seed)
		switch {
		case errors.Is(err, ErrTooManyLogins):
			refused++
		case !errors.Is(err, ErrBadCredentials):
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if refused != 1000-FailBurst {
		t.Errorf("1000 guesses from one address: %d refused before the check, want %d", refused, 1000-FailBurst)
	}
	if _, err := us.CanalLoginFrom("10.0.0.9", "app1", good, seed); !errors.Is(err, ErrTooManyLogins) || !strings.Contains(err.Error(), "address 10.0.0.9") {
		t.Errorf("the right password from the limited address: %v; want ErrTooManyLogins naming the address", err)
	}
	if u, err := us.CanalLoginFrom("10.0.0.2", "app1", good, seed); err != nil || u == nil {
		t.Errorf("the same user from another address: %v", err)
	}
	now = now.Add(FailWindow / FailBurst)
	if _, err := us.CanalLoginFrom("10.0.0.9", "app1", good, seed); err != nil {
		t.Errorf("after a refill, the right password: %v", err)
	}
}
