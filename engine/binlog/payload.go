package binlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
)

// MySQL 8.0.20+ with binlog_transaction_compression=ON writes a
// transaction's events (BEGIN, table maps, rows events, XID) as one
// TRANSACTION_PAYLOAD event, zstd-compressed, after its GTID event.
// go-mysql decompresses it and parses the inner events with a parser of
// its own, which knows neither braid's row filter (rowFilter: raw images,
// tables outside the destination not decoded) nor the server's time zone.
// So the reader parses the inner events again, from their bytes, with a
// parser configured as the replica connection's, and handles them as it
// handles any other event, at the payload's positions: a transaction's
// boundary is the payload's end, never a point inside it.

// payloadParser parses the events inside transaction payloads. It is
// built from each format description event read (a payload's events
// follow the format of the file they are in, without checksums).
type payloadParser struct {
	parser *replication.BinlogParser
}

// newPayloadParser is a parser for the payloads of a binlog file whose
// format description event is fde.
func (p *Reader) newPayloadParser(fde *replication.BinlogEvent) (*payloadParser, error) {
	raw := fde.RawData
	ev := fde.Event.(*replication.FormatDescriptionEvent)
	if ev.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32 {
		// The events inside a payload have no checksum: the same format
		// with the algorithm OFF (the byte before the event's checksum).
		raw = append([]byte(nil), raw...)
		raw[len(raw)-5] = byte(replication.BINLOG_CHECKSUM_ALG_OFF)
	}
	parser := replication.NewBinlogParser()
	parser.SetFlavor(p.info.flavor)
	parser.SetTimestampStringLocation(p.info.location)
	parser.SetRowsEventDecodeFunc(newRowFilter(p.filter, p.cfg.goMySQLRows).decodeRows)
	if _, err := parser.Parse(raw); err != nil {
		return nil, fmt.Errorf("format description event: %w", err)
	}
	return &payloadParser{parser: parser}, nil
}

// handlePayload handles the events of a transaction payload, each at the
// payload's start and end positions.
func (p *Reader) handlePayload(ctx context.Context, ev *replication.TransactionPayloadEvent, start, end change.Position, emit func(*change.Event) error) error {
	if p.payload == nil {
		return fatal{fmt.Errorf("%w: source %s at %s: a transaction payload event before any format description event", ErrBadEvent, p.spec.Name, start)}
	}
	for _, inner := range ev.Events {
		e, err := p.payload.parser.Parse(inner.RawData)
		if err != nil {
			var ee *replication.EventError
			if errors.As(err, &ee) {
				err = errors.New(ee.Err) // EventError carries the raw event bytes; never show them
			}
			return fatal{fmt.Errorf("%w: source %s at %s: %s inside a transaction payload: %v",
				ErrBadEvent, p.spec.Name, start, inner.Header.EventType, oneLine(err))}
		}
		switch e.Event.(type) {
		case *replication.TransactionPayloadEvent, *replication.FormatDescriptionEvent, *replication.RotateEvent:
			return fatal{fmt.Errorf("%w: source %s at %s: a %s inside a transaction payload: MySQL never writes one there; the binlog is damaged",
				ErrBadEvent, p.spec.Name, start, e.Header.EventType)}
		}
		if err := p.handleAt(ctx, e, start, end, emit); err != nil {
			return err
		}
	}
	return nil
}
