package native

import (
	"net/http"
	"time"
)

// The bounds of the HTTP servers braid runs (NewServer). A stream clears
// its own read and write deadlines, so readTimeout bounds a request's
// headers and body, never a stream's life; there is no write timeout for
// the same reason.
var (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
)

// NewServer returns the http.Server braid serves h with: a client that
// sends its headers or body too slowly, or keeps an idle connection open,
// is cut off instead of holding a connection and a goroutine for ever.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, IdleTimeout: idleTimeout}
}
