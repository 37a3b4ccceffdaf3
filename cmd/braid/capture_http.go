package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/auth"
)

// capture's HTTP port (--http-port) serves what a server node's does for
// its one destination, behind the same rules: native.Browsers refuses a
// Host that is not the machine's and a change a form of another site
// could send, and with --users-file every call but /healthz and /readyz
// needs a user of that file, as on a server (admin for changes, consumer
// for the destinations it lists). The users file, not a token of its own,
// because the CLI already sends its users' credentials ($BRAID_TOKEN,
// --token-file) to servers: braid tail and braid ddl work the same against
// either, the file keeps hashes only, and a consumer may stream without
// being able to skip DDL or run verify. Beyond loopback capture refuses to
// start without it (checkExposed).
//
//	GET /healthz   200 while the process serves HTTP
//	GET /readyz    200 while its destination runs; else 503 with the reason

// loopbackListen reports whether capture's --listen address keeps its
// ports on this machine: a loopback IP, or localhost.
func loopbackListen(listen string) bool {
	if strings.EqualFold(listen, "localhost") {
		return true
	}
	ip := net.ParseIP(listen)
	return ip != nil && ip.IsLoopback()
}

// checkExposed refuses an HTTP port beyond loopback without users; its
// error is the one line capture prints.
func checkExposed(o serveOptions) error {
	if o.httpPort > 0 && o.users == nil && !loopbackListen(o.listen) {
		return fmt.Errorf("--listen %s serves the HTTP API beyond this machine, where anyone who reaches it could read the stream and skip DDL: give --users-file FILE (braid users hash makes its hashes; clients log in as with a server), or --listen 127.0.0.1", o.listen)
	}
	return nil
}

// captureHealth serves /healthz and /readyz; ready reports why the
// destination is not served (nil: it is).
func captureHealth(mux *http.ServeMux, dest string, ready func() error) {
	name := "capture " + dest
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, http.StatusOK, wire.Health{Node: name, Ready: true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			writeHealth(w, http.StatusServiceUnavailable, wire.Health{Node: name, Reasons: []string{err.Error()}})
			return
		}
		writeHealth(w, http.StatusOK, wire.Health{Node: name, Ready: true})
	})
}

func writeHealth(w http.ResponseWriter, status int, h wire.Health) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(h)
}

// captureNeed is what a route of capture's API asks of its caller.
type captureNeed int

const (
	needAnyUser captureNeed = iota
	needReader              // a user who may read the destination {name}
	needAnAdmin
)

// usersGuard serves h to the users of us a route lets in (nil us: to
// everyone), with the same roles as a server node (cluster/access.go).
func usersGuard(us *auth.Users, h http.Handler, log *slog.Logger) http.Handler {
	if us == nil {
		return h
	}
	mux := http.NewServeMux()
	route := func(pattern string, need captureNeed) {
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name, pass, ok := auth.Credentials(r)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="braid"`)
				writeAPIError(w, http.StatusUnauthorized, "this capture needs a user's credential (it has --users-file): set BRAID_TOKEN=NAME:PASSWORD or give --token-file (basic auth or Authorization: Bearer NAME:PASSWORD)")
				return
			}
			remote, _, _ := net.SplitHostPort(r.RemoteAddr)
			u, err := us.LoginFrom(remote, name, pass)
			if err != nil {
				// Bounded as a server node's (auth.LoginFrom, FailureLog).
				if ok, suppressed := us.FailureLog(name); ok {
					log.Warn("refused an HTTP call: bad credentials", "user", name, "remote", r.RemoteAddr, "path", r.URL.Path, "unlogged_before", suppressed)
				}
				if errors.Is(err, auth.ErrTooManyLogins) {
					w.Header().Set("Retry-After", strconv.Itoa(int(auth.FailWindow.Seconds()/auth.FailBurst)))
					writeAPIError(w, http.StatusTooManyRequests, err.Error())
					return
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="braid"`)
				writeAPIError(w, http.StatusUnauthorized, fmt.Sprintf("user %q: wrong name or password", name))
				return
			}
			switch dest := r.PathValue("name"); {
			case need == needAnAdmin && !u.IsAdmin():
				writeAPIError(w, http.StatusForbidden, fmt.Sprintf("user %s is a %s: %s %s needs an admin", u.Name, u.Role, r.Method, r.URL.Path))
				return
			case need == needReader && !u.MayRead(dest):
				writeAPIError(w, http.StatusForbidden, fmt.Sprintf("user %s may not read destination %s: an admin lists it in the user's destinations in the users file", u.Name, dest))
				return
			}
			h.ServeHTTP(w, r.WithContext(native.WithUser(r.Context(), u.Name)))
		}))
	}
	route("/", needAnyUser) // /metrics, the list, and the API's own 404s and 405s
	route("GET /v1/destinations/{name}", needReader)
	route("GET /v1/destinations/{name}/stream", needReader)
	route("POST /v1/destinations/{name}/ack", needReader)
	route("GET /v1/destinations/{name}/consumers", needReader)
	route("DELETE /v1/destinations/{name}/consumers/{id}", needAnAdmin)
	route("GET /v1/destinations/{name}/ddl", needReader)
	route("POST /v1/destinations/{name}/ddl/{lock}", needAnAdmin)
	route("POST /v1/destinations/{name}/sources/{source}/accept-lost", needAnAdmin)
	route("GET /v1/destinations/{name}/sinks", needReader)
	route("GET /v1/destinations/{name}/sinks/{sink}", needAnAdmin)
	route("POST /v1/destinations/{name}/sinks/{sink}/verify", needAnAdmin)
	return mux
}

func writeAPIError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(wire.ErrorBody{Error: msg})
}

// canalUsers is the canal login of a capture with --users-file: the same
// users, who may read what the file lists for them.
func canalUsers(us *auth.Users) func(remote, user string, hexScramble, seed []byte) (func(string) bool, error) {
	if us == nil {
		return nil
	}
	return func(remote, user string, hexScramble, seed []byte) (func(string) bool, error) {
		u, err := us.CanalLoginFrom(remote, user, hexScramble, seed)
		if err != nil {
			return nil, err
		}
		return u.MayRead, nil
	}
}

// pipelineReady is /readyz's check of a running pipeline: nil until done
// says it stopped, then why.
func pipelineReady(ctx context.Context, done <-chan struct{}, err func() error) func() error {
	return func() error {
		select {
		case <-done:
			if e := err(); e != nil {
				return fmt.Errorf("the destination stopped: %w", e)
			}
			return errors.New("the destination stopped")
		default:
		}
		if ctx.Err() != nil {
			return errors.New("capture is stopping")
		}
		return nil
	}
}
