package binlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/klauspost/compress/zstd"

	"github.com/braid-cdc/braid/engine/change"
)

// The reader parses its binlog events itself: go-mysql's syncer runs in
// raw mode (it reads the packets and parses only their headers) and
// hands each event, on its reading goroutine, to an eventParser, which
// parses it with a go-mysql parser configured as braid needs (rowFilter:
// raw images, tables outside the destination not decoded; the server's
// time zone) and queues it for the reader's goroutine. Parsing stays
// ahead of handling, on another goroutine, as when go-mysql parsed.
//
// Why not go-mysql's own parse: MySQL 8.0.20+ with
// binlog_transaction_compression=ON writes a transaction's events
// (BEGIN, table maps, rows events, XID) as one TRANSACTION_PAYLOAD event,
// zstd-compressed, after its GTID event, and go-mysql decodes a payload
// with a zstd decoder made for it and a parser without braid's row
// filter, decoding every row of every table, filtered or not (most of
// the CPU of a compressed binlog), which braid then had to parse again.
// The eventParser decompresses payloads with one decoder it keeps and
// parses their events once, with the filter; the reader handles them as
// any other event, at the payload's positions: a transaction's boundary
// is the payload's end, never a point inside it.

// eventParser parses one binlog connection's events (the syncer's
// SynchronousEventHandler). It runs on go-mysql's reading goroutine and
// shares nothing with the reader's but out and the Reader's fields fixed
// before streaming.
type eventParser struct {
	parser *replication.BinlogParser
	// inner parses the events inside transaction payloads: built from each
	// MySQL format description event read (a payload's events follow the
	// format of the file they are in, without checksums); nil before one.
	inner *replication.BinlogParser
	// checksum is the length of the checksum ending each event of the
	// current file (not of a payload's events).
	checksum int
	zstd     *zstd.Decoder
	newInner func() *replication.BinlogParser

	out  chan parsed
	done chan struct{}
	// credit holds the room the parser has ahead of the reader, one token
	// an event (slow start): HandleEvent takes one before it parses an
	// event; the reader gives one back for each event it takes and,
	// until window is ahead, one more, so the room doubles with each
	// window's worth the reader takes. A connection starts at
	// startAhead: before the first rows go out every source's reader is
	// held back by what reads it (a strict merge waits for its slowest
	// source), and parsing a full read-ahead of binlog nobody takes yet
	// only kept the CPU from the sources still starting.
	credit chan struct{}
	window int // the tokens in play; the reader's goroutine's
	ahead  int
	// open is closed, and opened set, once the window is the full
	// read-ahead: from then out's room is the bound, and neither side
	// pays a credit an event (about 4% of the merge's CPU a row).
	open   chan struct{}
	opened atomic.Bool
}

// startAhead is how many events a connection's parser is let ahead of
// its reader at first (eventParser.credit).
const startAhead = 16

// parsed is one event parsed, or why it could not be.
type parsed struct {
	e   *replication.BinlogEvent
	err error
}

// eventQueue is what the reader's goroutine reads of one connection: the
// events parsed, then the error that ended it.
type eventQueue struct {
	ep   *eventParser
	out  <-chan parsed
	errc chan error
	err  error
	stop context.CancelFunc
}

// queue is the queue of ep's events, read from st.
func (ep *eventParser) queue(st *replication.BinlogStreamer) *eventQueue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &eventQueue{ep: ep, out: ep.out, errc: make(chan error, 1), stop: cancel}
	go func() {
		// With a SynchronousEventHandler go-mysql queues no event: its
		// streamer only reports the error that ends the connection.
		_, err := st.GetEvent(ctx)
		q.errc <- err
	}()
	return q
}

// close ends the goroutine waiting for the connection's error.
func (q *eventQueue) close() { q.stop() }

// next returns the next event parsed, or the error that ended the
// connection once the events parsed before it are read.
func (q *eventQueue) next(ctx context.Context) (parsed, error) {
	if q.err == nil {
		select {
		case it := <-q.out:
			q.ep.took()
			return it, nil
		case q.err = <-q.errc:
		case <-ctx.Done():
			return parsed{}, ctx.Err()
		}
	}
	select {
	case it := <-q.out:
		q.ep.took()
		return it, nil
	default:
		return parsed{}, q.err
	}
}

// payloadError is a transaction payload braid cannot read; the reader
// names the source and position (payloadErr).
type payloadError struct{ msg string }

func (e *payloadError) Error() string { return e.msg }

// newEventParser is a parser for one connection's events, parsed ahead of
// the reader by at most ahead events; dec decompresses payloads.
func (p *Reader) newEventParser(ahead int, dec *zstd.Decoder) *eventParser {
	config := func(parser *replication.BinlogParser, slowRows bool) *replication.BinlogParser {
		parser.SetFlavor(p.info.flavor)
		parser.SetTimestampStringLocation(p.info.location)
		parser.SetRowsEventDecodeFunc(newRowFilter(p.filter, slowRows).decodeRows)
		return parser
	}
	ep := &eventParser{
		parser: config(replication.NewBinlogParser(), p.info.compressed || p.cfg.goMySQLRows),
		zstd:   dec,
		newInner: func() *replication.BinlogParser {
			return config(replication.NewBinlogParser(), p.cfg.goMySQLRows)
		},
		out:    make(chan parsed, ahead),
		done:   make(chan struct{}),
		credit: credits(min(startAhead, ahead), ahead),
		window: min(startAhead, ahead),
		ahead:  ahead,
		open:   make(chan struct{}),
	}
	if ep.window >= ahead {
		ep.opened.Store(true)
		close(ep.open)
	}
	return ep
}

// credits is a credit channel of room n holding k tokens.
func credits(k, n int) chan struct{} {
	c := make(chan struct{}, n)
	for range k {
		c <- struct{}{}
	}
	return c
}

// took gives back the room of an event the reader took, and grows the
// window by one until it is the full read-ahead.
func (ep *eventParser) took() {
	if ep.window >= ep.ahead {
		return // open: out's room bounds the parser
	}
	ep.window++
	for range 2 {
		select {
		case ep.credit <- struct{}{}:
		default: // cannot happen: the tokens in play are at most its room
		}
	}
	if ep.window == ep.ahead {
		ep.opened.Store(true)
		close(ep.open)
	}
}

// newZstd is the decoder of transaction payloads: one for the reader's
// life (making one costs more than decompressing most payloads), used by
// one connection's parser at a time.
func newZstd() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
}

// errParserStopped ends the syncer's reading when the reader has stopped
// taking events.
var errParserStopped = errors.New("binlog: the reader stopped reading")

// HandleEvent parses a raw event go-mysql read and queues it; a parse
// error is queued too and stops the connection after it.
func (ep *eventParser) HandleEvent(e *replication.BinlogEvent) error {
	if !ep.opened.Load() {
		select {
		case <-ep.credit:
		case <-ep.open:
		case <-ep.done:
			return errParserStopped
		}
	}
	it := ep.parse(e.RawData)
	select {
	case ep.out <- it:
	case <-ep.done:
		return errParserStopped
	}
	return it.err
}

// stop releases a HandleEvent waiting for room; the reader calls it
// before closing the syncer, which waits for its reading goroutine.
func (ep *eventParser) stop() { close(ep.done) }

// parse parses one event, a transaction payload with the events in it.
func (ep *eventParser) parse(raw []byte) parsed {
	if len(raw) > replication.EventHeaderSize && replication.EventType(raw[4]) == replication.TRANSACTION_PAYLOAD_EVENT {
		return ep.parsePayload(raw)
	}
	e, err := ep.parser.Parse(raw)
	if err != nil {
		return parsed{err: err}
	}
	if fde, ok := e.Event.(*replication.FormatDescriptionEvent); ok {
		if err := ep.format(e, fde); err != nil {
			return parsed{e: e, err: &payloadError{fmt.Sprintf("format description event: %v", err)}}
		}
	}
	return parsed{e: e}
}

// format takes a new file's format description event.
func (ep *eventParser) format(e *replication.BinlogEvent, fde *replication.FormatDescriptionEvent) error {
	ep.checksum, ep.inner = 0, nil
	if fde.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32 {
		ep.checksum = replication.BinlogChecksumLength
	}
	if isMariaDBFormat(fde) {
		return nil // MariaDB writes no transaction payloads
	}
	raw := e.RawData
	if ep.checksum > 0 {
		// The events inside a payload have no checksum: the same format
		// with the algorithm OFF (the byte before the event's checksum).
		raw = append([]byte(nil), raw...)
		raw[len(raw)-5] = byte(replication.BINLOG_CHECKSUM_ALG_OFF)
	}
	inner := ep.newInner()
	if _, err := inner.Parse(raw); err != nil {
		return err
	}
	ep.inner = inner
	return nil
}

// Field types of a transaction payload's header (MySQL's
// Transaction_payload_event): each field is its type, its value's length
// and the value, all packed integers, until the end mark; the compressed
// events follow.
const (
	payloadEndMark          = 0
	payloadSizeField        = 1
	payloadCompressionField = 2
	payloadUncompressedSize = 3
	payloadZstd             = 0
	payloadNone             = 255
)

// maxPayloadPrealloc caps the buffer made ahead for a payload's events
// from the size its header claims; a larger one grows as it decompresses.
const maxPayloadPrealloc = 64 << 20

// parsePayload parses a TRANSACTION_PAYLOAD event: its header, the
// events it holds, decompressed and parsed with the inner parser.
func (ep *eventParser) parsePayload(raw []byte) parsed {
	h := &replication.EventHeader{}
	if err := h.Decode(raw); err != nil {
		return parsed{err: err}
	}
	e := &replication.BinlogEvent{RawData: raw, Header: h}
	fail := func(format string, args ...any) parsed {
		return parsed{e: e, err: &payloadError{fmt.Sprintf(format, args...)}}
	}
	if int(h.EventSize) != len(raw) || len(raw) < replication.EventHeaderSize+ep.checksum {
		return fail("a transaction payload event of %d bytes whose header says %d", len(raw), h.EventSize)
	}
	if ep.inner == nil {
		return fail("a transaction payload event before any MySQL format description event")
	}
	body := raw[replication.EventHeaderSize : len(raw)-ep.checksum]
	ev := &replication.TransactionPayloadEvent{CompressionType: payloadNone} // MySQL's default
	for {
		typ, n := packedInt(body)
		if n == 0 {
			return fail("a transaction payload's header is cut short")
		}
		body = body[n:]
		if typ == payloadEndMark {
			break
		}
		size, n := packedInt(body)
		if n == 0 || size > uint64(len(body)-n) {
			return fail("a transaction payload's header is cut short")
		}
		field := body[n : n+int(size)]
		body = body[n+int(size):]
		v, n := packedInt(field)
		if n != len(field) {
			// Not as MySQL writes it, but as go-mysql reads it (and some
			// writers follow): a little-endian number of the field's length.
			if len(field) == 0 || len(field) > 8 {
				return fail("a transaction payload's header field %d is not one number", typ)
			}
			v = 0
			for i := len(field) - 1; i >= 0; i-- {
				v = v<<8 | uint64(field[i])
			}
		}
		switch typ {
		case payloadSizeField:
			ev.Size = v
		case payloadCompressionField:
			ev.CompressionType = v
		case payloadUncompressedSize:
			ev.UncompressedSize = v
		}
	}
	ev.Payload = body
	e.Event = ev
	var events []byte
	switch ev.CompressionType {
	case payloadZstd:
		buf := make([]byte, 0, min(ev.UncompressedSize, maxPayloadPrealloc))
		var err error
		if events, err = ep.zstd.DecodeAll(body, buf); err != nil {
			return fail("a transaction payload does not decompress: %v", err)
		}
	case payloadNone:
		events = body
	default:
		return fail("a transaction payload compressed with algorithm %d, which braid does not know (MySQL writes zstd, 0)", ev.CompressionType)
	}
	for len(events) > 0 {
		if len(events) < replication.EventHeaderSize {
			return fail("a transaction payload ends inside an event's header")
		}
		size := binary.LittleEndian.Uint32(events[9:13])
		if size < replication.EventHeaderSize || uint64(size) > uint64(len(events)) {
			return fail("a transaction payload holds an event of %d bytes where %d remain", size, len(events))
		}
		typ := replication.EventType(events[4])
		switch typ {
		case replication.TRANSACTION_PAYLOAD_EVENT, replication.FORMAT_DESCRIPTION_EVENT, replication.ROTATE_EVENT:
			return fail("a %s inside a transaction payload: MySQL never writes one there; the binlog is damaged", typ)
		}
		inner, err := ep.inner.Parse(events[:size:size])
		if err != nil {
			var ee *replication.EventError
			if errors.As(err, &ee) {
				err = errors.New(ee.Err) // EventError carries the raw event bytes; never show them
			}
			return fail("%s inside a transaction payload: %v", typ, oneLine(err))
		}
		ev.Events = append(ev.Events, inner)
		events = events[size:]
	}
	return parsed{e: e}
}

// isMariaDBFormat tells a MariaDB server's format description.
func isMariaDBFormat(fde *replication.FormatDescriptionEvent) bool {
	return strings.Contains(fde.ServerVersion, "MariaDB")
}

// packedInt reads a packed (length-encoded) integer from the start of b
// and returns it and its length, 0 when b is too short for it.
func packedInt(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	n := 1
	switch b[0] {
	case 0xfb, 0xff: // NULL and a header byte: no number
		return 0, 0
	case 0xfc:
		n = 3
	case 0xfd:
		n = 4
	case 0xfe:
		n = 9
	default:
		return uint64(b[0]), 1
	}
	if len(b) < n {
		return 0, 0
	}
	var v uint64
	for i := n - 1; i >= 1; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, n
}

// payloadErr is the error of an event that could not be parsed, named
// with the source and its position.
func (p *Reader) parseErr(e *replication.BinlogEvent, err error) error {
	var pe *payloadError
	if errors.As(err, &pe) && e != nil {
		at := change.Position{File: p.file, Pos: e.Header.LogPos - e.Header.EventSize}
		return fatal{fmt.Errorf("%w: source %s at %s: %s", ErrBadEvent, p.spec.Name, at, pe.msg)}
	}
	return p.streamError(err)
}

// handlePayload handles the events of a transaction payload, each at the
// payload's start and end positions.
func (p *Reader) handlePayload(ctx context.Context, ev *replication.TransactionPayloadEvent, start, end change.Position, emit func(*change.Event) error) error {
	for _, e := range ev.Events {
		if err := p.handleAt(ctx, e, start, end, emit); err != nil {
			return err
		}
	}
	return nil
}
