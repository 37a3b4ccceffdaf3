package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/auth"
)

// The status page's login, so that a browser never keeps a Basic
// credential a page of another site could ride on:
//
//	POST   /v1/session   wire.Login as application/json → wire.Session and
//	                     the session cookie; no credential needed
//	GET    /v1/session   wire.Session: who the request logs in as (any
//	                     user; an empty one without a users file)
//	DELETE /v1/session   ends the cookie's session and clears the cookie
//
// The cookie (sessionCookie, named for the node) is HttpOnly (no script reads it),
// SameSite=Strict (no request from a page of another site carries it),
// Secure when the HTTP port has TLS, and expires with the session, after
// sessionTTL. Sessions live in this node's memory: the page talks only to
// the node that served it, and a restart logs everyone out. guard takes a
// session where a request carries no Authorization header; the CLI's
// basic auth and bearer tokens work as before. No answer carries a Basic
// challenge (WWW-Authenticate: Basic), which would make a browser ask for
// a user and then send it on every request to the node, a page of another
// site's requests included.

// sessionCookie names the cookie that carries a session's id on node:
// braid_session_ and the node's name (cookie-safe). Browsers keep cookies
// by host, not port, so nodes on one host (every test cluster, a laptop's
// three) would otherwise log each other's pages out.
func sessionCookie(node string) string {
	b := []byte(node)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return "braid_session_" + string(b)
}

// sessionTTL is how long a session lasts after its login.
const sessionTTL = 12 * time.Hour

// maxSessions bounds the sessions a node keeps; past it a login ends the
// session closest to its end.
const maxSessions = 1024

// sessions are the node's open sessions, by id. Safe for concurrent use.
type sessions struct {
	mu   sync.Mutex
	byID map[string]session
}

type session struct {
	user    string
	expires time.Time
}

// open starts a session of user at now and returns its id.
func (s *sessions) open(user string, now time.Time) (string, session) {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	id := base64.RawURLEncoding.EncodeToString(b)
	ss := session{user: user, expires: now.Add(sessionTTL)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]session{}
	}
	if len(s.byID) >= maxSessions {
		var first string
		for k, v := range s.byID {
			if !v.expires.After(now) {
				delete(s.byID, k)
			} else if first == "" || v.expires.Before(s.byID[first].expires) {
				first = k
			}
		}
		if len(s.byID) >= maxSessions {
			delete(s.byID, first)
		}
	}
	s.byID[id] = ss
	return id, ss
}

// lookup returns the unexpired session id names.
func (s *sessions) lookup(id string, now time.Time) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	if ok && !ss.expires.After(now) {
		delete(s.byID, id)
		return session{}, false
	}
	return ss, ok
}

// close ends the session id names, if any.
func (s *sessions) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// sessionID is the session cookie r carries ("" without one).
func (n *Node) sessionID(r *http.Request) string {
	c, err := r.Cookie(sessionCookie(n.cfg.Name))
	if err != nil {
		return ""
	}
	return c.Value
}

// setSessionCookie sets (or, with a zero expiry, clears) the cookie.
func (n *Node) setSessionCookie(w http.ResponseWriter, id string, expires time.Time) {
	c := &http.Cookie{Name: sessionCookie(n.cfg.Name), Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: n.cfg.HTTPTLS != nil}
	if expires.IsZero() {
		c.MaxAge = -1
	} else {
		c.Expires = expires
		c.MaxAge = int(time.Until(expires).Seconds())
	}
	http.SetCookie(w, c)
}

// maxLogin bounds a login request's body.
const maxLogin = 4 << 10

// login answers POST /v1/session.
func (n *Node) login(w http.ResponseWriter, r *http.Request) {
	if n.cfg.Users == nil {
		writeError(w, http.StatusNotFound, "this node has no users file: every call is let in without a login")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "a login is sent as application/json: {\"username\": ..., \"password\": ...}")
		return
	}
	var l wire.Login
	if err := json.NewDecoder(io.LimitReader(r.Body, maxLogin)).Decode(&l); err != nil || l.Username == "" || l.Password == "" {
		writeError(w, http.StatusBadRequest, "a login is a JSON object {\"username\": ..., \"password\": ...}, both set")
		return
	}
	u, err := n.cfg.Users.LoginFrom(remoteHost(r), l.Username, l.Password)
	if err != nil {
		// Bounded as the API's logins are (loginFailed), without the
		// header that would make a browser ask for a password itself.
		if ok, suppressed := n.cfg.Users.FailureLog(l.Username); ok {
			n.log.Warn("refused a login: bad credentials", "user", l.Username, "remote", r.RemoteAddr, "unlogged_before", suppressed)
		}
		if errors.Is(err, auth.ErrTooManyLogins) {
			w.Header().Set("Retry-After", strconv.Itoa(int(auth.FailWindow.Seconds()/auth.FailBurst)))
			writeError(w, http.StatusTooManyRequests, "%v", err)
			return
		}
		writeError(w, http.StatusUnauthorized, "wrong name or password")
		return
	}
	id, ss := n.sessions.open(u.Name, time.Now())
	n.setSessionCookie(w, id, ss.expires)
	n.log.Info("a user logged in to the status page", "user", u.Name, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, wire.Session{User: u.Name, Role: string(u.Role), Expires: ss.expires})
}

// whoami answers GET /v1/session.
func (n *Node) whoami(w http.ResponseWriter, r *http.Request) {
	u := requestUser(r)
	if u == nil { // no users file: no one logs in
		writeJSON(w, http.StatusOK, wire.Session{})
		return
	}
	st := wire.Session{User: u.Name, Role: string(u.Role)}
	if ss, ok := n.sessions.lookup(n.sessionID(r), time.Now()); ok && r.Header.Get("Authorization") == "" {
		st.Expires = ss.expires
	}
	writeJSON(w, http.StatusOK, st)
}

// logout answers DELETE /v1/session.
func (n *Node) logout(w http.ResponseWriter, r *http.Request) {
	if id := n.sessionID(r); id != "" {
		n.sessions.close(id)
	}
	n.setSessionCookie(w, "", time.Time{})
	w.WriteHeader(http.StatusNoContent)
}
