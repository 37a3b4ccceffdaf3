package demo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/braid-cdc/braid/client"
)

// The demo's consumer: the merged stream, printed one row change a line.

// demoStream is the consumer's side: it prints each message and keeps
// what the narration needs (counts, the seqs, the pause around a kill).
// handle runs on the Stream goroutine; the other methods on the demo's.
type demoStream struct {
	con       *console
	json      bool
	first     chan struct{} // closed at the first row change
	firstOnce sync.Once

	mu        sync.Mutex
	st        streamStats
	lastAt    time.Time // when the last message came
	marked    bool      // a node died, and no message came since
	gap       streamGap
	gapClosed bool
}

// streamStats counts what the stream delivered.
type streamStats struct {
	txs, rows         int64 // transactions with row changes, and the row changes
	firstSeq, lastSeq uint64
	problems          []string // seqs out of step
}

// streamGap is the stream's pause around a node's death.
type streamGap struct {
	pause               time.Duration // from the last message before to the first after
	beforeSeq, afterSeq uint64
}

func newDemoStream(con *console, asJSON bool) *demoStream {
	return &demoStream{con: con, json: asJSON, first: make(chan struct{})}
}

func (s *demoStream) handle(m client.Message) error {
	now := time.Now()
	s.mu.Lock()
	switch st := &s.st; {
	case m.Seq > st.lastSeq:
		if st.lastSeq != 0 && m.Seq != st.lastSeq+1 && len(st.problems) < 10 {
			st.problems = append(st.problems, fmt.Sprintf("seq %d came after %d", m.Seq, st.lastSeq))
		}
		if st.firstSeq == 0 {
			st.firstSeq = m.Seq
		}
		st.lastSeq = m.Seq
		if !m.IsDdl {
			st.txs++
		}
	case m.Seq < st.lastSeq && len(st.problems) < 10:
		st.problems = append(st.problems, fmt.Sprintf("seq %d came again after %d", m.Seq, st.lastSeq))
	}
	if !m.IsDdl {
		s.st.rows += int64(len(m.Data))
	}
	resumed := s.marked
	if resumed {
		s.marked = false
		s.gap.pause, s.gap.afterSeq, s.gapClosed = now.Sub(s.lastAt), m.Seq, true
	}
	gap := s.gap
	s.lastAt = now
	s.mu.Unlock()

	if resumed {
		s.con.sayf("*** the stream resumed after a %v pause: seq %d follows seq %d, %s",
			gap.pause.Round(10*time.Millisecond), gap.afterSeq, gap.beforeSeq, s.verdict())
	}

	if s.json {
		s.con.line(string(m.Raw))
	} else {
		for _, l := range formatMessage(m, now) {
			s.con.line(l)
		}
	}
	if !m.IsDdl {
		s.firstOnce.Do(func() { close(s.first) })
	}
	return nil
}

// mark notes a node's death: the pause of the stream is measured from the
// last message before it to the first after.
func (s *demoStream) mark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked, s.gapClosed = true, false
	s.gap = streamGap{beforeSeq: s.st.lastSeq}
}

// waitResumed waits for the first message after the mark.
func (s *demoStream) waitResumed(ctx context.Context) error {
	deadline := time.Now().Add(demoWait)
	for {
		s.mu.Lock()
		ok := s.gapClosed
		s.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the stream did not resume within %v", demoWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *demoStream) stats() streamStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.problems = append([]string(nil), st.problems...)
	return st
}

// verdict says whether the seqs so far came each once, none skipped.
func (s *demoStream) verdict() string {
	st := s.stats()
	if len(st.problems) == 0 {
		return "every seq once, none skipped"
	}
	return "SEQS OUT OF STEP: " + strings.Join(st.problems, "; ")
}

// demoColumns are the orders columns a stream line shows, in this order.
var demoColumns = []string{"id", "customer", "amount", "status"}

// formatMessage renders a message as one line per row change (or one for
// DDL), e.g.
//
//	12:00:01.234  seq 42    shop.orders  INSERT  id=7 customer=3 amount=12.50 status=new     (from shop_3 on source b)
func formatMessage(m client.Message, at time.Time) []string {
	head := fmt.Sprintf("%s  seq %-5d %s.%s  %-6s  ", at.Format("15:04:05.000"), m.Seq, m.Database, m.Table, m.Type)
	from := fmt.Sprintf("  (from %s on source %s)", m.OriginDatabase, m.Source)
	if m.IsDdl {
		return []string{head + fmt.Sprintf("%-44s", abbrevSQL(m.SQL, 44)) + from}
	}
	lines := make([]string, 0, len(m.Data))
	for i, row := range m.Data {
		var f []string
		for _, col := range demoColumns {
			v, ok := row[col]
			if !ok {
				continue
			}
			switch {
			case col == "id":
				f = append(f, col+"="+demoValue(v))
			case m.Type == "UPDATE":
				if i < len(m.Old) {
					if old, changed := m.Old[i][col]; changed {
						f = append(f, col+"="+demoValue(old)+"→"+demoValue(v))
					}
				}
			case m.Type == "DELETE":
				if col == "status" {
					f = append(f, col+"="+demoValue(v))
				}
			default:
				f = append(f, col+"="+demoValue(v))
			}
		}
		lines = append(lines, head+fmt.Sprintf("%-44s", strings.Join(f, " "))+from)
	}
	return lines
}

func demoValue(v *string) string {
	if v == nil {
		return "NULL"
	}
	return *v
}

// abbrevSQL folds a statement onto one line of at most n characters.
func abbrevSQL(sql string, n int) string {
	s := []rune(strings.Join(strings.Fields(sql), " "))
	if len(s) > n {
		return string(s[:n-1]) + "…"
	}
	return string(s)
}
