package cluster

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/auth"
)

// Who may do what, with Config.Users (without it, anyone may do
// anything):
//
//	admin      everything: destinations (create, delete, show), the
//	           cluster's status, every destination's state, stream, ack
//	consumer   the destinations listed for it: list (those only), show,
//	           state, stream and ack, over HTTP and canal
//
// An HTTP call without a valid credential (a user's, or the status
// page's session cookie: session.go) gets 401, one its user may not make
// 403. Calls between nodes go through the node port, whose mutual
// TLS is their credential (peer.go).

// need is what a route asks of its caller.
type need int

const (
	needUser  need = iota // any user
	needAdmin             // an admin
	needRead              // a user who may read the destination {name}
)

type userKey struct{}

// requestUser is the authenticated user of r; nil without Config.Users.
func requestUser(r *http.Request) *auth.User {
	u, _ := r.Context().Value(userKey{}).(*auth.User)
	return u
}

// requestUserName is the name of r's user ("" without Config.Users): the
// owner its client ids count toward (native.WithOwner).
func requestUserName(r *http.Request) string {
	if u := requestUser(r); u != nil {
		return u.Name
	}
	return ""
}

// loginFailed answers a failed login: 429 once the name or the address
// failed too many lately (auth.LoginFrom), else 401. Its log line is
// throttled (auth.Users.FailureLog): a flood of bad logins is one line
// per name and minute, a few in all, and a count of the rest.
func (n *Node) loginFailed(w http.ResponseWriter, r *http.Request, name string, err error) {
	if ok, suppressed := n.cfg.Users.FailureLog(name); ok {
		n.log.Warn("refused an HTTP call: bad credentials", "user", name, "remote", r.RemoteAddr, "path", r.URL.Path,
			"limited", errors.Is(err, auth.ErrTooManyLogins), "unlogged_before", suppressed)
	}
	if errors.Is(err, auth.ErrTooManyLogins) {
		w.Header().Set("Retry-After", strconv.Itoa(int(auth.FailWindow.Seconds()/auth.FailBurst)))
		writeError(w, http.StatusTooManyRequests, "%v", err)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="braid"`)
	writeError(w, http.StatusUnauthorized, "user %q: wrong name or password", name)
}

// remoteHost is r's client address without its port.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// guard serves h only to callers with what need asks.
func (n *Node) guard(need need, h http.HandlerFunc) http.Handler {
	if n.cfg.Users == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := n.caller(w, r)
		if !ok {
			return
		}
		switch dest := r.PathValue("name"); {
		case need == needAdmin && !u.IsAdmin():
			writeError(w, http.StatusForbidden, "user %s is a %s: %s %s needs an admin", u.Name, u.Role, r.Method, r.URL.Path)
			return
		case need == needRead && !u.MayRead(dest):
			writeError(w, http.StatusForbidden, "user %s may not read destination %s: an admin lists it in the user's destinations in the users file", u.Name, dest)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// caller is the user r authenticates as: by its Authorization header
// (basic auth, or a bearer NAME:PASSWORD), else by its session cookie
// (session.go). Without either, or with a wrong one, it answers 401 and
// returns false. The 401 challenges with Bearer, never Basic: a Basic
// challenge makes a browser ask for a user and then send the credential
// on every request to the node, those of pages of other sites included.
func (n *Node) caller(w http.ResponseWriter, r *http.Request) (*auth.User, bool) {
	name, pass, ok := auth.Credentials(r)
	if !ok && r.Header.Get("Authorization") == "" {
		if ss, found := n.sessions.lookup(n.sessionID(r), time.Now()); found {
			if u, known := n.cfg.Users.Lookup(ss.user); known {
				return u, true
			}
		}
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="braid"`)
		writeError(w, http.StatusUnauthorized, "this node needs a user's credential (basic auth or Authorization: Bearer NAME:PASSWORD), or log in on the status page")
		return nil, false
	}
	u, err := n.cfg.Users.LoginFrom(remoteHost(r), name, pass)
	if err != nil {
		n.loginFailed(w, r, name, err)
		return nil, false
	}
	return u, true
}

// canalConfig is the node's canal server's: canal's login against
// Config.Users when set (else the one CanalUser account), and relays to
// a destination's owner through the node port.
func (n *Node) canalConfig() canal.Config {
	cfg := canal.Config{Registry: n.reg, User: n.cfg.CanalUser, Password: n.cfg.CanalPassword,
		Logger: n.log.With("part", "canal"), Forward: n.canalOwner,
		DialOwner: func(ctx context.Context, addr string) (net.Conn, error) { return n.dialPeer(ctx, addr, peerCanal) }}
	if us := n.cfg.Users; us != nil {
		cfg.Login = func(remote, user string, hexScramble, seed []byte) (func(string) bool, error) {
			u, err := us.CanalLoginFrom(remote, user, hexScramble, seed)
			if err != nil {
				return nil, err
			}
			return u.MayRead, nil
		}
		cfg.PeerUser = func(user string) (func(string) bool, bool) {
			u, ok := us.Lookup(user)
			if !ok {
				return nil, false
			}
			return u.MayRead, true
		}
	}
	return cfg
}
