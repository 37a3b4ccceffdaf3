package native

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"

	"github.com/braid-cdc/braid/api/wire"
)

// Internal answers a request that failed for a reason of the server's
// own (500): the client gets a generic line and an id, the node's log
// the detail under that id. A 500's detail (store batch numbers, Raft
// errors, paths, addresses) is for the operator, never for whoever
// called; an error the client can act on gets its own 4xx instead.
func Internal(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(b[:])
	log.Error("internal error answered 500", "error_id", id, "method", r.Method, "path", r.URL.Path, "err", err)
	writeJSON(w, http.StatusInternalServerError, wire.ErrorBody{
		Error: "internal error (id " + id + "): the node's log has the detail under error_id=" + id, ID: id})
}

// WithOwner tells the handler who makes a request: owner returns the
// request's user ("" without users). A user's new client ids count
// toward the destination's consumers.max_client_ids, and its replays
// draw on its share of the replay readers (stream.OpenOptions.Owner).
// Without it every client is "".
func WithOwner(owner func(*http.Request) string) Option {
	return func(h *handler) { h.owner = owner }
}

// userKey is the context key of WithUser.
type userKey struct{}

// WithUser returns ctx saying that its request is user's: a guard in
// front of the handler that has authenticated the request says so, for
// a handler without WithOwner.
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// ownerOf is the request's user, as WithOwner, or else WithUser, says.
func (h *handler) ownerOf(r *http.Request) string {
	if h.owner != nil {
		return h.owner(r)
	}
	u, _ := r.Context().Value(userKey{}).(string)
	return u
}
