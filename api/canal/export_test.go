package canal

import (
	pbe "github.com/withlin/canal-go/protocol/entry"

	"github.com/braid-cdc/braid/engine/change"
)

// EncodeFrame is the encoder's MESSAGES frame of events, for the external
// tests.
func EncodeFrame(batchID int64, events []*change.Event) ([]byte, error) {
	e := encoder{}
	return e.frame(batchID, events)
}

// RefEntry is the reference mapping of one event (entry_ref_test.go).
func RefEntry(ev *change.Event) (*pbe.Entry, bool) {
	m := refMapper{}
	return m.entry(ev)
}
