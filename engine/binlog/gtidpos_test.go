package binlog

import (
	"slices"
	"testing"
)

func mustPos(t *testing.T, s string) gtidPos {
	t.Helper()
	p, err := parseGTIDPos(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A GTID position keeps the last GTID of each domain, sorted by domain,
// and reads a Gtid_list event's Info as well as gtid_binlog_pos.
func TestGTIDPos(t *testing.T) {
	p := mustPos(t, "[2-5-9, 0-1-42]")
	if got := p.String(); got != "0-1-42,2-5-9" {
		t.Fatalf("String() = %q", got)
	}
	p.set(mustPos(t, "0-3-43")[0])
	p.set(mustPos(t, "1-2-7")[0])
	if got := p.String(); got != "0-3-43,1-2-7,2-5-9" {
		t.Fatalf("after set: %q", got)
	}
	if got := mustPos(t, "[]").String(); got != "" {
		t.Fatalf("empty list: %q", got)
	}
	if _, err := parseGTIDPos("0-1"); err == nil {
		t.Fatal("0-1 parsed")
	}
}

// DM's two conditions: the server holds the cursor's position (else
// what it lacks is named, by domain) and purged nothing after it (else
// what is gone is named).
func TestCompareGTIDs(t *testing.T) {
	for _, c := range []struct {
		cursor, have, oldest string
		missing, purged      []string
	}{
		{cursor: "0-1-42", have: "0-1-42", oldest: ""},
		{cursor: "0-1-42", have: "0-2-50", oldest: "0-1-40"},
		{cursor: "0-1-42", have: "0-2-50,1-2-3", oldest: "0-1-40,1-2-1", purged: []string{"domain 1 up to 1-2-1"}},
		{cursor: "0-1-42", have: "0-1-41", oldest: "", missing: []string{"domain 0 seq 42 to 0-1-42 (the server is at 0-1-41)"}},
		{cursor: "0-1-42,1-1-5", have: "0-1-42", oldest: "", missing: []string{"domain 1 up to 1-1-5 (the server has none of it)"}},
		{cursor: "0-1-42", have: "0-1-60", oldest: "0-1-50", purged: []string{"domain 0 seq 43 to 0-1-50"}},
		{cursor: "0-1-42", have: "0-1-60,3-9-8", oldest: "0-1-42,3-9-2", purged: []string{"domain 3 up to 3-9-2"}},
	} {
		missing, purged := compareGTIDs(mustPos(t, c.cursor), mustPos(t, c.have), mustPos(t, c.oldest))
		if !slices.Equal(missing, c.missing) || !slices.Equal(purged, c.purged) {
			t.Errorf("cursor %s, server %s, oldest %s: missing %q purged %q, want %q %q", c.cursor, c.have, c.oldest, missing, purged, c.missing, c.purged)
		}
	}
}
