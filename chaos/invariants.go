package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The invariants, by the names a failed run prints.
const (
	InvDense      = "stream-dense"        // each consumer has every seq 1..head, a rowless one too (native EMPTY, canal BEGIN/END)
	InvConsistent = "stream-consistent"   // a seq is the same transaction everywhere, every time
	InvLedger     = "ledger-exactly-once" // each committed change is in the stream once, nothing else is
	InvSnapshot   = "snapshot-complete"   // each row held before the destination came as a snapshot row
	InvSinkEqual  = "sink-exactly-once"   // an exactly-once target equals the sources row for row
	InvSinkHolds  = "sink-current"        // an at-least-once target (Redis) holds every current row as it is
	InvNoExit     = "no-unexpected-exit"  // no process exits but those the schedule stopped
	InvPublished  = "sink-published"      // Kafka holds each committed change once
	InvTakeover   = "partition-takeover"  // an owner cut off from the other nodes is replaced while cut
	InvDelivered  = "sink-at-least-once"  // RabbitMQ, de-duplicated by message id, holds each committed change once
	InvMemory     = "node-memory"         // each node's memory stays within its documented bound
	InvFollow     = "failover-follow"     // braid reads a failed-over source's promoted server within its bound
	maxListed     = 8                     // seqs or rows a violation names at most
)

// Violation is one broken invariant: its name, what broke it (seqs or
// rows), and when in the run it happened, to find the faults around it
// (-1: no one time).
type Violation struct {
	Invariant string
	Detail    string
	At        time.Duration
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// Check checks every invariant on what a run observed; no violation
// means the run passed.
func Check(o Observation) []Violation {
	var out []Violation
	out = append(out, checkDense(o)...)
	out = append(out, checkConsistent(o)...)
	out = append(out, checkLedger(o)...)
	out = append(out, checkSnapshot(o)...)
	out = append(out, checkTargets(o)...)
	out = append(out, checkPublished(o)...)
	out = append(out, checkDelivered(o)...)
	for _, t := range o.Takeovers {
		if t.By == "" && t.For >= t.Bound {
			out = append(out, Violation{InvTakeover, fmt.Sprintf("owner %s was cut off from the other nodes for %v and no other node took the destination over",
				t.Node, t.For.Round(100*time.Millisecond)), t.At})
		}
	}
	for _, m := range o.Memory {
		if m.Peak > m.Bound {
			out = append(out, Violation{InvMemory, fmt.Sprintf("node %s held %.1f MiB (anonymous resident memory), over its bound of %.1f MiB",
				m.Node, mib(m.Peak), mib(m.Bound)), m.At})
		}
	}
	for _, f := range o.Follows {
		switch {
		case f.After < 0:
			out = append(out, Violation{InvFollow, fmt.Sprintf("source %s: braid did not read the promoted server within %v of the failover (bound %v)",
				f.Source, followWait, f.Bound), f.At})
		case f.After > f.Bound:
			out = append(out, Violation{InvFollow, fmt.Sprintf("source %s: braid read the promoted server %v after the failover, over its bound of %v",
				f.Source, f.After.Round(100*time.Millisecond), f.Bound), f.At})
		}
	}
	for _, e := range o.Exits {
		out = append(out, Violation{InvNoExit, fmt.Sprintf("%s exited (%s) with no fault stopping it", e.Process, e.How), e.At})
	}
	return out
}

// checkDense: every seq up to the head reached each consumer. A
// transaction of no rows (a snapshot chunk that found none) is no
// exception: the native API sends it as a message of type EMPTY, the
// canal protocol as its BEGIN and END entries, and both consumers record
// its seq.
func checkDense(o Observation) []Violation {
	var out []Violation
	for _, c := range o.Consumers {
		var missing []string
		first := time.Duration(-1)
		for seq := uint64(1); seq <= o.Head; seq++ {
			if _, ok := c.Txns[seq]; ok {
				continue
			}
			if first < 0 {
				// The gap is around when the seq after it came.
				first = arrival(c, seq)
			}
			missing = append(missing, strconv.FormatUint(seq, 10))
		}
		if len(missing) > 0 {
			detail := fmt.Sprintf("consumer %s lacks %d of seqs 1..%d: %s", c.Name, len(missing), o.Head, list(missing))
			if c.LastError != "" {
				detail += "; its last error: " + c.LastError
			}
			out = append(out, Violation{InvDense, detail, first})
		}
	}
	return out
}

// arrival is when the first transaction after seq reached c (-1: none).
func arrival(c Consumed, seq uint64) time.Duration {
	best, at := uint64(0), time.Duration(-1)
	for s, t := range c.Txns {
		if s > seq && (best == 0 || s < best) {
			best, at = s, t.At
		}
	}
	return at
}

func checkConsistent(o Observation) []Violation {
	var out []Violation
	for _, c := range o.Consumers {
		for _, k := range c.Conflicts {
			out = append(out, Violation{InvConsistent, fmt.Sprintf("consumer %s received seq %d twice, as [%s] then as [%s]",
				c.Name, k.Seq, abbrev(k.First), abbrev(k.Then)), k.At})
		}
	}
	if len(o.Consumers) < 2 {
		return out
	}
	ref := o.Consumers[0]
	for _, c := range o.Consumers[1:] {
		var differ []string
		at := time.Duration(-1)
		for _, seq := range sortedSeqs(c.Txns) {
			rt, ok := ref.Txns[seq]
			if !ok {
				continue // stream-dense names it
			}
			if a, b := rt.Fingerprint(), c.Txns[seq].Fingerprint(); !rt.Same(c.Txns[seq]) {
				if at < 0 {
					at = c.Txns[seq].At
				}
				differ = append(differ, fmt.Sprintf("seq %d: %s has [%s], %s has [%s]", seq, ref.Name, abbrev(a), c.Name, abbrev(b)))
			}
		}
		if len(differ) > 0 {
			out = append(out, Violation{InvConsistent, fmt.Sprintf("%d seqs differ between %s and %s: %s",
				len(differ), ref.Name, c.Name, list(differ)), at})
		}
	}
	return out
}

func checkLedger(o Observation) []Violation {
	if len(o.Consumers) == 0 {
		return nil
	}
	ref := o.Consumers[0]
	seen := map[string][]uint64{} // change → the seqs that carry it
	for _, seq := range sortedSeqs(ref.Txns) {
		t := ref.Txns[seq]
		if t.Snapshot || t.DDL != "" {
			continue
		}
		for _, r := range t.Rows {
			seen[r] = append(seen[r], seq)
		}
	}
	var lost, twice, unknown []string
	lostAt, twiceAt, unknownAt := time.Duration(-1), time.Duration(-1), time.Duration(-1)
	mine := map[string]bool{}
	for _, tx := range o.Ledger {
		committed := !tx.Uncertain || tx.Committed
		for _, ch := range tx.Changes {
			mine[ch] = true
			if !committed {
				if len(seen[ch]) > 0 {
					unknown = append(unknown, fmt.Sprintf("%s (source %s, tx %d rolled back) at seq %d", ch, tx.Source, tx.ID, seen[ch][0]))
					unknownAt = firstAt(unknownAt, tx.At)
				}
				continue
			}
			switch n := len(seen[ch]); {
			case n == 0:
				lost = append(lost, fmt.Sprintf("%s (source %s, tx %d at %v)", ch, tx.Source, tx.ID, tx.At.Round(time.Millisecond)))
				lostAt = firstAt(lostAt, tx.At)
			case n > 1:
				twice = append(twice, fmt.Sprintf("%s at seqs %v", ch, seen[ch]))
				twiceAt = firstAt(twiceAt, ref.Txns[seen[ch][1]].At)
			}
		}
	}
	for _, seq := range sortedSeqs(ref.Txns) {
		t := ref.Txns[seq]
		if t.Snapshot || t.DDL != "" {
			continue
		}
		for _, r := range t.Rows {
			if !mine[r] {
				unknown = append(unknown, fmt.Sprintf("%s at seq %d", r, seq))
				unknownAt = firstAt(unknownAt, t.At)
			}
		}
	}
	var out []Violation
	if len(lost) > 0 {
		out = append(out, Violation{InvLedger, fmt.Sprintf("%d committed changes never reached the stream (%s): %s", len(lost), ref.Name, list(lost)), lostAt})
	}
	if len(twice) > 0 {
		out = append(out, Violation{InvLedger, fmt.Sprintf("%d changes are in the stream more than once (%s): %s", len(twice), ref.Name, list(twice)), twiceAt})
	}
	if len(unknown) > 0 {
		out = append(out, Violation{InvLedger, fmt.Sprintf("%d changes in the stream were never committed (%s): %s", len(unknown), ref.Name, list(unknown)), unknownAt})
	}
	return out
}

func checkSnapshot(o Observation) []Violation {
	if len(o.Consumers) == 0 || len(o.Preloaded) == 0 {
		return nil
	}
	ref := o.Consumers[0]
	got := map[int64]int{}
	for _, t := range ref.Txns {
		if !t.Snapshot {
			continue
		}
		for _, r := range t.Rows {
			if id, ok := rowID(r); ok {
				got[id]++
			}
		}
	}
	var missing, twice []string
	for _, id := range o.Preloaded {
		switch got[id] {
		case 0:
			missing = append(missing, strconv.FormatInt(id, 10))
		case 1:
		default:
			twice = append(twice, strconv.FormatInt(id, 10))
		}
	}
	var out []Violation
	if len(missing) > 0 {
		out = append(out, Violation{InvSnapshot, fmt.Sprintf("%d rows the sources held first came in no snapshot chunk (%s): ids %s", len(missing), ref.Name, list(missing)), -1})
	}
	if len(twice) > 0 {
		out = append(out, Violation{InvSnapshot, fmt.Sprintf("%d rows came in two snapshot chunks (%s): ids %s", len(twice), ref.Name, list(twice)), -1})
	}
	return out
}

// checkTargets compares each target with the sources' rows: an
// exactly-once one must hold them and nothing else, each once; the others
// must hold each as it is now.
func checkTargets(o Observation) []Violation {
	src := map[int64]string{}
	for _, r := range o.Sources {
		src[r.ID] = r.Line
	}
	lastWrite := map[int64]time.Duration{}
	for _, tx := range o.Ledger {
		for _, ch := range tx.Changes {
			if id, ok := rowID(ch); ok {
				lastWrite[id] = tx.At
			}
		}
	}
	var out []Violation
	for _, t := range o.Targets {
		inv := InvSinkHolds
		if t.ExactlyOnce {
			inv = InvSinkEqual
		}
		got := map[int64][]string{}
		for _, r := range t.Rows {
			got[r.ID] = append(got[r.ID], r.Line)
		}
		var lost, stale, twice, extra []string
		at := time.Duration(-1)
		note := func(id int64) {
			if w, ok := lastWrite[id]; ok {
				at = firstAt(at, w)
			}
		}
		for _, id := range sortedKeys(src) {
			want, have := src[id], got[id]
			switch {
			case len(have) == 0:
				lost = append(lost, want)
				note(id)
			case len(have) > 1 && t.ExactlyOnce:
				twice = append(twice, fmt.Sprintf("%s ×%d", want, len(have)))
				note(id)
			case !slices.Contains(have, want):
				stale = append(stale, fmt.Sprintf("id %d: source [%s], %s [%s]", id, want, t.Sink, have[0]))
				note(id)
			}
		}
		if t.ExactlyOnce {
			for _, id := range sortedKeys(got) {
				if _, ok := src[id]; !ok {
					extra = append(extra, got[id][0])
					note(id)
				}
			}
		}
		if len(lost) > 0 {
			out = append(out, Violation{inv, fmt.Sprintf("sink %s lacks %d rows the sources hold: %s", t.Sink, len(lost), list(lost)), at})
		}
		if len(twice) > 0 {
			out = append(out, Violation{inv, fmt.Sprintf("sink %s holds %d rows more than once (applied twice): %s", t.Sink, len(twice), list(twice)), at})
		}
		if len(stale) > 0 {
			out = append(out, Violation{inv, fmt.Sprintf("sink %s holds %d rows unlike the sources (stale): %s", t.Sink, len(stale), list(stale)), at})
		}
		if len(extra) > 0 {
			out = append(out, Violation{inv, fmt.Sprintf("sink %s holds %d rows the sources do not: %s", t.Sink, len(extra), list(extra)), at})
		}
	}
	return out
}

// checkPublished checks that a message sink published every committed
// change of the ledger, and none twice (the Kafka sink finds its last
// record after a crash and publishes nothing again, docs/sinks.md).
func checkPublished(o Observation) []Violation {
	var out []Violation
	for _, p := range o.Published {
		lost, twice, lostAt, twiceAt := countLedger(o.Ledger, p.Changes)
		if len(lost) > 0 {
			out = append(out, Violation{InvPublished, fmt.Sprintf("sink %s never published %d committed changes: %s", p.Sink, len(lost), list(lost)), lostAt})
		}
		if len(twice) > 0 {
			out = append(out, Violation{InvPublished, fmt.Sprintf("sink %s published %d changes more than once: %s", p.Sink, len(twice), list(twice)), twiceAt})
		}
	}
	return out
}

// countLedger compares the ledger's committed changes with how often a
// sink published or delivered each (seen): those never seen and those
// seen more than once, each with the time of the first such change.
func countLedger(ledger []*Tx, seen map[string]int) (lost, twice []string, lostAt, twiceAt time.Duration) {
	lostAt, twiceAt = -1, -1
	for _, tx := range ledger {
		if tx.Uncertain && !tx.Committed {
			continue
		}
		for _, ch := range tx.Changes {
			switch n := seen[ch]; {
			case n == 0:
				lost = append(lost, fmt.Sprintf("%s (source %s, tx %d)", ch, tx.Source, tx.ID))
				lostAt = firstAt(lostAt, tx.At)
			case n > 1:
				twice = append(twice, fmt.Sprintf("%s ×%d", ch, n))
				twiceAt = firstAt(twiceAt, tx.At)
			}
		}
	}
	return lost, twice, lostAt, twiceAt
}

// checkDelivered checks an at-least-once message sink: a message may
// come more than once, always with its message id and body (the sink
// publishes again with the same ids, docs/sinks.md), so a consumer that
// de-duplicates by message id gets every committed change, each once.
func checkDelivered(o Observation) []Violation {
	var out []Violation
	for _, d := range o.Delivered {
		lost, twice, lostAt, twiceAt := countLedger(o.Ledger, d.Changes)
		if len(lost) > 0 {
			out = append(out, Violation{InvDelivered, fmt.Sprintf("sink %s never delivered %d committed changes: %s", d.Sink, len(lost), list(lost)), lostAt})
		}
		if len(twice) > 0 {
			out = append(out, Violation{InvDelivered, fmt.Sprintf("sink %s delivered %d changes under more than one message id (a consumer de-duplicating by id applies them twice): %s",
				d.Sink, len(twice), list(twice)), twiceAt})
		}
		if len(d.Conflicts) > 0 {
			out = append(out, Violation{InvDelivered, fmt.Sprintf("sink %s delivered %d message ids again with another body: %s", d.Sink, len(d.Conflicts), list(d.Conflicts)), -1})
		}
	}
	return out
}

// rowID is the id of a change ("U 42 7") or a row line ("42 7 …").
func rowID(s string) (int64, bool) {
	f := strings.Fields(s)
	if len(f) > 1 && len(f[0]) == 1 && !(f[0][0] >= '0' && f[0][0] <= '9') {
		f = f[1:]
	}
	if len(f) == 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(f[0], 10, 64)
	return id, err == nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func firstAt(cur, at time.Duration) time.Duration {
	if cur < 0 || (at >= 0 && at < cur) {
		return at
	}
	return cur
}

func sortedSeqs(m map[uint64]*Txn) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[int64]V) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// list shows the first few of items, and how many more there are.
func list(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:maxListed], "; ") + fmt.Sprintf("; and %d more", len(items)-maxListed)
}

func abbrev(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}
