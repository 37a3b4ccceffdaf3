package cluster

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSessionsExpireAndStayBounded: a session ends sessionTTL after its
// login, a closed one is gone, and past maxSessions a login ends the
// session closest to its end, never one that was just opened.
func TestSessionsExpireAndStayBounded(t *testing.T) {
	var s sessions
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first, _ := s.open("admin", t0)
	if ss, ok := s.lookup(first, t0.Add(sessionTTL-time.Second)); !ok || ss.user != "admin" {
		t.Fatalf("a session just before its end: %+v %v", ss, ok)
	}
	if _, ok := s.lookup(first, t0.Add(sessionTTL)); ok {
		t.Fatal("a session at its end still logs in")
	}
	closed, _ := s.open("admin", t0)
	s.close(closed)
	if _, ok := s.lookup(closed, t0); ok {
		t.Fatal("a closed session still logs in")
	}
	if _, ok := s.lookup("", t0); ok {
		t.Fatal("no cookie logs in")
	}
	ids := make([]string, maxSessions+1)
	for i := range ids {
		ids[i], _ = s.open("admin", t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(maxSessions * time.Second)
	if _, ok := s.lookup(ids[0], now); ok {
		t.Error("past the bound, the oldest session was kept")
	}
	for _, id := range ids[1:] {
		if _, ok := s.lookup(id, now); !ok {
			t.Fatal("past the bound, a newer session was ended")
		}
	}
	if len(s.byID) != maxSessions {
		t.Errorf("%d sessions kept, want %d", len(s.byID), maxSessions)
	}
	if a, b := sessionCookie("n1"), sessionCookie("n 2;x"); a != "braid_session_n1" || b != "braid_session_n_2_x" {
		t.Errorf("cookie names %q %q", a, b)
	}
}

// TestSessionCookieAttributes: the cookie is HttpOnly and SameSite=Strict
// always, Secure on a node whose HTTP port has TLS, and a log-out clears
// it.
func TestSessionCookieAttributes(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		n := &Node{cfg: Config{Name: "n1"}}
		if withTLS {
			n.cfg.HTTPTLS = &tls.Config{}
		}
		rec := httptest.NewRecorder()
		n.setSessionCookie(rec, "id", time.Now().Add(sessionTTL))
		c := rec.Result().Cookies()[0]
		if c.Name != "braid_session_n1" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != withTLS || c.MaxAge <= 0 || c.Path != "/" {
			t.Errorf("TLS %v: cookie %+v: want braid_session_n1, HttpOnly, SameSite=Strict, Secure with TLS, an expiry, Path /", withTLS, c)
		}
		rec = httptest.NewRecorder()
		n.setSessionCookie(rec, "", time.Time{})
		if c := rec.Result().Cookies()[0]; c.MaxAge >= 0 || c.Value != "" {
			t.Errorf("TLS %v: the log-out's cookie %+v: want it cleared", withTLS, c)
		}
	}
}
