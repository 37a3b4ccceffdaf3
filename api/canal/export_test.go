package canal

import (
	pbe "github.com/withlin/canal-go/protocol/entry"

	"github.com/braid-cdc/braid/change"
)

// EncodeFrame is the encoder's MESSAGES frame of events, for the external
// tests.
func EncodeFrame(batchID int64, events []*change.Event, rename func(schema, table string) (string, string)) ([]byte, error) {
	e := encoder{rename: rename}
	return e.frame(batchID, events)
}

// RefEntry is the reference mapping of one event (entry_ref_test.go).
func RefEntry(ev *change.Event, rename func(schema, table string) (string, string)) (*pbe.Entry, bool) {
	m := refMapper{rename: rename}
	return m.entry(ev)
}
