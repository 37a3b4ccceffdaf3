package wire

import "time"

// RequestHeader is the header every state-changing call (any method but
// GET, HEAD and OPTIONS) carries, unless its body is application/json or
// application/yaml: a form of another site cannot send it, so a server
// that requires it is not changed by a page an admin happens to open. Its
// value is not checked; the Go client sends "1".
const RequestHeader = "X-Braid-Request"

// Login is what the status page's login form sends (POST /v1/session, as
// application/json): a user of the node's users file.
type Login struct {
	// Username is the user's name in the users file.
	Username string `json:"username"`
	// Password is the user's password, in clear: send it over TLS
	// (--http-tls-cert) wherever the network is not trusted.
	Password string `json:"password"`
}

// Session answers POST and GET /v1/session: who the request logs in as
// (by its session cookie, or its credential), and until when.
type Session struct {
	// User is the user's name.
	User string `json:"user"`
	// Role is the user's role: admin or consumer.
	Role string `json:"role"`
	// Expires is when the session ends; a later call needs a new login.
	// Missing for a request with a credential of its own, not a session.
	Expires time.Time `json:"expires,omitzero"`
}
