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
		missing, purged := compareGTIDs(mustPos(t, c.cursor), mustPos(t, c.have), nil, mustPos(t, c.oldest))
		if !slices.Equal(missing, c.missing) || !slices.Equal(purged, c.purged) {
			t.Errorf("cursor %s, server %s, oldest %s: missing %q purged %q, want %q %q", c.cursor, c.have, c.oldest, missing, purged, c.missing, c.purged)
		}
	}
}

// A promoted server that lacks braid's last transactions of a domain and
// wrote on in it reuses their seq numbers: its state (the last GTID of
// each domain and server_id) still names what it lacks, and the same
// loss stays the same text while it writes on. Going on past it starts
// after the last of braid's GTIDs it holds, so its own come next. By the
// domain's position alone the loss would vanish once its writes pass
// braid's seq, and the start would skip them.
func TestCompareGTIDsPromotedWritesOn(t *testing.T) {
	cursor := mustPos(t, "0-100-55,1-7-3")
	for _, c := range []struct {
		have, state string
		missing     []string
		start       string
	}{
		{have: "0-100-24,1-7-3", state: "0-100-24,1-7-3", missing: []string{"domain 0 seq 25 to 0-100-55 (the server is at 0-100-24)"}, start: "0-100-24,1-7-3"},
		{have: "0-101-30,1-7-3", state: "0-100-24,0-101-30,1-7-3", missing: []string{"domain 0 seq 25 to 0-100-55 (the server's last of server_id 100 is 0-100-24)"}, start: "0-100-24,1-7-3"},
		{have: "0-101-80,1-7-3", state: "0-100-24,0-101-80,1-7-3", missing: []string{"domain 0 seq 25 to 0-100-55 (the server's last of server_id 100 is 0-100-24)"}, start: "0-100-24,1-7-3"},
		{have: "0-101-80,1-7-3", state: "0-100-55,0-101-80,1-7-3", start: "0-100-55,1-7-3"}, // it had them all, then wrote on
		{have: "0-101-80,1-7-3", state: "0-101-80,1-7-3", missing: []string{"domain 0 up to 0-100-55 (the server has no GTID of server_id 100 in it)"}, start: "1-7-3"},
	} {
		state, err := parseGTIDState(c.state)
		if err != nil {
			t.Fatal(err)
		}
		missing, _ := compareGTIDs(cursor, mustPos(t, c.have), state, nil)
		if !slices.Equal(missing, c.missing) {
			t.Errorf("server at %s (state %s): missing %q, want %q", c.have, c.state, missing, c.missing)
		}
		if got := acceptedStart(cursor, mustPos(t, c.have), state).String(); got != c.start {
			t.Errorf("server at %s (state %s): goes on from %s, want %s", c.have, c.state, got, c.start)
		}
	}
}
