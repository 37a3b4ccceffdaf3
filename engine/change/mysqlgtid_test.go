package change

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

const (
	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	uuidB = "896e7882-18fe-11ef-ab88-22222d34d411"
)

// TestMySQLGTIDSetParse: the text a user writes in start: {gtid: ...}
// reads as MySQL reads it, and prints in MySQL's normalised form.
func TestMySQLGTIDSetParse(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{" , ", ""},
		{uuidA + ":1-5", uuidA + ":1-5"},
		// MySQL prints ",\n" between uuids; upper case is read, printed lower.
		{strings.ToUpper(uuidB) + ":3,\n" + uuidA + ":1-5", uuidA + ":1-5," + uuidB + ":3"},
		// Tags are case-insensitive, lower case in the normal form; the
		// untagged intervals print first, then the tags in order.
		{uuidA + ":Shop:1-5," + uuidA + ":7-9", uuidA + ":7-9:shop:1-5"},
		{uuidA + ":1-5:b:2:a:1:3", uuidA + ":1-5:a:1:3:b:2"},
		{uuidA + ":_x9:4", uuidA + ":_x9:4"},
		// Intervals merge (overlapping and adjacent) and sort.
		{uuidA + ":7-9:1-3:4:12 , " + uuidA + ":2-8", uuidA + ":1-9:12"},
		{uuidA + " : 1 - 3 : tag : 5 ", uuidA + ":1-3:tag:5"},
		{uuidA + ":t2345678901234567890123456789012:1", uuidA + ":t2345678901234567890123456789012:1"},
		{uuidA + ":9223372036854775806", uuidA + ":9223372036854775806"},
	} {
		s, err := ParseMySQLGTIDSet(tc.in)
		if err != nil {
			t.Errorf("ParseMySQLGTIDSet(%q): %v", tc.in, err)
			continue
		}
		if got := s.String(); got != tc.want {
			t.Errorf("ParseMySQLGTIDSet(%q) = %q, want %q", tc.in, got, tc.want)
		}
		again, err := ParseMySQLGTIDSet(s.String())
		if err != nil || again.String() != s.String() {
			t.Errorf("%q does not read back: %q, %v", s.String(), again.String(), err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"0-1-42", "is not a uuid"}, // MariaDB's form
		{uuidA, "has no interval"},
		{uuidA + ":tag", "has no interval"},
		{uuidA + ":a:b:1", `tag "a" has no interval`},
		{uuidA + ":5-3", "ends before it starts"},
		{uuidA + ":0", "transaction numbers go from 1"},
		{uuidA + ":9223372036854775807", "transaction numbers go from 1"},
		{uuidA + ":1-", "bad interval"},
		{uuidA + "::1", "bad interval"},
		{uuidA + ":9tag:1", "bad interval"},
		{uuidA + ":ta-g:1", "neither an interval nor a tag"},
		{uuidA + ":t23456789012345678901234567890123:1", "neither an interval nor a tag"},
		{"3e11fa4771ca11e19e33c80aa9429562:1", "is not a uuid"},
		{"3e11fa47-71ca-11e1-9e33-c80aa942956g:1", "is not a uuid"},
	} {
		if s, err := ParseMySQLGTIDSet(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMySQLGTIDSet(%q) = %q, %v; want an error with %q", tc.in, s, err, tc.want)
		}
	}
}

// TestMySQLGTIDSetRealEncodings: the PREVIOUS_GTIDS bodies of MySQL 8.4
// servers (go-mysql's test samples, replication/event_test.go), which
// carry a GTID set in the encoding COM_BINLOG_DUMP_GTID uses: decoding
// gives MySQL's text, and encoding that text gives the same bytes.
func TestMySQLGTIDSetRealEncodings(t *testing.T) {
	for _, tc := range []struct{ hex, text string }{
		{"0102000000000001896e788218fe11efab8822222d34d41100010000000000000001000000000000000500000000000000896e788218fe11efab8822222d34d4110861616161010000000000000001000000000000000200000000000000",
			"896e7882-18fe-11ef-ab88-22222d34d411:1-4:aaaa:1"},
		{"0107000000000001896e788218fe11efab8822222d34d41100010000000000000001000000000000000500000000000000896e788218fe11efab8822222d34d4110861616161010000000000000001000000000000000200000000000000896e788218fe11efab8822222d34d41106616263010000000000000001000000000000000400000000000000896e788218fe11efab8822222d34d4110a6262626262010000000000000001000000000000000200000000000000896e788218fe11efab8822222d34d4110c626262626262010000000000000001000000000000000200000000000000896e788218fe11efab8822222d34d4110278010000000000000001000000000000000200000000000000896e788218fe11efab8822222d34d41200010000000000000001000000000000000300000000000000",
			"896e7882-18fe-11ef-ab88-22222d34d411:1-4:aaaa:1:abc:1-3:bbbbb:1:bbbbbb:1:x:1,896e7882-18fe-11ef-ab88-22222d34d412:1-2"},
		{"0104000000000001042f20ccbc4c11efa1d00242ac11000200010000000000000001000000000000000800000000000000042f20ccbc4c11efa1d00242ac11000206616161010000000000000001000000000000000200000000000000042f20ccbc4c11efa1d00242ac110002287461673435363738393031323334353637383930010000000000000001000000000000000200000000000000042f20ccbc4c11efa1d00242ac110002407461673435363738393031323334353637383930313233343536373839303132010000000000000001000000000000000200000000000000",
			"042f20cc-bc4c-11ef-a1d0-0242ac110002:1-7:aaa:1:tag45678901234567890:1:tag45678901234567890123456789012:1"},
		{"0100000000000001", ""}, // an 8.4 server that has seen a tag, before any transaction
	} {
		raw, err := hex.DecodeString(tc.hex)
		if err != nil {
			t.Fatal(err)
		}
		s, err := DecodeMySQLGTIDSet(raw)
		if err != nil {
			t.Fatalf("decode %s: %v", tc.text, err)
		}
		if s.String() != tc.text {
			t.Errorf("decoded %q, want %q", s.String(), tc.text)
		}
		p, err := ParseMySQLGTIDSet(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Encode(); !bytes.Equal(got, raw) && tc.text != "" {
			t.Errorf("%s encodes as\n%x\nwant\n%x", tc.text, got, raw)
		}
	}
	for _, bad := range []string{"", "01", "0000000000000002", "0200000000000001", "0101000000000001" + "896e788218fe11efab8822222d34d411" + "01"} {
		raw, _ := hex.DecodeString(bad)
		if s, err := DecodeMySQLGTIDSet(raw); err == nil {
			t.Errorf("decoded %x as %q, want an error", raw, s)
		}
	}
}

// TestMySQLGTIDSetUntaggedEncoding: a set without tags keeps the classic
// encoding, byte for byte go-mysql's (which every MySQL server reads).
func TestMySQLGTIDSetUntaggedEncoding(t *testing.T) {
	s, err := ParseMySQLGTIDSet(uuidB + ":1-4:9:20-30")
	if err != nil {
		t.Fatal(err)
	}
	if s.Tagged() {
		t.Fatal("an untagged set says it is tagged")
	}
	theirs, err := mysql.ParseMysqlGTIDSet(s.String())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Encode(), theirs.Encode()) {
		t.Errorf("encoding %x, go-mysql's %x", s.Encode(), theirs.Encode())
	}
}

// TestMySQLGTIDSetRandomized checks Add, Union, Contains, ContainsGTID,
// String and Encode against a dumb model, a map of single GTIDs, and the
// encoding against go-mysql's PREVIOUS_GTIDS decoder.
func TestMySQLGTIDSetRandomized(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	uuids := []string{uuidA, uuidB}
	tags := []string{"", "a", "shop", "z_1"}
	random := func() (MySQLGTIDSet, map[string]bool) {
		var s MySQLGTIDSet
		model := map[string]bool{}
		for range rng.IntN(12) {
			g := randomGTID(rng, uuids, tags)
			if err := s.Add(g); err != nil {
				t.Fatal(err)
			}
			model[strings.ToLower(g)] = true
		}
		return s, model
	}
	for i := range 2000 {
		a, ma := random()
		b, mb := random()
		// The text reads back to the same set.
		back, err := ParseMySQLGTIDSet(a.String())
		if err != nil || back.String() != a.String() {
			t.Fatalf("#%d: %q reads back as %q, %v", i, a.String(), back.String(), err)
		}
		decoded, err := DecodeMySQLGTIDSet(a.Encode())
		if err != nil || decoded.String() != a.String() {
			t.Fatalf("#%d: %q decodes as %q, %v", i, a.String(), decoded.String(), err)
		}
		if a.IsEmpty() != (len(ma) == 0) {
			t.Fatalf("#%d: %q IsEmpty %v", i, a.String(), a.IsEmpty())
		}
		u := a
		u.Union(b)
		if a.String() != back.String() {
			t.Fatalf("#%d: Union changed the set it was copied from: %q", i, a.String())
		}
		subset := true
		for g := range mb {
			subset = subset && ma[g]
		}
		if a.Contains(b) != subset {
			t.Fatalf("#%d: %q Contains %q = %v, want %v", i, a.String(), b.String(), a.Contains(b), subset)
		}
		if !u.Contains(a) || !u.Contains(b) {
			t.Fatalf("#%d: the union %q lacks %q or %q", i, u.String(), a.String(), b.String())
		}
		for range 10 {
			g := randomGTID(rng, uuids, tags)
			if k := strings.ToLower(g); u.ContainsGTID(g) != (ma[k] || mb[k]) {
				t.Fatalf("#%d: %q ContainsGTID %s = %v", i, u.String(), g, u.ContainsGTID(g))
			}
		}
		// go-mysql's decoder reads the encoding (it needs an untagged
		// entry before a uuid's tagged ones to name the uuid).
		var full MySQLGTIDSet
		full.Union(u)
		for _, id := range uuids {
			if err := full.Add(id + ":1000"); err != nil {
				t.Fatal(err)
			}
		}
		var ev replication.PreviousGTIDsEvent
		if err := ev.Decode(full.Encode()); err != nil {
			t.Fatalf("#%d: go-mysql cannot decode %q: %v", i, full.String(), err)
		}
		if ev.GTIDSets != full.String() {
			t.Fatalf("#%d: go-mysql decodes %q as %q", i, full.String(), ev.GTIDSets)
		}
	}
}

func randomGTID(rng *rand.Rand, uuids, tags []string) string {
	id := uuids[rng.IntN(len(uuids))]
	if tag := tags[rng.IntN(len(tags))]; tag != "" {
		if rng.IntN(2) == 0 {
			tag = strings.ToUpper(tag)
		}
		id += ":" + tag
	}
	return fmt.Sprintf("%s:%d", id, 1+rng.IntN(30))
}
