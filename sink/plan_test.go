package sink_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// TestPlan: a worker's changes become few runs, and every key keeps its
// order: a change never runs before an earlier change of one of its keys.
func TestPlan(t *testing.T) {
	orders, items := &change.Table{Name: "orders"}, &change.Table{Name: "items"}
	n := 0
	ch := func(tb *change.Table, kind change.ChangeKind, pk string, others ...string) sink.Change {
		n++
		return sink.Change{Seq: uint64(n), Logical: "shop." + tb.Name, Row: &change.RowChange{Table: tb, Kind: kind},
			PK: tb.Name + pk, Others: others, Moved: kind == change.Update && len(others) > 0 && others[0][0] == 'k'}
	}
	var in []sink.Change
	// Three source transactions: orders and their items inserted, some
	// updated and deleted; the next transaction's the same.
	for round := range 3 {
		for i := range 4 {
			in = append(in, ch(orders, change.Insert, fmt.Sprint(round*10+i)))
		}
		for i := range 4 {
			in = append(in, ch(items, change.Insert, fmt.Sprint(round*10+i)))
		}
		in = append(in, ch(orders, change.Update, fmt.Sprint(round*10)), ch(items, change.Delete, fmt.Sprint(round*10+1)))
	}
	// A unique value moves: row 1 gives "u" up, then row 2 takes it.
	in = append(in, ch(orders, change.Update, "1", "u"), ch(orders, change.Insert, "99", "u"))
	// A key-changing UPDATE runs alone.
	in = append(in, ch(orders, change.Update, "98", "korders97"))

	runs := sink.Plan(in, 100)
	pos := map[uint64]int{}
	total := 0
	for r, run := range runs {
		for _, c := range run.Changes {
			pos[c.Seq] = r
			total++
			if c.Row.Table != run.Changes[0].Row.Table {
				t.Fatalf("run %d mixes tables", r)
			}
		}
		if run.Kind == sink.RunMove && len(run.Changes) != 1 {
			t.Fatalf("run %d: a key-changing UPDATE shares its run", r)
		}
	}
	if total != len(in) {
		t.Fatalf("%d changes in runs, want %d", total, len(in))
	}
	// Every key's changes in order, runs in the order returned.
	for i, a := range in {
		for _, b := range in[i+1:] {
			ka := append([]string{a.PK}, a.Others...)
			kb := append([]string{b.PK}, b.Others...)
			shared := slices.ContainsFunc(ka, func(k string) bool { return slices.Contains(kb, k) })
			if shared && pos[b.Seq] < pos[a.Seq] {
				t.Fatalf("seq %d (run %d) runs before seq %d (run %d), an earlier change of one of its keys", b.Seq, pos[b.Seq], a.Seq, pos[a.Seq])
			}
		}
	}
	// Rounds' inserts are gathered: far fewer runs than changes.
	if len(runs) > 12 {
		t.Fatalf("%d runs for %d changes: inserts of later rounds were not gathered", len(runs), len(in))
	}
	// The size limit cuts runs.
	for _, run := range sink.Plan(in, 2) {
		if len(run.Changes) > 2 {
			t.Fatalf("a run of %d changes over the limit of 2", len(run.Changes))
		}
	}
	t.Logf("%d changes in %d runs", len(in), len(runs))
}

// TestKeyAsFmt: Key writes each value as fmt prints it, as it always
// has: a primary key's worker is a hash of its Key, and must not change
// from one braid to the next (a restart skips by each worker's checkpoint).
func TestKeyAsFmt(t *testing.T) {
	img := []change.Value{int64(-7), uint64(18446744073709551615), "abc", []byte{1, 2}, nil, float64(1.5), float32(2.25)}
	var want strings.Builder
	want.WriteString("t")
	for _, v := range img {
		want.WriteByte(0)
		fmt.Fprint(&want, v)
	}
	if got := sink.Key("t", img, []int{0, 1, 2, 3, 4, 5, 6}); got != want.String() {
		t.Fatalf("Key = %q, want %q", got, want.String())
	}
}
