package mysqlbinlog

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// realEvent returns a captured event by "file@position".
func realEvent(t *testing.T, key string) []byte {
	t.Helper()
	h, ok := realEvents[key]
	if !ok {
		t.Fatalf("no captured event %s", key)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatalf("captured event %s: %v", key, err)
	}
	return b
}

// realEvents concatenates captured events (a whole transaction).
func realRange(t *testing.T, keys ...string) []byte {
	t.Helper()
	var out []byte
	for _, k := range keys {
		out = append(out, realEvent(t, k)...)
	}
	return out
}

// frameLike frames body with the inputs a server had when it wrote real:
// its timestamp, server id and position. Type, flags, size and checksum
// are the encoder's.
func frameLike(real []byte, typ replication.EventType, flags uint16, body []byte) []byte {
	return Frame(Header{
		Timestamp: binary.LittleEndian.Uint32(real[0:]),
		Type:      typ,
		ServerID:  binary.LittleEndian.Uint32(real[5:]),
		LogPos:    binary.LittleEndian.Uint32(real[13:]),
		Flags:     flags,
	}, body, true)
}

// fileAt returns a file of a server with serverID whose next event
// starts at pos, as the captured one's did.
func fileAt(serverID, pos uint32) *File {
	return &File{ServerID: serverID, Checksum: true, buf: make([]byte, pos)}
}

// requireBytes fails with the first differing offset and both sides
// around it.
func requireBytes(t *testing.T, what string, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-16)
	hiW, hiG := min(len(want), i+24), min(len(got), i+24)
	t.Fatalf("%s: %d bytes wanted, %d written; first difference at byte %d\nwant ...% x\ngot  ...% x",
		what, len(want), len(got), i, want[lo:hiW], got[lo:hiG])
}

// decodeEvents parses a run of framed events with go-mysql's parser,
// starting from the FORMAT_DESCRIPTION fde.
func decodeEvents(t *testing.T, fde []byte, events []byte) []*replication.BinlogEvent {
	t.Helper()
	p := replication.NewBinlogParser()
	p.SetVerifyChecksum(true)
	if _, err := p.Parse(fde); err != nil {
		t.Fatalf("format description: %v", err)
	}
	var out []*replication.BinlogEvent
	for len(events) > 0 {
		size := binary.LittleEndian.Uint32(events[9:])
		e, err := p.Parse(events[:size])
		if err != nil {
			t.Fatalf("go-mysql cannot parse a %s event: %v", replication.EventType(events[4]), err)
		}
		out = append(out, e)
		events = events[size:]
	}
	return out
}

// mustBody returns a function that takes an encoder's results and
// fails the test on its error.
func mustBody(t *testing.T) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func u64(v uint64) *uint64 { return &v }
func u32(v uint32) *uint32 { return &v }
