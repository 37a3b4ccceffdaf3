package auth

import (
	"errors"
	"net/http"
	"strings"
)

// Credentials returns the name and password an HTTP request carries: HTTP
// basic auth, or "Authorization: Bearer NAME:PASSWORD" (the form of
// $BRAID_TOKEN). ok is false when it carries neither.
func Credentials(r *http.Request) (name, password string, ok bool) {
	if name, password, ok = r.BasicAuth(); ok {
		return name, password, true
	}
	scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", "", false
	}
	name, password, err := Token(strings.TrimLeft(token, " "))
	if err != nil {
		return "", "", false
	}
	return name, password, true
}

// Token parses a token, NAME:PASSWORD, as given in $BRAID_TOKEN or a token
// file; a trailing newline (a file's last line) is dropped. The password
// may hold colons; the name may not.
func Token(s string) (name, password string, err error) {
	s = strings.TrimRight(s, "\r\n")
	if strings.ContainsAny(s, "\r\n") {
		return "", "", errors.New("auth: the token holds more than one line: want one line, NAME:PASSWORD")
	}
	name, password, found := strings.Cut(s, ":")
	if !found || name == "" || password == "" {
		// The token itself is not repeated: it may be a password.
		return "", "", errors.New("auth: the token is not NAME:PASSWORD: want a user name, a colon, then the password")
	}
	return name, password, nil
}
