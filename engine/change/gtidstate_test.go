package change

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestMySQLExecutedAgainstSet grows a MySQLExecuted and a MySQLGTIDSet
// (the reference, Add of each GTID) with the same random GTIDs (runs,
// gaps, repeats, two uuids and a tag) and checks they agree after each,
// and that every snapshot taken along the way still holds what it held.
func TestMySQLExecutedAgainstSet(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	uuids := []string{"11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"}
	base, _ := ParseMySQLGTIDSet(uuids[0] + ":1-3")
	e := NewMySQLExecuted(base)
	ref := base
	type snap struct {
		e    MySQLExecuted
		text string
	}
	var snaps []snap
	next := map[string]int64{}
	for i := range 2000 {
		sid := uuids[rng.IntN(2)]
		tag := ""
		if rng.IntN(5) == 0 {
			tag = "t1"
		}
		key := sid + ":" + tag
		gno := next[key] + 1
		switch rng.IntN(10) {
		case 0:
			gno += int64(rng.IntN(5)) // a gap
		case 1:
			gno = max(1, gno-int64(rng.IntN(3))-1) // one already there
		}
		next[key] = max(next[key], gno)
		u, _ := parseUUID(sid)
		e.Add(u, tag, gno)
		g := sid + ":"
		if tag != "" {
			g += tag + ":"
		}
		if err := ref.Add(g + itoa(gno)); err != nil {
			t.Fatal(err)
		}
		if got, want := e.String(), ref.String(); got != want {
			t.Fatalf("after %d adds: %q, want %q", i+1, got, want)
		}
		if !e.ContainsGTID(u, tag, gno) || e.IsEmpty() {
			t.Fatalf("after adding %s:%s:%d the set does not hold it", sid, tag, gno)
		}
		if i%50 == 0 {
			snaps = append(snaps, snap{e, e.String()})
		}
	}
	for _, s := range snaps {
		if got := s.e.String(); got != s.text {
			t.Fatalf("a snapshot changed: %q, was %q", got, s.text)
		}
	}
	if got := ref.Minus(e.Set()); !got.IsEmpty() {
		t.Fatalf("set minus itself is %q", got)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestMySQLGTIDSetMinus(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"11111111-1111-1111-1111-111111111111:1-10", "11111111-1111-1111-1111-111111111111:3-4:8", "11111111-1111-1111-1111-111111111111:1-2:5-7:9-10"},
		{"11111111-1111-1111-1111-111111111111:1-10", "", "11111111-1111-1111-1111-111111111111:1-10"},
		{"11111111-1111-1111-1111-111111111111:1-10", "11111111-1111-1111-1111-111111111111:1-20", ""},
		{"11111111-1111-1111-1111-111111111111:1-5:t:1-2", "11111111-1111-1111-1111-111111111111:1-5", "11111111-1111-1111-1111-111111111111:t:1-2"},
		{"11111111-1111-1111-1111-111111111111:5-6", "22222222-2222-2222-2222-222222222222:5-6", "11111111-1111-1111-1111-111111111111:5-6"},
	} {
		a, _ := ParseMySQLGTIDSet(c.a)
		b, _ := ParseMySQLGTIDSet(c.b)
		if got := a.Minus(b).String(); got != c.want {
			t.Errorf("%s minus %s = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// TestGTIDStateJSON: a MySQL state is saved as its text and read back
// as text that prints the same.
func TestGTIDStateJSON(t *testing.T) {
	set, _ := ParseMySQLGTIDSet("11111111-1111-1111-1111-111111111111:1-5:t:2")
	e := NewMySQLExecuted(set)
	u, _ := parseUUID("11111111-1111-1111-1111-111111111111")
	e.Add(u, "", 6)
	var v struct {
		G GTIDState `json:"g,omitzero"`
	}
	v.G = MySQLGTIDs(e)
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"g":"11111111-1111-1111-1111-111111111111:1-6:t:2"}`; string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
	v.G = GTIDState{}
	if err := json.Unmarshal(b, &v); err != nil || v.G.String() != "11111111-1111-1111-1111-111111111111:1-6:t:2" {
		t.Fatalf("read back %q (%v)", v.G.String(), err)
	}
	v.G = GTIDState{}
	if b, _ := json.Marshal(v); string(b) != "{}" {
		t.Fatalf("no state is %s, want {}", b)
	}
}

// BenchmarkMySQLGTIDPerCommit is what a reader pays per transaction for
// a MySQL source's GTID state: the Add and the event's snapshot, against
// printing the set each time (what a MariaDB source's state costs).
func BenchmarkMySQLGTIDPerCommit(b *testing.B) {
	set, _ := ParseMySQLGTIDSet("11111111-1111-1111-1111-111111111111:1-5,22222222-2222-2222-2222-222222222222:1-1000000")
	u, _ := parseUUID("22222222-2222-2222-2222-222222222222")
	b.Run("snapshot", func(b *testing.B) {
		e := NewMySQLExecuted(set)
		var st GTIDState
		for i := range b.N {
			e.Add(u, "", int64(1000001+i))
			st = MySQLGTIDs(e)
		}
		_ = st
	})
	b.Run("print", func(b *testing.B) {
		e := NewMySQLExecuted(set)
		var s string
		for i := range b.N {
			e.Add(u, "", int64(1000001+i))
			s = e.String()
		}
		_ = s
	})
}

// TestGTIDStateHoldsAndCovers: places in a source's history compared by
// GTID, as after a failover, where positions do not compare.
func TestGTIDStateHoldsAndCovers(t *testing.T) {
	const u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	for _, c := range []struct {
		state, gtid string
		held, ok    bool
	}{
		{"0-1-42,1-2-7", "0-2-42", true, true},
		{"0-1-42,1-2-7", "0-1-43", false, true},
		{"0-1-42,1-2-7", "1-1-3", true, true},
		{"0-1-42", "2-1-1", false, true},
		{"0-1-42", "", false, false},
		{"", "0-1-1", false, false},
		{"0-1-42", u + ":5", false, false},
		{u + ":1-10", u + ":10", true, true},
		{u + ":1-10", u + ":11", false, true},
		{u + ":1-10,5e11fa47-71ca-11e1-9e33-c80aa9429562:tag:1-3", "5e11fa47-71ca-11e1-9e33-c80aa9429562:tag:3", true, true},
		{u + ":1-10", "0-1-1", false, false},
	} {
		held, ok := GTIDText(c.state).Holds(c.gtid)
		if held != c.held || ok != c.ok {
			t.Errorf("%q holds %q: %v, %v; want %v, %v", c.state, c.gtid, held, ok, c.held, c.ok)
		}
	}
	for _, c := range []struct {
		g, o       string
		covers, ok bool
	}{
		{"0-1-42,1-2-7", "0-2-40,1-2-7", true, true},
		{"0-1-42", "0-1-42,1-2-1", false, true},
		{"0-1-42", "0-1-43", false, true},
		{u + ":1-10", u + ":1-9", true, true},
		{u + ":1-10", u + ":1-11", false, true},
		{u + ":1-10", "0-1-1", false, false},
		{"", "0-1-1", false, false},
	} {
		covers, ok := GTIDText(c.g).Covers(GTIDText(c.o))
		if covers != c.covers || ok != c.ok {
			t.Errorf("%q covers %q: %v, %v; want %v, %v", c.g, c.o, covers, ok, c.covers, c.ok)
		}
	}
}
