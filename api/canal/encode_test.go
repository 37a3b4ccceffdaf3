package canal_test

import (
	"bytes"
	"testing"

	pbe "github.com/withlin/canal-go/protocol/entry"
	pbp "github.com/withlin/canal-go/protocol/packet"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/api/canal"
)

// TestEncoderMatchesReference encodes the shop destination's real events
// (DDL, inserts, an update with NULLs, a delete, routed names) into one
// MESSAGES frame and checks that every entry decodes, with canal-go's
// generated types, to exactly what the plain mapping onto those types
// gives.
func TestEncoderMatchesReference(t *testing.T) {
	f := newFixture(t, canal.Config{})
	f.store.Subscribe("ref")
	b, err := f.store.Get(t.Context(), "ref", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	frame, err := canal.EncodeFrame(42, b.Events)
	if err != nil {
		t.Fatal(err)
	}
	body, err := canal.ReadFrame(bytes.NewReader(frame), len(frame))
	if err != nil {
		t.Fatal(err)
	}
	var p pbp.Packet
	if err := proto.Unmarshal(body, &p); err != nil {
		t.Fatalf("packet: %v", err)
	}
	if p.Type != pbp.PacketType_MESSAGES || p.GetVersion() != 1 {
		t.Fatalf("packet type %v version %d, want MESSAGES 1", p.Type, p.GetVersion())
	}
	var msgs pbp.Messages
	if err := proto.Unmarshal(p.Body, &msgs); err != nil {
		t.Fatalf("messages: %v", err)
	}
	if msgs.BatchId != 42 {
		t.Errorf("batch id %d, want 42", msgs.BatchId)
	}
	var want []*pbe.Entry
	for _, ev := range b.Events {
		if e, ok := canal.RefEntry(ev); ok {
			want = append(want, e)
		}
	}
	if len(msgs.Messages) != len(want) || len(want) < 20 {
		t.Fatalf("%d entries, want %d (of %d events)", len(msgs.Messages), len(want), len(b.Events))
	}
	for i, raw := range msgs.Messages {
		var got pbe.Entry
		if err := proto.Unmarshal(raw, &got); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		// The store values are compared decoded: protobuf puts oneof
		// fields last, the encoder in field order; both decode the same.
		gotValue, wantValue := got.StoreValue, want[i].StoreValue
		got.StoreValue, want[i].StoreValue = nil, nil
		if !proto.Equal(&got, want[i]) {
			t.Errorf("entry %d differs:\n got %v\nwant %v", i, &got, want[i])
			continue
		}
		var gotBody, wantBody proto.Message
		switch got.GetEntryType() {
		case pbe.EntryType_ROWDATA:
			gotBody, wantBody = &pbe.RowChange{}, &pbe.RowChange{}
		case pbe.EntryType_TRANSACTIONBEGIN:
			gotBody, wantBody = &pbe.TransactionBegin{}, &pbe.TransactionBegin{}
		default:
			gotBody, wantBody = &pbe.TransactionEnd{}, &pbe.TransactionEnd{}
		}
		if err := proto.Unmarshal(gotValue, gotBody); err != nil {
			t.Fatalf("entry %d store value: %v", i, err)
		}
		if err := proto.Unmarshal(wantValue, wantBody); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(gotBody, wantBody) {
			t.Errorf("entry %d store value differs:\n got %v\nwant %v", i, gotBody, wantBody)
		}
	}

	// An empty batch: batch id -1, no entries.
	frame, err = canal.EncodeFrame(-1, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = canal.ReadFrame(bytes.NewReader(frame), len(frame))
	if err := proto.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(p.Body, &msgs); err != nil || msgs.BatchId != -1 || len(msgs.Messages) != 0 {
		t.Errorf("empty batch: id %d, %d entries, err %v; want -1, 0", msgs.BatchId, len(msgs.Messages), err)
	}
}
