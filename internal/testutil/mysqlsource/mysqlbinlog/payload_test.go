package mysqlbinlog

import (
	"encoding/binary"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/klauspost/compress/zstd"
)

// compressedTB1 is the table of the 8.0.32 compressed transaction:
// test.tb1 (INT), binlog_row_metadata=MINIMAL.
var compressedTB1 = &Table{ID: 88, Schema: "test", Name: "tb1", Columns: []Column{{Name: "a", Kind: KindInt, Nullable: true}}}

// compressedEvents are the events MySQL 8.0.32 compressed into the
// captured TRANSACTION_PAYLOAD: BEGIN, a table map, one insert, the xid.
func compressedEvents(t *testing.T) []Event {
	const ts = 1695159109
	begin := Query{ThreadID: 107, Schema: "test", SQL: "BEGIN", SuppressedUse: true, Status: BeginStatus(CollationUTF8MB4_0900AICI)}
	rows := Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: compressedTB1, Flags: StmtEndFlag, Rows: []Row{{After: []any{1}}}}
	return []Event{
		{Type: replication.QUERY_EVENT, Timestamp: ts, Flags: begin.HeaderFlags(), Body: mustBody(t)(begin.Body())},
		{Type: replication.TABLE_MAP_EVENT, Timestamp: ts, Body: mustBody(t)(TableMap{Table: compressedTB1, Flags: 1, Version: version(t, "8.0.32")}.Body())},
		{Type: replication.WRITE_ROWS_EVENTv2, Timestamp: ts, Body: mustBody(t)(rows.Body())},
		{Type: replication.XID_EVENT, Timestamp: ts, Body: XIDBody(462)},
	}
}

// TestPayloadMatchesServer compares with the TRANSACTION_PAYLOAD of a
// real 8.0.32 server: the events inside, once decompressed, byte for
// byte (no checksums, log_pos 0); the payload header field by field; and
// the whole transaction as go-mysql decodes it. The compressed bytes
// themselves differ (MySQL's libzstd and klauspost/compress are different
// encoders), so those are compared through decompression.
func TestPayloadMatchesServer(t *testing.T) {
	real := realEvent(t, "my8032_compressed@274")
	realBody := real[HeaderSize : len(real)-checksumSize]
	const headerLen = 10 // compression type, uncompressed size, size, end mark
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	realRaw, err := dec.DecodeAll(realBody[headerLen:], nil)
	if err != nil {
		t.Fatal(err)
	}

	body, err := PayloadBody(compressedEvents(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := dec.DecodeAll(body[headerLen:], nil)
	if err != nil {
		t.Fatalf("the payload is not one zstd frame after a %d-byte header: %v", headerLen, err)
	}
	requireBytes(t, "decompressed events", realRaw, raw)

	wantHeader := append([]byte(nil), realBody[:headerLen]...)
	wantHeader[8] = byte(len(body) - headerLen) // the compressed size, ours
	requireBytes(t, "payload header", wantHeader, body[:headerLen])

	// The whole transaction, decoded by go-mysql.
	g := GTID{SequenceNumber: 1, ImmediateCommitTimestamp: 1695159109445737, OriginalCommitTimestamp: 1695159109445737,
		ImmediateServerVersion: 80032, OriginalServerVersion: 80032}
	f := fileAt(1, 197)
	start, end, err := f.AppendTransaction(g, 1695159109, compressedEvents(t), Zstd)
	if err != nil {
		t.Fatal(err)
	}
	events := decodeEvents(t, realEvent(t, "my8032_compressed@4"), f.Bytes()[start:end])
	if len(events) != 2 || events[0].Header.EventType != replication.ANONYMOUS_GTID_EVENT || events[1].Header.EventType != replication.TRANSACTION_PAYLOAD_EVENT {
		t.Fatalf("want ANONYMOUS_GTID then TRANSACTION_PAYLOAD, got %d events", len(events))
	}
	gtid := events[0].Event.(*replication.GTIDEvent)
	if gtid.TransactionLength != uint64(end-start) {
		t.Fatalf("transaction length %d, the transaction is %d bytes", gtid.TransactionLength, end-start)
	}
	payload := events[1].Event.(*replication.TransactionPayloadEvent)
	var types []replication.EventType
	for _, e := range payload.Events {
		types = append(types, e.Header.EventType)
	}
	want := []replication.EventType{replication.QUERY_EVENT, replication.TABLE_MAP_EVENT, replication.WRITE_ROWS_EVENTv2, replication.XID_EVENT}
	if len(types) != len(want) {
		t.Fatalf("payload holds %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("payload holds %v, want %v", types, want)
		}
	}
	row := payload.Events[2].Event.(*replication.RowsEvent).Rows[0][0]
	if row != int32(1) {
		t.Fatalf("the payload's insert decodes as %v, want 1", row)
	}
	if binary.LittleEndian.Uint32(f.Bytes()[int(end)-HeaderSize-len(body)-checksumSize+13:]) != end {
		t.Fatalf("the payload event's log_pos is not the transaction's end %d", end)
	}
}
