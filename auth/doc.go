// Package auth decides who may do what on a braid node: the users of a
// users file, their roles, their password hashes, and the two ways they log
// in.
//
// A users file (YAML, given to braid server --users-file) lists each user
// with a name, a password_hash and a role:
//
//	users:
//	  - name: app1
//	    password_hash: "braid1$…"
//	    role: consumer
//	    destinations: [shop]   # the destinations it may stream and ack; "*" is all
//	  - name: ops
//	    password_hash: "braid1$…"
//	    role: admin            # everything: destinations, cluster, every stream
//
// ParseUsers and LoadUsers check the whole file and report every problem at
// once, each naming the file, the line, the user and the field.
//
// # Password hashes
//
// One password_hash (made by HashPassword, or braid users hash) serves both
// logins:
//
//	braid1$<hex SHA1(SHA1(pw))>$pbkdf2-sha256$<iterations>$<salt>$<key>
//
// salt is 16 random bytes and key the 32-byte PBKDF2-HMAC-SHA256 of the
// password, both base64 (standard alphabet, no padding); iterations is
// 210000 unless the hash says otherwise.
//
// The SHA1(SHA1(pw)) part is what canal's login protocol needs: a canal
// client proves it knows SHA1(pw) by a scramble over a random seed, and the
// server can check that scramble only from SHA1(SHA1(pw)). It is exactly
// what MySQL's mysql_native_password keeps, and exactly as strong: one fast
// hash, unsalted, so anyone who reads the file can try guesses quickly, and
// can log in through canal with it without knowing the password. The users
// file must therefore be kept private (mode 0600, owned by the user braid
// runs as). HTTP logins carry the password itself and are checked against
// the slow, salted PBKDF2 part.
//
// # Logins
//
//   - Login (HTTP: basic auth, or Authorization: Bearer NAME:PASSWORD, read
//     by Credentials) checks the password against the PBKDF2 key. A client
//     that sends its credentials with every request would pay a PBKDF2 per
//     request, so successful logins are remembered in a small in-memory
//     cache, keyed by a SHA-256 of name, password and a random pepper of
//     this process: one PBKDF2 per process and user, not per request.
//   - Failed HTTP logins are bounded (LoginFrom): a name and password
//     that failed within FailWindow fail again from a second cache (keyed
//     the same way, never by the password) without a PBKDF2; a name or a
//     remote address with FailBurst failures in a row is refused
//     (ErrTooManyLogins) without one until its bucket refills, FailBurst
//     per FailWindow, while logins cached as good go on; FailureLog
//     throttles the log lines of failures to one per name and window.
//   - CanalLogin checks a canal client's scramble against SHA1(SHA1(pw)),
//     as canal's own server does.
//   - Lookup finds a user that a peer node has already authenticated.
//
// # Invariants
//
//   - No password, password hash, scramble or token appears in an error
//     this package returns (so none reaches a log); an error names the
//     user, the file and the field only.
//   - Only a login that passed the full PBKDF2 check is cached as good; a
//     failure is remembered only as a failure, for FailWindow.
//   - Every map fed from the network (the caches, the buckets, the log
//     throttle) is bounded.
//   - An unknown user and a wrong password give the same error,
//     ErrBadCredentials, and cost about the same: a login for an unknown
//     name still derives one PBKDF2 key (with a dummy salt), so timing does
//     not tell which names exist. Secret comparisons are constant-time.
//   - A Users never changes after ParseUsers returns, except for its login
//     cache; a new users file is a new Users.
//
// # Concurrency
//
// A *Users is safe for concurrent use. The *User values it hands out are
// shared and read-only: callers must not modify them.
package auth
