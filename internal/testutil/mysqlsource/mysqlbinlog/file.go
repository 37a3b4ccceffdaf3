package mysqlbinlog

import (
	"fmt"
	"math"
	"sync"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/klauspost/compress/zstd"
)

// Event is one event before framing: the header fields a caller chooses
// and the body. File adds server id, size, position and checksum.
type Event struct {
	Type      replication.EventType
	Timestamp uint32
	Flags     uint16
	Body      []byte
}

// File builds one binlog file as a server writes it: the magic, a
// FORMAT_DESCRIPTION, a PREVIOUS_GTIDS, then what the caller appends.
type File struct {
	ServerID uint32
	Checksum bool
	buf      []byte
}

// NewFile starts a file written by a server of fde.ServerVersion at time
// ts (seconds), after the GTIDs in previous. The file is open: its
// FORMAT_DESCRIPTION carries FlagBinlogInUse until Rotate or Stop.
func NewFile(fde FormatDescription, serverID uint32, ts uint32, previous PreviousGTIDs) (*File, error) {
	body, err := fde.Body()
	if err != nil {
		return nil, err
	}
	f := &File{ServerID: serverID, Checksum: fde.Checksum, buf: append([]byte(nil), Magic...)}
	f.Append(Event{Type: replication.FORMAT_DESCRIPTION_EVENT, Timestamp: ts, Flags: FlagBinlogInUse, Body: body})
	f.Append(Event{Type: replication.PREVIOUS_GTIDS_EVENT, Timestamp: ts, Flags: FlagIgnorable, Body: previous.Body()})
	return f, nil
}

// Pos is the size of the file so far: the position of the next event.
func (f *File) Pos() uint32 { return uint32(len(f.buf)) }

// Bytes returns the file's content (shared, not copied).
func (f *File) Bytes() []byte { return f.buf }

// Append frames e at the end of the file and returns its start position.
func (f *File) Append(e Event) uint32 {
	start := f.Pos()
	framed := f.frame(e, start)
	f.buf = append(f.buf, framed...)
	return start
}

func (f *File) frame(e Event, start uint32) []byte {
	// A checksum-aware server's FORMAT_DESCRIPTION always carries its
	// checksum, even at the head of a file without (binlog_checksum=NONE):
	// its algorithm byte says what the other events have.
	checksum := f.Checksum || e.Type == replication.FORMAT_DESCRIPTION_EVENT
	size := HeaderSize + len(e.Body)
	if checksum {
		size += checksumSize
	}
	return Frame(Header{Timestamp: e.Timestamp, Type: e.Type, ServerID: f.ServerID, LogPos: start + uint32(size), Flags: e.Flags}, e.Body, checksum)
}

// Rotate ends the file with a ROTATE_EVENT naming the next file.
func (f *File) Rotate(ts uint32, next string) {
	f.Append(Event{Type: replication.ROTATE_EVENT, Timestamp: ts, Body: RotateBody(next, 4)})
	ClearInUse(f.buf)
}

// Stop ends the file with a STOP_EVENT, as a server that shuts down does.
func (f *File) Stop(ts uint32) {
	f.Append(Event{Type: replication.STOP_EVENT, Timestamp: ts})
	ClearInUse(f.buf)
}

// Compression is how AppendTransaction writes a transaction's events.
type Compression int

// binlog_transaction_compression OFF, or ON with zstd.
const (
	Uncompressed Compression = iota
	Zstd
)

// AppendTransaction appends a GTID event (its TransactionLength computed
// here) and the transaction's events, or, compressed, one
// TRANSACTION_PAYLOAD event holding them, as MySQL 8.0.20+ does with
// binlog_transaction_compression=ON. It returns the positions of the
// transaction's start and end.
func (f *File) AppendTransaction(g GTID, gtidTimestamp uint32, events []Event, compression Compression) (start, end uint32, err error) {
	if compression == Zstd {
		payload, err := PayloadBody(events, f.ServerID)
		if err != nil {
			return 0, 0, err
		}
		events = []Event{{Type: replication.TRANSACTION_PAYLOAD_EVENT, Timestamp: events[len(events)-1].Timestamp, Body: payload}}
	}
	rest := 0
	for _, e := range events {
		rest += HeaderSize + len(e.Body)
		if f.Checksum {
			rest += checksumSize
		}
	}
	gtidType := replication.GTID_EVENT
	switch {
	case g.Tag != "":
		gtidType = replication.GTID_TAGGED_LOG_EVENT
	case g.Anonymous():
		gtidType = replication.ANONYMOUS_GTID_EVENT
	}
	// The length counts the GTID event, whose size depends on how the
	// length itself is written: settle it by iterating.
	g.TransactionLength = 0
	for range 4 {
		size := HeaderSize + len(g.Body()) + rest
		if f.Checksum {
			size += checksumSize
		}
		if uint64(size) == g.TransactionLength {
			break
		}
		g.TransactionLength = uint64(size)
	}
	start = f.Append(Event{Type: gtidType, Timestamp: gtidTimestamp, Body: g.Body()})
	for _, e := range events {
		f.Append(e)
	}
	if got := uint64(f.Pos() - start); got != g.TransactionLength {
		return 0, 0, fmt.Errorf("mysqlbinlog: transaction length settled at %d, wrote %d", g.TransactionLength, got)
	}
	return start, f.Pos(), nil
}

// Payload field types of a TRANSACTION_PAYLOAD_EVENT.
const (
	payloadEndMark          = 0
	payloadSizeField        = 1
	payloadCompressionField = 2
	payloadUncompressedSize = 3
	payloadZstd             = 0
)

// PayloadBody returns the body of a TRANSACTION_PAYLOAD_EVENT holding
// events, compressed with zstd. The inner events carry no checksum and a
// log_pos of 0, as MySQL writes them into the payload.
func PayloadBody(events []Event, serverID uint32) ([]byte, error) {
	var raw []byte
	for _, e := range events {
		raw = append(raw, Frame(Header{Timestamp: e.Timestamp, Type: e.Type, ServerID: serverID, Flags: e.Flags}, e.Body, false)...)
	}
	enc, err := zstdEncoder()
	if err != nil {
		return nil, fmt.Errorf("mysqlbinlog: zstd: %w", err)
	}
	compressed := enc.EncodeAll(raw, nil)
	if len(compressed) > math.MaxUint32 {
		return nil, fmt.Errorf("mysqlbinlog: payload of %d bytes is larger than an event", len(compressed))
	}
	b := payloadField(nil, payloadCompressionField, payloadZstd)
	b = payloadField(b, payloadUncompressedSize, uint64(len(raw)))
	b = payloadField(b, payloadSizeField, uint64(len(compressed)))
	b = append(b, payloadEndMark)
	return append(b, compressed...), nil
}

// zstdEncoder is shared: an encoder's tables cost more to build than most
// payloads to compress, and EncodeAll is safe for concurrent use.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

func payloadField(b []byte, typ byte, v uint64) []byte {
	b = append(b, typ)
	b = appendPackedInt(b, uint64(packedIntSize(v)))
	return appendPackedInt(b, v)
}
