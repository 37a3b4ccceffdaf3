package conformance

import (
	"fmt"
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// Harness is what a target package gives the suite: how to make a place
// of its own for one case, and what the target does by design.
type Harness struct {
	// New makes a place of the target for the case t runs (a database, a
	// vhost, a key prefix, a Kafka cluster), removed when t ends.
	New func(t *testing.T) Target
	// Ordered is set for a sink that publishes in stream order with one
	// worker (rabbitmq, kafka): it keeps no per-worker checkpoints, and
	// the suite checks messages (Messages) as well as the rows rebuilt
	// from them.
	Ordered bool
	// PartialApplied is set for a target that applies an UPDATE whose
	// after image leaves columns out as the source wrote it (mysql's
	// binlog replay, or a publisher that hands it on); unset, the sink
	// stops at it with sink.PartialImageError's words.
	PartialApplied bool
	// Duplicates is set for a publisher that may deliver a message again
	// after a restart or a replay (rabbitmq: consumers de-duplicate by
	// message_id); unset, every message is in the target once.
	Duplicates bool
	// SplitKeyChanges is set for a publisher that publishes an UPDATE
	// that changes its row's key as two row messages, a DELETE of the old
	// key and an INSERT of the new (kafka: a key's records on its own
	// partition).
	SplitKeyChanges bool
	// AtLeastOnce is set for a target that also takes mode:
	// at-least-once (no checkpoints; a restart applies again, as
	// upserts).
	AtLeastOnce bool
	// Check, when set, checks what is particular to the target in the
	// sink's state at the end of a case (mysql: every row change
	// replayed as the binlog's row events).
	Check func(t *testing.T, c Case, st stream.SinkStats)
	// Cannot names the cases the target cannot do by design, with why:
	// the suite skips each, saying so.
	Cannot map[Case]string
}

// Target is one place of a target, fresh for one case.
type Target interface {
	// Sink returns the spec of a sink named name that writes the logical
	// tables ("database.table") to this place. The suite sets mode,
	// workers and origin_column itself.
	Sink(name string, tables []string) spec.Sink
	// Rows returns the rows the target holds of logical table table for
	// sink sk, each by column name, nil for NULL (a column left out is
	// NULL too); for a publisher, the rows its messages rebuild, applied
	// in stream order. An error is for a place not readable yet: the
	// suite reads again.
	Rows(sk spec.Sink, table string) ([]map[string]*string, error)
}

// Publisher is a Target of an Ordered sink, whose messages the suite
// checks one by one.
type Publisher interface {
	Target
	// Messages returns every row message of logical table table the
	// target holds or delivered, duplicates included, in the order they
	// came (DDL messages left out).
	Messages(sk spec.Sink, table string) ([]Message, error)
}

// Checkpointed is a Target of a keyed sink that can tell whether the
// sink keeps checkpoints there: an exactly-once sink must, an
// at-least-once one must not.
type Checkpointed interface {
	Target
	HasCheckpoints(sk spec.Sink) (bool, error)
}

// Message is a row message's place in the stream, its transaction's seq
// and its place n in it (the message id's dest:seq:n), and how many row
// changes it carries.
type Message struct {
	Seq  uint64
	N    int
	Rows int
}

func (m Message) String() string { return fmt.Sprintf("%d:%d", m.Seq, m.N) }

// Case is one case of the suite, the name of its subtest.
type Case string

// The cases, in the order Run runs them.
const (
	Apply     Case = "apply"
	Workers   Case = "workers"
	Partial   Case = "partial"
	Collision Case = "collision"
	Once      Case = "once"
	Replay    Case = "replay"
	Restart   Case = "restart"
	Lease     Case = "lease"
)

// Cases are the suite's cases, in order.
var Cases = []Case{Apply, Workers, Partial, Collision, Once, Replay, Restart, Lease}

// Run runs every case against the target of h, each a subtest, on one
// MariaDB server of the suite's started for t (each case in databases of
// its own there).
func Run(t *testing.T, h Harness) {
	srv := mysqltest.Start(t)
	cases := map[Case]func(*env){
		Apply: testApply, Workers: testWorkers, Partial: testPartial, Collision: testCollision,
		Once: testOnce, Replay: testReplay, Restart: testRestart, Lease: testLease,
	}
	for _, c := range Cases {
		t.Run(string(c), func(t *testing.T) {
			if why, ok := h.Cannot[c]; ok {
				t.Skipf("the target cannot do case %s by design: %s", c, why)
			}
			cases[c](&env{t: t, h: h, srv: srv, db: string(c), c: c, place: h.New(t)})
		})
	}
}
