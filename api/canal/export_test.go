package canal

import (
	"github.com/braid-cdc/braid/engine"
	pbe "github.com/withlin/canal-go/protocol/entry"
)

// EncodeFrame is the encoder's MESSAGES frame of events, for the external
// tests.
func EncodeFrame(batchID int64, events []*engine.Event, rename func(schema, table string) (string, string)) ([]byte, error) {
	e := encoder{rename: rename}
	return e.frame(batchID, events)
}

// RefEntry is the reference mapping of one event (entry_ref_test.go).
func RefEntry(ev *engine.Event, rename func(schema, table string) (string, string)) (*pbe.Entry, bool) {
	m := refMapper{rename: rename}
	return m.entry(ev)
}
