package conformance

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// env is one case: its shard tables on the suite's server, its place of
// the target, and the destination that applies them to it.
type env struct {
	t       *testing.T
	h       Harness
	srv     *mysqltest.Server
	db      string // the logical database, and its shard tables' prefix
	c       Case
	place   Target
	altered bool // column c added
	changes int  // the row changes written to the shard tables
	// keyChanges counts the UPDATEs among changes that change a key.
	keyChanges int
}

// table is the case's logical table.
func (e *env) table() string { return e.db + ".orders" }

// spec returns the destination of the case's shard tables, merged to
// its logical table, with sink sk: as a user writes it, defaults applied
// and validated.
func (e *env) spec(sk spec.Sink) *spec.Spec {
	e.t.Helper()
	ds := spec.Spec{Name: e.db, Tables: []string{e.db + `_\d+\.orders`}, Route: []spec.RouteRule{{Match: e.db + `_\d+\.(\w+)`, To: e.db + ".$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "s", Address: e.srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks:     []spec.Sink{sk}}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		e.t.Fatal(err)
	}
	return &ds
}

// sink returns the spec of the case's sink named name: workers 4 unless
// it publishes in order.
func (e *env) sink(name string) spec.Sink {
	sk := e.place.Sink(name, []string{e.table()})
	if !e.h.Ordered {
		sk.Workers = 4
	}
	return sk
}

// dest is a destination running as braid runs one: its sinks' clients
// and cursors prepared (sink/sinkrun.Prepare), its pipeline, and its sinks
// (sink/sinkrun.Start), which Stop and Start stop and start again on the
// same pipeline.
type dest struct {
	e       *env
	ds      *spec.Spec
	cursors group.CursorStore
	log     *slog.Logger
	p       *stream.Pipeline
	set     *sinkrun.Set
	// live, when set, is the sinks' sink.Runner.Live.
	live func() error
	// least is a seq the sink must apply through before it is caught up,
	// beside its pipeline's head: an earlier pipeline's head, for a
	// pipeline started again, whose own head is behind until it has read
	// the sources again.
	least uint64
}

// start runs ds with its sinks' cursors kept in cursors (nil: none, so
// that the stream is read from the start).
func (e *env) start(ds *spec.Spec, cursors group.CursorStore) *dest {
	e.t.Helper()
	d := &dest{e: e, ds: ds, cursors: cursors, log: slog.New(slog.NewTextHandler(e.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	d.p = Pipeline(e.t, ds, cursors, d.log)
	d.Start()
	e.t.Cleanup(d.Close)
	return d
}

// Pipeline prepares ds's sinks (sinkrun.Prepare: their clients, with
// their cursors from cursors, nil for none; each target reached once)
// and starts its pipeline, closed when t ends: what braid does before it
// starts a destination's sinks.
func Pipeline(t testing.TB, ds *spec.Spec, cursors group.CursorStore, log *slog.Logger) *stream.Pipeline {
	t.Helper()
	clients := map[string]*group.Cursor{}
	if err := sinkrun.Prepare(t.Context(), ds, clients, cursors, log); err != nil {
		t.Fatal(err)
	}
	p, err := stream.StartPipeline(t.Context(), stream.PipelineConfig{Spec: ds, Clients: clients, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Start runs destination ds as braid runs it, its sinks' cursors kept
// in cursors (nil: none), until t ends: its pipeline (Pipeline) and its
// sinks (sinkrun.Start).
func Start(t testing.TB, ds *spec.Spec, cursors group.CursorStore, log *slog.Logger) (*stream.Pipeline, *sinkrun.Set) {
	t.Helper()
	p := Pipeline(t, ds, cursors, log)
	set := sinkrun.Start(t.Context(), p, ds, cursors, nil, log)
	t.Cleanup(set.Stop)
	return p, set
}

// Start starts the sinks (again).
func (d *dest) Start() { d.set = sinkrun.Start(d.e.t.Context(), d.p, d.ds, d.cursors, d.live, d.log) }

// Stop stops the sinks, in whatever they are doing.
func (d *dest) Stop() {
	if d.set != nil {
		d.set.Stop()
		d.set = nil
	}
}

// Close stops the sinks and the pipeline.
func (d *dest) Close() {
	d.Stop()
	d.p.Close()
}

// stats is the sink's state now.
func (d *dest) stats() stream.SinkStats { return d.set.Stats()[0] }

// head is the seq of the destination's last event.
func (d *dest) head() uint64 { return d.p.Dest.Stats().Seq }

// target returns what the target holds, canonical (row).
func (e *env) target(sk spec.Sink) ([]string, error) {
	rows, err := e.place.Rows(sk, e.table())
	if err != nil {
		return nil, err
	}
	cs := e.columns()
	if sk.OriginColumn != "" {
		cs = append([]string{sk.OriginColumn}, cs...)
	}
	return canonical(rows, cs), nil
}

// caughtUp waits until the sink has applied the stream through its head
// now and the target holds want.
func (d *dest) caughtUp(want []string) {
	d.e.t.Helper()
	head := max(d.head(), d.least)
	sk := d.ds.Sinks[0]
	sinktest.WaitFor(d.e.t, 60*time.Second, func() (bool, string) {
		got, err := d.e.target(sk)
		st := d.stats()
		if err == nil && slices.Equal(got, want) && st.AppliedSeq >= head {
			return true, ""
		}
		return false, fmt.Sprintf("the target holds %d rows, the sources %d (read error %v); applied seq %d of %d, last error %q; first differences:\n%s",
			len(got), len(want), err, st.AppliedSeq, head, st.LastError, diff(got, want))
	})
}

// savedCursor waits until cursors holds the sink's cursor through seq
// at least, and returns it. A sink saves its cursor after it acks what
// it applied, so a moment after its stats say so, and only after the
// last of a run of acks.
func (d *dest) savedCursor(cursors group.CursorStore, seq uint64) *group.Cursor {
	d.e.t.Helper()
	var c *group.Cursor
	sinktest.WaitFor(d.e.t, 30*time.Second, func() (bool, string) {
		var err error
		c, err = cursors.Load(d.ds.Name, sink.ClientID(d.ds.Sinks[0].Name))
		switch {
		case err != nil:
			return false, fmt.Sprintf("the sink's cursor: %v", err)
		case c == nil:
			return false, fmt.Sprintf("no cursor of the sink saved; it applied through seq %d", d.stats().AppliedSeq)
		case c.Seq < seq:
			return false, fmt.Sprintf("the sink's cursor saved is at seq %d, want %d", c.Seq, seq)
		}
		return true, ""
	})
	return c
}

// equal waits until the sink has applied the stream through its head
// and the target equals the sources.
func (d *dest) equal() { d.e.t.Helper(); d.caughtUp(d.e.sources()) }

// verify runs braid sink verify's comparison of the sink (as the HTTP
// API runs it) once it has caught up: every row sampled, none differs.
func (d *dest) verify() {
	d.e.t.Helper()
	want := d.e.sources()
	v, err := d.set.Verify(d.e.t.Context(), d.ds.Sinks[0].Name, 10*len(want)+100, []string{d.e.table()})
	if err != nil || len(v.Differences) != 0 || v.Compared != len(want) {
		d.e.t.Fatalf("braid sink verify: %v: %d rows compared of %d, differences %+v", err, v.Compared, len(want), v.Differences)
	}
}

// checkpoints fails the case unless the place holds checkpoints of sk
// exactly when want says, for a target that can tell.
func (e *env) checkpoints(sk spec.Sink, want bool) {
	e.t.Helper()
	cp, ok := e.place.(Checkpointed)
	if !ok {
		return
	}
	if has, err := cp.HasCheckpoints(sk); err != nil || has != want {
		e.t.Fatalf("sink %s of mode %s: checkpoints kept %v (%v), want %v", sk.Name, sk.Mode, has, err, want)
	}
}

// failed waits until the sink's last error says each of want.
func (d *dest) failed(want ...string) string {
	d.e.t.Helper()
	var last string
	sinktest.WaitFor(d.e.t, 30*time.Second, func() (bool, string) {
		last = d.stats().LastError
		ok := last != ""
		for _, w := range want {
			ok = ok && strings.Contains(last, w)
		}
		return ok, fmt.Sprintf("the sink's last error %q, want one saying %q", last, want)
	})
	return last
}

// exactlyOnce fails the case unless the sink, a keyed target, has
// applied no change twice and missed none since it started: no INSERT
// found its key, no UPDATE or DELETE missed its row.
func (d *dest) exactlyOnce(when string) {
	d.e.t.Helper()
	if d.e.h.Check != nil {
		d.e.h.Check(d.e.t, d.e.c, d.stats())
	}
	if d.e.h.Ordered {
		return
	}
	if st := d.stats(); st.Upserts != 0 || st.Missing != 0 {
		d.e.t.Fatalf("%s: %d INSERTs found their key and %d UPDATEs or DELETEs missed their row: something was applied twice or missed (%+v)",
			when, st.Upserts, st.Missing, st)
	}
}

// ShopSpec is destination shop of the shard tables shop_N.orders of
// internal/testutil/sinktest's shop on servers shards (a source each),
// merged to shop.orders, with sinks sks: defaults applied, validated.
// Target packages' own tests of the shop workload start from it.
func ShopSpec(t testing.TB, shards []*mysqltest.Server, sks ...spec.Sink) *spec.Spec {
	t.Helper()
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond), Sinks: sks}
	for i, s := range shards {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	return &ds
}
